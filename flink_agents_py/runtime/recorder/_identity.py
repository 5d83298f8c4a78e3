"""What a callable binds, as part of a durable call's identity check.

A durable call's record keeps a digest of its target and arguments (``_outcomes.call_digest``)
so a replay can tell a changed or reordered call from the one recorded. The arguments passed
to ``durable_execute(fn, *args)`` are only part of what the call does: ``fn`` itself may bind
more. ``bound_state(fn)`` describes that part, the same in every process:

- ``functools.partial`` (nested ones too): its positional arguments and keywords;
- a bound method: a stable form of its ``__self__`` (never its ``id()``), then its function;
- a builtin bound method (``"apple".upper``, ``session.get``): its ``__self__`` likewise;
- a function made at run time (a lambda, a nested function or closure): its closure cells
  by free variable name, its defaults, the constants in its code and the global and
  attribute names its code uses (lambdas of one function share their qualified name);
- a callable object (an instance with ``__call__``): its state, as for a bound method's
  ``__self__`` (for a class made in a function, with what the class holds: see below);
- a ``staticmethod`` or ``classmethod`` object, or a standard-library wrapper that keeps the
  function it wraps in ``__wrapped__`` (``functools.lru_cache``, ``functools.cache``): what
  the function inside binds.

A module-level function binds nothing (its name is its identity), nor do the framework's own
calls (digested by their name and arguments).

The stable form of a bound value (``stable_form``):

- JSON-form data (``str``, numbers, lists, dicts, pydantic models, dataclasses, enums...) is
  its JSON form, as durable call arguments are stored (a pydantic model's private attributes,
  which it leaves out, as instance attributes: ``_hidden_state.private_state``);
- functions are their ``module:qualname`` (a bound method: that and its ``__self__``), a
  ``functools.partial`` its function and bound arguments, classes their qualified name,
  modules their name; a function made at run time (a closure a decorator such as
  ``functools.wraps``'s wrapper holds) also what it binds, to ``MAX_DEPTH`` levels;
- ``operator.itemgetter``, ``attrgetter`` and ``methodcaller`` are their type and the
  arguments they were made with (``itemgetter(0)`` is not ``itemgetter(1)``);
- an object that defines ``__durable_identity__()`` is what that method returns (to leave a
  cache or a connection out of the identity);
- other containers are walked (a ``set`` sorted by the stable form of its members, a
  ``dict`` with keys that have no JSON form by that of its entries: its insertion order, as
  a JSON-form dict's, does not count);
- standard-library values with no JSON form (``Decimal``, ``Fraction``, ``UUID``, paths,
  dates and times, IP addresses, compiled patterns, ``range``, ``complex``, ``bytes``,
  ``bytearray``, ``array.array``, ``slice``) are their type and ``repr``, a ``memoryview``
  its type and the bytes it shows, a ``deque`` is walked as a list;
- an object of a standard-library or builtin class with no JSON form (an open socket, a lock,
  a file, a thread, an executor), a ``RunnerContext``, and anything deeper than
  ``MAX_DEPTH`` levels contribute their **type name only**: they have no form that is the
  same in every process, and what they are is still checked; but the standard library's
  classes that only hold what the user gave them (``functools.partialmethod``,
  ``types.SimpleNamespace``, ``argparse.Namespace``, ``string.Template``, an e-mail
  message: ``_HOLDERS``) are walked as the user's objects are (below), and a
  ``MappingProxyType``, a ``ChainMap`` and a dict's views as the dict or list they show; a
  pandas ``Series`` or ``Index`` is its name, values and index (``_series_form``);
- any other object is its type name with the stable form of its own instance attributes
  (``__dict__`` and ``__slots__`` entries, dunder names left out but ``__wrapped__``: what
  a class-based decorator made with ``functools.update_wrapper`` calls); an object found inside
  those attributes that has no JSON form counts by its type name only (a client's session,
  connection pool or cache: its state changes as calls use it; ``bound_and_nested`` also
  digests the state of the user's objects found there, for replay's order check). An object of a
  class made in a function (not importable by ``module:qualname``) adds what its class
  holds: plain-data class attributes, and what its methods (``__call__``...) close over or
  default to (``_hidden_state.class_state``);
- a value object in which that walk finds no attributes but whose class pickles itself
  (numpy scalars and arrays, C extension value types), at any level, is its type name and
  what its pickling protocol gives (``__reduce_ex__(4)``, walked: functions and classes by
  name, long bytes by SHA-256, bounded: ``_hidden_state.pickled_state``); one that cannot
  be pickled, or is past the bounds, counts as an object with no attributes.

Computing the form never fails a call: a ``__durable_identity__`` that raises, or an object
that cannot be walked, counts by its type name.
"""

