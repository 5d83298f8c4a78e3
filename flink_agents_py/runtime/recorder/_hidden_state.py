"""State a bound object keeps where its instance attributes do not show it.

Part of what a durable call's callable binds (``_identity.stable_form``), for two kinds of
object the attribute walk sees as empty:

- a value object with no instance attributes whose class pickles itself (numpy scalars and
  arrays, other C extension value types): ``pickled_state``, what its pickling protocol gives;
- an object of a class made in a function (not importable by ``module:qualname``): one
  qualified name for every version the function made, told apart by ``class_state``, what
  the class holds.
"""

from __future__ import annotations

import contextvars
import hashlib
import itertools
import math
import sys
import types
from collections.abc import Callable
from typing import Any

from .._serde import dumps

__all__ = ["class_state", "made_in_function", "pickled_state", "pickles_itself", "private_state",
           "MAX_PICKLED_BYTES", "MAX_PICKLED_PARTS"]

MAX_PICKLED_PARTS = 512
"""How many parts (values, containers, objects) one pickled state may have, nested ones too."""
MAX_PICKLED_BYTES = 4 << 20
"""How many bytes of buffers one pickled state may have (past it: its type name only)."""

_PROTOCOL = 4
_SHORT_BYTES = 64
_OBJECT_GETSTATE = getattr(object, "__getstate__", None)
_LEFT: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "flink_agents_py_pickled_left", default=None)
"""What is left of the bounds while a pickled state (and those nested in it) is walked."""


class _TooLarge(Exception):
    """A pickled state past ``MAX_PICKLED_PARTS`` or ``MAX_PICKLED_BYTES``."""


def pickles_itself(kind: type) -> bool:
    """Whether objects of ``kind`` pickle otherwise than ``object`` does (state out of sight).

    Returns:
        Whether the class (or a base other than ``object``) defines ``__reduce_ex__``,
        ``__reduce__``, ``__getstate__``, ``__getnewargs_ex__`` or ``__getnewargs__``.
    """
    return (getattr(kind, "__reduce_ex__", None) is not object.__reduce_ex__
            or getattr(kind, "__reduce__", None) is not object.__reduce__
            or getattr(kind, "__getstate__", _OBJECT_GETSTATE) is not _OBJECT_GETSTATE
            or hasattr(kind, "__getnewargs_ex__") or hasattr(kind, "__getnewargs__"))


def pickled_state(value: Any, nested: Callable[[Any], Any]) -> list[Any] | None:
    """What ``value.__reduce_ex__(4)`` gives, in a form that is the same in every process.

    Its parts (what rebuilds it, its arguments, its state, its list and dict items) are
    walked: containers as lists (a ``dict`` or ``set`` sorted, whatever the hash seed),
    functions and classes by ``module:qualname`` (``$ref``: what rebuilds a value is not what
    a call calls), bytes longer than 64 by their SHA-256; another object is ``nested(obj)``
    (``stable_form``, a level deeper). Bounded by ``MAX_PICKLED_PARTS`` and
    ``MAX_PICKLED_BYTES`` for the whole walk, nested pickled states included; a container
    met again on its own path (a cycle) fails it.

    Args:
        value: an object with no instance attributes whose class ``pickles_itself``.
        nested: the stable form of an object found in the parts.

    Returns:
        The parts (trailing empty ones left out), or ``None`` when ``value`` cannot be
        pickled or its state is past the bounds.
    """
    size = getattr(value, "nbytes", None)  # a numpy array: known before it is copied
    if isinstance(size, int) and size > MAX_PICKLED_BYTES:
        return None
    token = _LEFT.set([MAX_PICKLED_PARTS, MAX_PICKLED_BYTES]) if _LEFT.get() is None else None
    try:
        reduced = value.__reduce_ex__(_PROTOCOL)
        if isinstance(reduced, str):  # a module-level singleton, pickled by its name
            return [reduced]
        if not isinstance(reduced, tuple) or not 2 <= len(reduced) <= 6:
            return None
        path: set[int] = set()
        parts = [_part(part, nested, path) for part in reduced[:3]]
        for items in reduced[3:5]:  # iterators of list items and of dict items
            parts.append(None if items is None else _part(
                list(itertools.islice(items, MAX_PICKLED_PARTS + 1)), nested, path))
        while parts and parts[-1] is None:
            parts.pop()
        return parts
    except (Exception, RecursionError):  # noqa: BLE001 - cannot be pickled, or too large
        return None
    finally:
        if token is not None:
            _LEFT.reset(token)


