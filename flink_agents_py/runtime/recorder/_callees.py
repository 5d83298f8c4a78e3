"""Which functions a callable calls, when its own name does not say (part of its identity).

A lambda, a nested function, a decorator's wrapper made without ``functools.wraps`` or a
wrapper object has one name whatever it calls. ``callees`` names what it calls (kept in a
durable call's record: a replay whose callable calls others diverges); ``run_time_functions``
finds the code made at run time in it (``_outcomes.code_of`` digests that code). Both walk
what ``_identity.bound_state`` walks, to ``MAX_DEPTH`` levels.
"""

from __future__ import annotations

import functools
import itertools
import types
from collections.abc import Callable, Mapping
from typing import Any

from .._serde import digest
from ._code import code_names
from ._identity import (
    _CLASS_STATE,
    _FUNCTIONS,
    _SCALARS,
    _STDLIB,
    MAX_DEPTH,
    _attributes,
    _is_stdlib,
    _qualified,
    bound_state,
    made_at_run_time,
)
from ._value_classes import library_class, library_code

__all__ = ["callees", "run_time_functions", "MAX_CALLEES"]


MAX_CALLEES = 16
"""The most callee names ``callees`` keeps (the rest are folded into one digest entry)."""


def callees(fn: Callable[..., Any]) -> list[str] | None:
    """The functions a callable whose own name does not say what it runs calls.

    A lambda, a nested function, a decorator's wrapper made without ``functools.wraps`` or a
    wrapper object (``Retrying(fetch)``) has one name whatever it calls. What identifies
    the function such a call runs is what it calls:

    - every function and class among what it binds (``bound_state``: closure cells, a
      partial's arguments, a wrapper object's attributes, ``__wrapped__``...), and the class
      of the object a method is bound to (``Base.fetch`` bound to a ``Cached`` object runs
      what ``Cached`` overrides);
    - for code made at run time (``fn`` itself, and the functions it binds, to ``MAX_DEPTH``
      levels): each global name its code uses that is a function or a class in its module
      (``fetch_weather``), and each attribute name its code uses that is a function of a
      module, class or object it refers to by a global or closure name (``feeds.weather``).

    Standard-library functions and classes are left out (a wrapper that starts logging or
    sleeping still calls the same function); installed libraries' code is not read.

    Args:
        fn: the callable a durable call runs.

    Returns:
        The ``module:qualname`` of each, sorted (past ``MAX_CALLEES`` the rest are one
        ``digest:...`` entry), the same in every process; ``None`` when ``fn`` binds nothing
        (``bound_state``: a module-level function, a builtin, a class: its name is its
        identity) or cannot be walked.
    """
    bound = bound_state(fn)
    if bound is None:
        return None
    found: set[str] = set()
    try:
        _named_in(bound, found, 0)
        owner = getattr(fn, "__self__", None)
        if isinstance(fn, types.MethodType) and not isinstance(owner, type):
            found.add(_qualified(type(owner)))  # which class's overrides its method calls
        for code_fn in run_time_functions(fn, 0, set()):
            _resolved_names(code_fn, found)
    except (Exception, RecursionError):  # noqa: BLE001 - identity never fails the call
        return None
    names = sorted(n for n in found if n.split(".", 1)[0].split(":", 1)[0] not in _STDLIB)
    if len(names) > MAX_CALLEES:
        names = [*names[: MAX_CALLEES - 1], f"digest:{digest(names[MAX_CALLEES - 1 :])}"]
    return names


def _named_in(form: Any, found: set[str], depth: int) -> None:
    """Collect the functions and classes named in a bound state's JSON form."""
    if isinstance(form, dict) and depth <= 4 * MAX_DEPTH + 8:
        found.update(v for k in ("$fn", "$class") if isinstance(v := form.get(k), str))
        form = [v for k, v in form.items() if k != _CLASS_STATE]
    if isinstance(form, list) and depth <= 4 * MAX_DEPTH + 8:
        for value in form:
            _named_in(value, found, depth + 1)