from __future__ import annotations

import array
import collections
import collections.abc
import contextvars
import datetime
import decimal
import fractions
import functools
import ipaddress
import math
import operator
import pathlib
import re
import sys
import types
import uuid
from collections.abc import Callable
from typing import Any

from ...api import RunnerContext
from .._serde import digest, dumps, to_json_value
from ._code import code_constants, code_names
from ._hidden_state import (
    class_state,
    made_in_function,
    pickled_state,
    pickles_itself,
    private_state,
)
from ._value_classes import library_class, value_classes

__all__ = ["bound_and_nested", "bound_state", "made_at_run_time", "stable_form", "MAX_DEPTH"]

MAX_DEPTH = 4
"""How many levels of nested objects ``stable_form`` walks before it keeps a type name only."""

_SCALARS = (str, int, bool, type(None))
_FRAMEWORK = "flink_agents_py."
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"builtins", "__builtin__"}
_VALUES = (decimal.Decimal, fractions.Fraction, uuid.UUID, pathlib.PurePath, datetime.date,
           datetime.time, datetime.timedelta, datetime.tzinfo, ipaddress.IPv4Address,
           ipaddress.IPv6Address, ipaddress.IPv4Network, ipaddress.IPv6Network, re.Pattern,
           range, complex, bytes, bytearray, array.array, slice)
"""Standard-library value types with no JSON form: their ``repr`` is their value."""
_MADE_WITH = (operator.itemgetter, operator.attrgetter, operator.methodcaller)
"""Standard-library callables whose ``__reduce__`` gives the arguments they were made with."""
_FUNCTIONS = (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
              types.MethodWrapperType, types.WrapperDescriptorType, types.MethodDescriptorType)


def _qualified(obj: Any) -> str:
    """``module:qualname`` of a function, class or (for any other object) its class."""
    qual = getattr(obj, "__qualname__", None)
    module = getattr(obj, "__module__", None)
    if not isinstance(qual, str):
        cls = type(obj)
        module, qual = cls.__module__, cls.__qualname__
    return f"{module or '?'}:{qual}"


def _type_only(value: Any) -> dict[str, str]:
    return {"$type": _qualified(type(value))}


def made_at_run_time(fn: types.FunctionType) -> bool:
    """Whether ``fn`` is a lambda or a nested function (what it binds was decided at run time).

    Returns:
        Whether it is; ``False`` for the framework's own wrappers (functions of
        ``flink_agents_py`` modules), which are named by their ``module:qualname`` alone.
    """
    qual = fn.__qualname__
    return ("<" in qual or fn.__closure__ is not None) and not str(
        getattr(fn, "__module__", "")).startswith(_FRAMEWORK)


def bound_state(fn: Callable[..., Any]) -> list[Any] | None:
    """What ``fn`` binds besides the arguments of the call, as JSON-form data.

    Args:
        fn: the callable a durable call runs.

    Returns:
        A list describing the bound values (see the module docstring), or ``None`` when
        ``fn`` binds nothing (a module-level function, a class, a builtin function).
    """
    if type(fn) is types.FunctionType and not made_at_run_time(fn):
        return None  # the common case, kept cheap: a module-level function
    try:
        parts = _binds(fn, 0, set())
    except (Exception, RecursionError):  # noqa: BLE001 - identity never fails the call
        parts = [_type_only(fn)]
    return parts or None


def _binds(fn: Any, depth: int, active: set[int]) -> list[Any]:
    """The bound-state parts of callable ``fn`` (outermost wrapper first)."""
    if isinstance(fn, (staticmethod, classmethod)):
        return [{"$type": type(fn).__name__}, *_binds(fn.__func__, depth, active)]
    if isinstance(fn, functools.partial):
        return [{"partial": [stable_form(a, depth + 1, active) for a in fn.args],
                 "keywords": {k: stable_form(v, depth + 1, active)
                              for k, v in sorted(fn.keywords.items())}},
                *_binds(fn.func, depth, active)]
    if isinstance(fn, types.MethodType):
        return [{"self": stable_form(fn.__self__, depth + 1, active)},
                *_binds(fn.__func__, depth, active)]
    if isinstance(fn, types.FunctionType):
        if not made_at_run_time(fn):
            return []
        code = fn.__code__
        part = _held(fn, depth, active)
        consts = code_constants(code)
        if consts:
            part["consts"] = consts
        names = code_names(code)
        if names:
            part["names"] = names
        return [part] if part else []
    if isinstance(fn, _FUNCTIONS):  # builtins: their ``__self__``, unless a module
        owner = getattr(fn, "__self__", None)
        if owner is None or isinstance(owner, types.ModuleType):
            return []
        return [{"self": stable_form(owner, depth + 1, active)}]
    if isinstance(fn, type):  # a class made in a function: what this version of it holds
        form = _class_form(fn, depth, active)
        return [form] if _CLASS_STATE in form else []
    wrapped = getattr(fn, "__wrapped__", None)
    if wrapped is not None and _is_stdlib(type(fn)):  # lru_cache & co: the function inside
        return [{"$type": _qualified(type(fn))}, *_binds(wrapped, depth + 1, active)]
    return [{"object": stable_form(fn, depth, active)}]  # a callable object: its state