def _part(value: Any, nested: Callable[[Any], Any], path: set[int]) -> Any:
    left = _LEFT.get()
    assert left is not None  # noqa: S101 - set by pickled_state
    left[0] -= 1
    if left[0] < 0:
        raise _TooLarge
    kind = type(value)
    if value is None or kind is str or kind is int or kind is bool:
        return value
    if kind is float:
        return value if math.isfinite(value) else {"$float": repr(value)}
    if kind is bytes or kind is bytearray:
        left[1] -= len(value)
        if left[1] < 0:
            raise _TooLarge
        if len(value) <= _SHORT_BYTES:
            return {"$bytes": bytes(value).hex()}
        return {"$sha256": hashlib.sha256(value).hexdigest(), "size": len(value)}
    if isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)):
        return {"$ref": f"{getattr(value, '__module__', None) or '?'}:{value.__qualname__}"}
    if kind not in (tuple, list, dict, set, frozenset):
        return nested(value)
    if id(value) in path:
        raise _TooLarge  # a cycle
    path.add(id(value))
    try:
        if kind is dict:
            return {"$dict": sorted(([_part(k, nested, path), _part(v, nested, path)]
                                     for k, v in value.items()), key=dumps)}
        items = [_part(v, nested, path) for v in value]
        return items if kind in (tuple, list) else {"$set": sorted(items, key=dumps)}
    finally:
        path.discard(id(value))


def made_in_function(cls: type) -> bool:
    """Whether ``cls`` cannot be found by its ``module:qualname`` (made in a function).

    Looked up in ``sys.modules`` and the classes' own namespaces (no import, no
    ``__getattr__`` hook is run).

    Returns:
        Whether its qualified name does not lead to it.
    """
    if "<locals>" in cls.__qualname__:
        return True
    found: Any = sys.modules.get(cls.__module__)
    for name in cls.__qualname__.split("."):
        space = getattr(found, "__dict__", None)
        found = space.get(name) if isinstance(space, types.MappingProxyType | dict) else None
    return found is not cls


def class_state(kind: type, held: Callable[[types.FunctionType], dict[str, Any]],
                plain: Callable[[Any], Any]) -> dict[str, Any]:
    """What the classes of ``kind``'s MRO that were made in a function hold.

    For each: its plain-data attributes (not functions, descriptors or dunder names), and
    what its functions (``__call__`` and the other methods) close over or default to.

    Args:
        kind: an object's class.
        held: a function's closure cells and defaults (``__class__``, which ``super()``
            uses, left out), as for a function made at run time.
        plain: the stable form of a plain-data attribute.

    Returns:
        ``{"<class qualname>.<attribute>": form}``, sorted; empty for classes all importable
        (their objects keep the form they had).
    """
    found: dict[str, Any] = {}
    for cls in kind.__mro__:
        if cls is object or not made_in_function(cls):
            continue
        for name, attr in sorted(vars(cls).items()):
            inner = attr.__func__ if isinstance(attr, staticmethod | classmethod) else attr
            if isinstance(inner, types.FunctionType):
                form = held(inner)
                if form:
                    found[f"{cls.__qualname__}.{name}"] = form
            elif not (name.startswith("__") or callable(attr)
                      or hasattr(type(attr), "__get__")):
                found[f"{cls.__qualname__}.{name}"] = plain(attr)
    return found


def private_state(value: Any, walk: Callable[[Any], Any]) -> dict[str, Any] | None:
    """A pydantic model's private attributes (``PrivateAttr``), which its JSON form leaves out.

    ``Pricer(name="p")`` with ``_region = "eu"`` and with ``_region = "us"`` dump alike, so
    their bound methods were one call to the digest, and made in the other order after a
    restore each was handed the other's outcome. They count as a plain object's instance
    attributes do (``walk``: an object found there counts by its type, a client it holds
    changes as it is used).

    Args:
        value: a value with a JSON form.
        walk: the stable form of an attribute's value.

    Returns:
        ``{name: form}``, sorted, or ``None`` when ``value`` has none (then the form it had
        before is kept).
    """
    private = getattr(value, "__pydantic_private__", None)
    if not isinstance(private, dict) or not private:
        return None
    return {str(k): walk(v) for k, v in sorted(private.items(), key=lambda kv: str(kv[0]))}
