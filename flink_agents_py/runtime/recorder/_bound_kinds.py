"""Which of the lists a callable binds were tuples (a tuple's JSON form is its list).

``_identity.bound_state`` takes a bound value in its JSON form, where a tuple is a list, so
``functools.partial(route, ("x", "y"))`` and ``functools.partial(route, ["x", "y"])`` bind
alike. ``bound_kinds`` walks the same bound values (a partial's arguments and keywords, a
bound method's object's attributes, a lambda's or nested function's closure cells and
defaults, a callable object's attributes, and the callables among them, to ``MAX_DEPTH``
levels) and says ``T`` for each tuple and ``L`` for each list it finds in them, in walk
order, for the argument shape's eighth part (``_binding.sequence_kinds``).
"""

from __future__ import annotations

import functools
import types
from typing import Any

from .._serde import digest
from ._identity import MAX_DEPTH, _attributes, made_at_run_time
from ._value_classes import value_classes

__all__ = ["bound_kinds", "compact_kinds", "MAX_KINDS"]

MAX_KINDS = 64
"""The longest kinds text kept as it is; a longer one is kept as its digest (``#`` and 16
hex digits), so a call given thousands of tuples keeps a bounded record in keyed state."""


def compact_kinds(kinds: str) -> str:
    """``kinds`` itself, or past ``MAX_KINDS`` characters its digest (``#...``).

    Returns:
        The text to keep in the argument shape.
    """
    return kinds if len(kinds) <= MAX_KINDS else f"#{digest(kinds)}"


def bound_kinds(fn: Any) -> str:
    """``T`` for each tuple and ``L`` for each list among what ``fn`` binds, in walk order.

    Returns:
        The kinds, ``""`` when it binds neither (or cannot be walked: this never fails a
        call).
    """
    kinds: list[str] = []
    try:
        _walk(fn, kinds, 0, set())
    except (Exception, RecursionError):  # noqa: BLE001 - identity never fails the call
        return ""
    return compact_kinds("".join(kinds))


def _walk(fn: Any, kinds: list[str], depth: int, seen: set[int]) -> None:
    if depth > MAX_DEPTH or id(fn) in seen:
        return
    seen.add(id(fn))
    values: list[Any] = []
    inner: Any = None
    if isinstance(fn, (staticmethod, classmethod)):
        inner = fn.__func__
    elif isinstance(fn, functools.partial):
        values = [*fn.args, *(v for _, v in sorted(fn.keywords.items()))]
        inner = fn.func
    elif isinstance(fn, types.MethodType):
        owner = fn.__self__
        values = [] if isinstance(owner, type) else [v for _, v in _attributes(owner)]
        inner = fn.__func__
    elif isinstance(fn, types.FunctionType):
        if not made_at_run_time(fn):
            return
        values = [_contents(c) for c in fn.__closure__ or ()]
        values += [
            *(fn.__defaults__ or ()),
            *(v for _, v in sorted((fn.__kwdefaults__ or {}).items())),
        ]
    elif callable(fn) and not isinstance(fn, (type, types.BuiltinFunctionType)):
        values = [v for _, v in _attributes(fn)]  # a callable object
    for value in values:
        if isinstance(value, (types.FunctionType, types.MethodType, functools.partial)):
            _walk(value, kinds, depth + 1, seen)
        else:
            value_classes(value, 1, sort_dicts=True, kinds=kinds)
    if inner is not None:
        _walk(inner, kinds, depth + 1, seen)


def _contents(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # a free variable not assigned yet
        return None