def run_time_functions(
    fn: Any, depth: int, seen: set[int], *, held: bool = False
) -> list[types.FunctionType]:
    """The functions made at run time in ``fn`` and in what it binds (to ``MAX_DEPTH``).

    With ``held``, also those in the lists, dicts and objects it binds and in a bound
    method's object (a table of lambdas a lambda looks up: ``code_of``); ``callees`` leaves
    them out (what it names was recorded without them).

    Returns:
        The functions, ``fn`` first, in walk order.
    """
    if depth > MAX_DEPTH or id(fn) in seen:
        return []
    seen.add(id(fn))
    inner: list[Any] = []
    found: list[types.FunctionType] = []
    if isinstance(fn, (staticmethod, classmethod, types.MethodType)):
        inner = [fn.__func__]
        owner = getattr(fn, "__self__", None)
        if (
            held
            and owner is not None
            and not isinstance(owner, type)
            and not library_class(type(owner))
        ):
            inner += [v for _, v in _attributes(owner)]
    elif isinstance(fn, functools.partial):
        inner = [fn.func, *fn.args, *fn.keywords.values()]
    elif isinstance(fn, types.FunctionType):
        if not made_at_run_time(fn):
            return []
        inner = [c.cell_contents for c in fn.__closure__ or () if _filled(c)]
        found = [fn]
    elif (
        callable(fn) and not isinstance(fn, (type, *_FUNCTIONS)) and not _is_stdlib(type(fn))
    ):  # a wrapper object: the callables it holds
        inner = [v for _, v in _attributes(fn)]
    for value in _callables(inner, depth, held):
        found += run_time_functions(value, depth + 1, seen, held=held)
    return found


_HELD_ITEMS = 64
"""How many items of a list, tuple or dict ``run_time_functions`` looks at for functions."""


def _callables(values: Any, depth: int, held: bool) -> list[Any]:
    """The callables among ``values`` (``held``: in their lists, dicts and objects too)."""
    out: list[Any] = []
    for value in values:
        if callable(value):
            out.append(value)
        elif not held or depth > MAX_DEPTH or type(value) in (*_SCALARS, float):
            continue
        elif type(value) in (list, tuple, dict):
            items = value.values() if type(value) is dict else value
            out += _callables(itertools.islice(items, _HELD_ITEMS), depth + 1, held)
        elif not isinstance(value, types.ModuleType) and not library_class(type(value)):
            out += _callables([v for _, v in _attributes(value)[:_HELD_ITEMS]], depth + 1, held)
    return out


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - raises for a free variable not assigned yet
    except ValueError:
        return False
    return True


def _resolved_names(fn: types.FunctionType, found: set[str]) -> None:
    """Add the functions and classes the global and attribute names of ``fn``'s code name.

    Only for the user's code (a library's wrapper may change its internals in any release),
    and only callees outside the standard library (a wrapper that starts logging, sleeping
    between attempts or timing its call still calls the same function).
    """
    if library_code(fn):
        return
    names = code_names(fn.__code__)
    scope = fn.__globals__
    owners: list[Any] = [c.cell_contents for c in fn.__closure__ or () if _filled(c)]
    for name in names:
        value = scope.get(name, _MISSING) if isinstance(scope, dict) else _MISSING
        if value is _MISSING:
            continue
        if _is_callee(value):
            found.add(_callee_name(value))
        owners.append(value)
    wanted = set(names)
    for owner in owners:
        space: list[Mapping[str, Any]]
        if isinstance(owner, types.ModuleType):
            space = [vars(owner)]
        elif isinstance(owner, type):
            space = [vars(k) for k in owner.__mro__]
        elif not isinstance(owner, (*_SCALARS, float, list, tuple, dict)) and not _is_stdlib(
            type(owner)
        ):
            space = [vars(k) for k in type(owner).__mro__]
        else:
            continue
        for attrs in space:
            for name in wanted & attrs.keys():
                value = attrs[name]
                if _is_callee(value):
                    found.add(_callee_name(value))


_MISSING = object()


def _is_callee(value: Any) -> bool:
    return isinstance(value, (type, staticmethod, classmethod, functools.partial, *_FUNCTIONS))


def _callee_name(value: Any) -> str:
    if isinstance(value, (staticmethod, classmethod, types.MethodType)):
        value = value.__func__
    while isinstance(value, functools.partial):
        value = value.func
    return _qualified(value)