_NESTED: contextvars.ContextVar[list[bool] | None] = contextvars.ContextVar(
    "flink_agents_py_nested_state", default=None)
"""While ``bound_and_nested`` walks: ``[walk objects inside, one was left at its type]``."""


def _walk_nested() -> bool:
    """Whether an object of the user's class inside another is walked (and note it was met)."""
    mode = _NESTED.get()
    if mode is None:
        return False
    mode[1] = True
    return mode[0]


def bound_and_nested(fn: Callable[..., Any]) -> tuple[list[Any] | None, str | None]:
    """``bound_state(fn)``, and the digest of what it binds with nested objects' state too.

    ``bound_state`` counts an object of the user's class found inside a bound object by its
    type only (its state may change as calls use it, and a replay does not run them), so
    ``Shop(Item("apple")).get`` and ``Shop(Item("pear")).get`` bind alike. The second
    digest walks such objects as a bound object is walked: a replay compares it only with
    the records of later calls (``_outcomes.reordered_by_nested``), where calls made in
    another order show, and a state that lags behind the live run's does not.

    Returns:
        The bound state, and the digest (``None`` when no such object was found).
    """
    mode = [False, False]
    token = _NESTED.set(mode)
    try:
        bound = bound_state(fn)
        if not mode[1]:
            return bound, None
        mode[0] = True
        return bound, digest(bound_state(fn))
    finally:
        _NESTED.reset(token)


def _held(fn: types.FunctionType, depth: int, active: set[int],
          skip: str = "") -> dict[str, Any]:
    """A function's closure cells (but ``skip``'s), defaults and keyword defaults."""
    code, cells = fn.__code__, fn.__closure__ or ()
    part: dict[str, Any] = {}
    closure = {name: _cell(cell, depth, active) for name, cell
               in zip(code.co_freevars, cells, strict=False) if name != skip}
    if closure:
        part["closure"] = closure
    if fn.__defaults__:
        part["defaults"] = [stable_form(v, depth + 1, active) for v in fn.__defaults__]
    if fn.__kwdefaults__:
        part["kwdefaults"] = {k: stable_form(v, depth + 1, active)
                              for k, v in sorted(fn.__kwdefaults__.items())}
    return part


def _cell(cell: Any, depth: int, active: set[int]) -> Any:
    try:
        contents = cell.cell_contents
    except ValueError:  # a free variable not assigned yet
        return {"$empty": True}
    return stable_form(contents, depth + 1, active)


