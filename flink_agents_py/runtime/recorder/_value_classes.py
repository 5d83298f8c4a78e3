"""Classes a value's JSON form leaves out, and code that is a library's.

Part of a durable call's identity (``_outcomes.call_digest``, ``_identity.stable_form``):

- ``value_classes``: an enum member's JSON form is its value alone and a namedtuple's is its
  list, so ``grade(AppleGrade.FIRST)`` and ``grade(PearGrade.FIRST)``, or ``area(Rect(2, 3))``
  and ``area(Box(2, 3))``, would be one call; their classes count besides;
- ``library_code`` and ``library_class``: code and classes of the standard library or of
  installed packages (their internals change with their releases, and their objects' state,
  a client's connection pool or cache, changes as they are used).
"""

from __future__ import annotations

import enum
import sys
import sysconfig
import types
from typing import Any

__all__ = ["library_class", "library_code", "value_classes"]

_SCALARS = (str, int, bool, float, type(None))
_DEPTH = 32
"""How deep ``value_classes`` looks into nested lists, tuples and dicts."""


def _qualified(kind: type) -> str:
    return f"{kind.__module__}:{kind.__qualname__}"


def value_classes(value: Any, depth: int = 0, *, sort_dicts: bool = False,
                  kinds: list[str] | None = None) -> list[str]:
    """The classes of the enum members and namedtuples in ``value``, in walk order.

    Their JSON form leaves their class out (``Color.RED`` and ``Size.SMALL`` with the value
    ``1`` are both ``1``; ``Rect(2, 3)`` and ``Box(2, 3)`` are both ``[2, 3]``): a call's
    identity adds them, so such calls differ. Lists, tuples, dicts and a namedtuple's fields
    are looked into; pydantic models are not (their class is in their JSON form, and their
    fields' types say which enum a value is). An enum class saying
    ``__identity_is_value__`` is not counted: its members were plain values before it was
    made (``MessageRole``: a role was its text), and calls recorded then, with the values,
    must keep their identity.

    Args:
        value: a call's arguments (or a value a callable binds).
        depth: how deep ``value`` is (past 32 levels nothing more is found).
        sort_dicts: walk each dict's entries in the order of their keys, not as they were
            inserted (a dict's JSON form, and so a call's arguments, do not depend on the
            order its entries were made in: ``f(a=..., b=...)`` is ``f(b=..., a=...)``).
            The digest of a call's own arguments keeps the insertion order (recorded so).
        kinds: when given, gets ``"T"`` for each plain tuple and ``"L"`` for each list met,
            ``"Y"`` for each ``bytes`` and ``"A"`` for each ``bytearray``, in walk order:
            their JSON forms are alike, so ``f((1, 2))`` and ``f([1, 2])``, or ``f(b"x")``
            and ``f(bytearray(b"x"))``, are told apart by it (``_binding.sequence_kinds``).

    Returns:
        ``module:qualname`` of each class, in walk order (a namedtuple's before its fields',
        dict keys before values); empty when there is none, so an identity without them is
        what it was before they were kept.
    """
    kind = type(value)
    if kind in _SCALARS or depth > _DEPTH:
        return []
    if isinstance(value, enum.Enum):
        return [] if getattr(kind, "__identity_is_value__", False) else [_qualified(kind)]
    if kinds is not None and (kind is bytes or kind is bytearray):
        kinds.append("Y" if kind is bytes else "A")
        return []
    found: list[str] = []
    if kind is list or kind is tuple or (isinstance(value, tuple) and hasattr(kind, "_fields")):
        if kind is not list and kind is not tuple:
            found.append(_qualified(kind))  # a namedtuple: its list, and its class
        elif kinds is not None:
            kinds.append("L" if kind is list else "T")
        for v in value:
            if type(v) not in _SCALARS:
                found += value_classes(v, depth + 1, sort_dicts=sort_dicts, kinds=kinds)
    elif kind is dict:
        items = sorted(value.items(), key=lambda kv: repr(kv[0])) \
            if sort_dicts and len(value) > 1 else value.items()
        for k, v in items:
            if type(k) not in _SCALARS:
                found += value_classes(k, depth + 1, sort_dicts=sort_dicts, kinds=kinds)
            if type(v) not in _SCALARS:
                found += value_classes(v, depth + 1, sort_dicts=sort_dicts, kinds=kinds)
    return found


_LIBRARY_DIRS = tuple(sorted({path for name in ("stdlib", "platstdlib", "purelib", "platlib")
                              if (path := sysconfig.get_paths().get(name))}))
_FRAMEWORK = "flink_agents_py."


def library_code(fn: types.FunctionType) -> bool:
    """Whether ``fn``'s code is a library's (standard library or installed package).

    Returns:
        Whether its file is under the interpreter's library or site-packages directories.
    """
    return fn.__code__.co_filename.startswith(_LIBRARY_DIRS)


def library_class(kind: type) -> bool:
    """Whether ``kind`` is a library's class: its module's file is a library's, or ours.

    A class of a module with no file (``__main__`` run from standard input, code made with
    ``exec``) is the user's.

    Returns:
        Whether it is the standard library's, an installed package's or flink-agents-py's.
    """
    module = str(getattr(kind, "__module__", "") or "")
    if module.startswith(_FRAMEWORK) or module.split(".", 1)[0] in _STDLIB:
        return True
    file = getattr(sys.modules.get(module), "__file__", None)
    return isinstance(file, str) and file.startswith(_LIBRARY_DIRS)


_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"builtins", "__builtin__"}