def stable_form(value: Any, depth: int = 0, active: set[int] | None = None,
                inside: bool = False) -> Any:
    """A JSON-form stand-in for ``value`` that is the same in every process.

    Args:
        value: a value a callable binds (a closure cell, a partial's argument, a method's
            ``__self__``...).
        depth: how many levels deep ``value`` is (past ``MAX_DEPTH`` a type name is kept).
        active: ids of the containers on the current path (a cycle is its type name).
        inside: ``value`` is inside an object's attributes (an object with no JSON form
            found there counts by its type name).

    Returns:
        JSON-form data (see the module docstring for each kind of value).
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is float:
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, RunnerContext):
        return {"$type": "RunnerContext"}
    if isinstance(value, types.FunctionType) and made_at_run_time(value):
        return _function_form(value, value, depth, active)
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
        return {"$fn": _qualified(value)}
    if isinstance(value, (types.MethodType, staticmethod, classmethod)):
        return _function_form(value, value.__func__, depth, active)
    if isinstance(value, functools.partial):
        return _function_form(value, value.func, depth, active)
    if isinstance(value, type):
        return _class_form(value, depth, active)
    if isinstance(value, types.ModuleType):
        return {"$module": value.__name__}
    active = active if active is not None else set()
    if id(value) in active or depth > MAX_DEPTH:
        return _type_only(value)
    hook = getattr(value, "__durable_identity__", None)
    if callable(hook) and not isinstance(value, type):
        try:
            return {"$type": _qualified(kind), "identity": stable_form(hook(), depth + 1)}
        except Exception:  # noqa: BLE001 - identity never fails the call
            return _type_only(value)
    try:
        form = to_json_value(value, "a bound value")
    except Exception:  # noqa: BLE001, S110 - no JSON form: described below
        pass
    else:
        # a member's JSON form is its value alone; a dict's insertion order does not count
        extra: dict[str, Any] = {"$enums": value_classes(value, sort_dicts=True)}
        extra["$private"] = private_state(value, lambda v: stable_form(v, depth + 1, active, True))
        extra = {k: v for k, v in extra.items() if v}  # (none: the form it had before)
        return {"$json": form, **extra} if extra else form
    active.add(id(value))
    try:
        return _structure(value, kind, depth, active, inside)
    finally:
        active.discard(id(value))


def _function_form(value: Any, named: Any, depth: int, active: set[int] | None) -> Any:
    """A function's ``module:qualname`` and what it binds.

    Returns:
        ``{"$fn", "binds"}``; in a cycle or past ``MAX_DEPTH``, ``{"$fn"}`` only.
    """
    active = active if active is not None else set()
    if id(value) in active or depth > MAX_DEPTH:
        return {"$fn": _qualified(named)}
    active.add(id(value))
    try:
        return {"$fn": _qualified(named), "binds": _binds(value, depth + 1, active)}
    finally:
        active.discard(id(value))


def _class_form(cls: type, depth: int, active: set[int] | None) -> dict[str, Any]:
    """A class's ``module:qualname``; for one made in a function, what it holds too.

    A class made by a factory (``make_shop("apple")``) has one qualified name for every
    call of the factory: its plain-data class attributes and what its methods close over
    (``_hidden_state.class_state``) tell them apart, as they do for its objects.

    Returns:
        ``{"$class"}``, with ``$class_state`` for a class made in a function (not in a cycle
        nor past ``MAX_DEPTH``).
    """
    form: dict[str, Any] = {"$class": _qualified(cls)}
    active = active if active is not None else set()
    if id(cls) in active or depth > MAX_DEPTH or not made_in_function(cls):
        return form
    active.add(id(cls))
    try:
        shared = class_state(cls, lambda f: _held(f, depth + 1, active, "__class__"),
                             lambda v: stable_form(v, depth + 2, active, True))
    finally:
        active.discard(id(cls))
    if shared:
        form[_CLASS_STATE] = shared
    return form


_WRAPPED = "__wrapped__"


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _is_stdlib(kind: type) -> bool:
    return str(kind.__module__).split(".", 1)[0] in _STDLIB


def _structure(value: Any, kind: type, depth: int, active: set[int], inside: bool) -> Any:
    """The stable form of a value with no JSON form: its parts, or its type name."""
    if isinstance(value, (list, tuple, collections.deque)):
        return [stable_form(v, depth + 1, active, inside) for v in value]
    if isinstance(value, dict):  # entries sorted, as a JSON-form dict's keys are
        return {"$dict": sorted(([stable_form(k, depth + 1, active, inside),
                                  stable_form(v, depth + 1, active, inside)]
                                 for k, v in value.items()), key=dumps)}
    if isinstance(value, (set, frozenset)):
        return {"$set": sorted((stable_form(v, depth + 1, active, inside) for v in value),
                               key=dumps)}
    if isinstance(value, _VALUES):  # a Decimal, a Path, bytes...: their repr is the value
        return {"$type": _qualified(kind), "value": repr(value)}
    if isinstance(value, memoryview):  # the bytes it shows (its repr is an address)
        return {"$type": _qualified(kind), "value": value.tobytes().hex()}
    if isinstance(value, _MADE_WITH):  # itemgetter(0): its type and what it was made with
        reduced: tuple[Any, ...] = tuple(value.__reduce__())
        made, args = reduced[0], reduced[1]
        return {"$type": _qualified(kind), "made": [stable_form(made, depth + 1, active),
                                                    stable_form(list(args), depth + 1,
                                                                active)]}
    if isinstance(value, (types.MappingProxyType, collections.ChainMap)):  # a dict's entries
        return stable_form(dict(value), depth, active, inside)
    if isinstance(value, _VIEWS):  # a dict's keys, values or items: what they show
        return [stable_form(v, depth + 1, active, inside) for v in list(value)]
    holder = _holder(kind)
    if _is_stdlib(kind) and not holder:  # a socket, a lock, a pool...
        return _type_only(value)
    if pickles_itself(kind) and not _has_attributes(value):  # np.int64(1), an array...
        pickled = pickled_state(value, lambda v: stable_form(v, depth + 1, active, True))
        if pickled is not None:
            return {"$type": _qualified(kind), "pickled": pickled}
    if any(_qualified(c) in _SERIES for c in kind.__mro__[:-1]):  # its values, not its type
        shown = _series_form(value, kind, depth, active)
        if shown is not None:
            return shown
    if inside and ((library_class(kind) and not holder) or not _walk_nested()):
        return _type_only(value)  # its state may change as it is used (a client's session)
    state: dict[str, Any] = {}
    for name, attr in _attributes(value):
        state[name] = stable_form(attr, depth + 1, active, inside=True)
    form = {"$type": _qualified(kind), "state": state}
    shared = class_state(kind, lambda f: _held(f, depth + 1, active, "__class__"),
                         lambda v: stable_form(v, depth + 2, active, True))
    if shared:  # a class made in a function: what this version of it holds
        form[_CLASS_STATE] = shared
    return form


_HOLDERS = frozenset({"functools:partialmethod", "types:SimpleNamespace", "argparse:Namespace",
                      "string:Template", "email.message:Message"})
"""Standard-library classes that only hold what the user gave them, walked as the user's
objects are: a ``functools.partialmethod`` (its function and arguments: what the method it
makes calls), a ``SimpleNamespace`` or an ``argparse.Namespace`` (plain attributes), a
``string.Template`` (its text), an e-mail message (its headers and payload)."""
_VIEWS = (collections.abc.KeysView, collections.abc.ValuesView, collections.abc.ItemsView)


def _holder(kind: type) -> bool:
    """Whether ``kind`` is (or derives from) one of ``_HOLDERS``."""
    return any(_qualified(cls) in _HOLDERS for cls in kind.__mro__[:-1])


_SERIES = frozenset({"pandas.core.series:Series", "pandas.core.indexes.base:Index"})
"""pandas classes whose data its attribute walk cannot reach (held in a manager object that
counts by its type): ``df.iloc[0]`` and ``df.iloc[1]`` would be one value."""


def _series_form(value: Any, kind: type, depth: int, active: set[int]) -> Any:
    """A pandas ``Series`` or ``Index`` by its name, values and index (``None``: too large).

    Returns:
        ``{"$type", "name", "values", "index"}``, each array as ``pickled_state`` gives it.
    """
    def nested(v: Any) -> Any:
        return stable_form(v, depth + 1, active, True)

    try:
        values = pickled_state(value.__array__(), nested)
        index = getattr(value, "index", None)
        at = None if index is None else pickled_state(index.__array__(), nested)
    except Exception:  # noqa: BLE001 - identity never fails the call
        return None
    if values is None or (index is not None and at is None):
        return None
    return {"$type": _qualified(kind), "name": nested(getattr(value, "name", None)),
            "values": values, "index": at}


_CLASS_STATE = "$class_state"
"""Not looked into by ``callees`` (what it names was not kept before: no new divergence)."""


def _has_attributes(value: Any) -> bool:
    """Whether ``_attributes`` finds any (quickly for an object with a ``__dict__``)."""
    found = getattr(value, "__dict__", None)
    if isinstance(found, dict) and any(not _dunder(n) or n == _WRAPPED for n in found):
        return True
    return bool(_attributes(value))


def _attributes(value: Any) -> list[tuple[str, Any]]:
    """An object's instance attributes (``__dict__``, then ``__slots__``).

    Dunder names are left out (``functools.update_wrapper`` copies ``__name__``, ``__doc__``
    and the like), except ``__wrapped__``: what a wrapper object (a class-based decorator)
    calls is part of what it is.

    Returns:
        ``(name, value)`` pairs.
    """
    found: dict[str, Any] = {}
    for name, attr in sorted(getattr(value, "__dict__", {}).items()):
        if not _dunder(name) or name == _WRAPPED:
            found[name] = attr
    for cls in type(value).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if (name.startswith("__") and name != _WRAPPED) or name in found:
                continue
            try:
                found[name] = getattr(value, name)
            except AttributeError:
                continue
    return list(found.items())
