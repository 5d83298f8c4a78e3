"""How a durable call's arguments bind to its function's parameters; a shape's parts.

``shape_parts`` and ``code_changed`` read the argument shape a call record keeps.

``_outcomes.argument_shape`` binds every ``durable_execute(_async)`` call's arguments to its
function's parameters (``inspect.Signature.bind``). Building the signature costs more than
the rest of the shape; for a plain function it depends only on the function's code object
and its default values (``_call_changes.defaults_taken`` reads them from it), so it is
built once for each and kept.
A function with attributes of its own (``functools.wraps``'s ``__wrapped__``, a
``__signature__``, a ``partialmethod``'s marker), and every other callable (a partial, a
bound method, a callable object), gets ``inspect.signature`` as before.

A call of positional arguments that fill the positional parameters without extra ones, to a
function whose keyword-only parameters all have defaults, binds without ``Signature.bind``:
its arguments are exactly the first ``len(args)`` positional parameters in order, as
``bind`` makes them.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any

__all__ = ["bound_arguments", "code_changed", "sequence_kinds", "shape_parts", "signature_of"]

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)

_KEPT = 1024
"""How many code objects' signatures are kept (all are dropped when it is full)."""


class _Binder:
    """A signature, with what binding positional arguments alone needs from it."""

    __slots__ = ("code", "defaults", "kwdefaults", "kwvalues", "signature", "names", "required",
                 "fast")

    def __init__(self, fn: types.FunctionType) -> None:
        # the default values themselves: ``_call_changes.defaults_taken`` reads them from the
        # signature, so a function of this code with other defaults must not get this one
        self.code, self.defaults, self.kwdefaults = fn.__code__, fn.__defaults__, fn.__kwdefaults__
        self.kwvalues = tuple(self.kwdefaults.values()) if self.kwdefaults else ()
        self.signature = signature = inspect.signature(fn)
        params = list(signature.parameters.values())
        positional = [p for p in params if p.kind in _POSITIONAL]
        self.names = tuple(p.name for p in positional)
        self.required = sum(p.default is p.empty for p in positional)
        # keyword-only parameters without a default must be passed: ``bind`` says so
        self.fast = all(
            p.default is not p.empty for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY
        )

    def serves(self, fn: types.FunctionType) -> bool:
        """Whether this is ``fn``'s signature: its code, and the very same default values."""
        kw = fn.__kwdefaults__
        return (self.code is fn.__code__ and self.defaults is fn.__defaults__
                and self.kwdefaults is kw
                and (not kw or all(a is b for a, b in zip(self.kwvalues, kw.values(),
                                                           strict=False))
                     and len(kw) == len(self.kwvalues)))


_BINDERS: dict[int, _Binder] = {}
"""By ``id`` of the code object (the binder holds it, so the id is not reused meanwhile)."""


def _binder(fn: types.FunctionType) -> _Binder:
    found = _BINDERS.get(id(fn.__code__))
    if found is not None and found.serves(fn):
        return found
    made = _Binder(fn)
    if len(_BINDERS) >= _KEPT:
        _BINDERS.clear()
    _BINDERS[id(fn.__code__)] = made
    return made


def signature_of(fn: Callable[..., Any]) -> inspect.Signature:
    """``inspect.signature(fn)``, kept per code object for a plain function (``_binder``).

    Returns:
        The signature.

    Raises:
        ValueError: when ``fn`` has no signature (as ``inspect.signature`` raises it).
        TypeError: when ``fn`` is not callable.
    """
    if type(fn) is not types.FunctionType or fn.__dict__:
        return inspect.signature(fn)
    return _binder(fn).signature


def bound_arguments(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[dict[str, Any], inspect.Signature, bool]:
    """The arguments of ``fn(*args, **kwargs)`` by parameter name, as ``Signature.bind`` has them.

    Returns:
        The arguments (in ``BoundArguments.arguments``' order), the signature whose
        parameters' kinds say how each was bound, and whether every argument is bound to a
        positional parameter of its own (no ``*args`` or ``**kwargs``).

    Raises:
        TypeError: when the arguments do not fit the parameters (as ``bind`` raises it).
        ValueError: when ``fn`` has no signature (as ``inspect.signature`` raises it).
    """
    if type(fn) is not types.FunctionType or fn.__dict__:
        sig = inspect.signature(fn)
        return sig.bind(*args, **kwargs).arguments, sig, False
    binder = _binder(fn)
    if not kwargs and binder.fast and binder.required <= len(args) <= len(binder.names):
        return dict(zip(binder.names, args, strict=False)), binder.signature, True  # (in order)
    sig = binder.signature
    return sig.bind(*args, **kwargs).arguments, sig, False


def shape_parts(shape: str | None) -> tuple[str, str, str, str, str, str, str]:
    """An ``argument_shape``'s binding, values, code, nested state, passed, defaults, effective.

    The fifth is the digest of the arguments passed alone, without what the callable binds
    (kept when it binds something): two calls that differ only in their callable's state.
    The last is the binding's digest with the defaults taken (the binding's when none was).

    Returns:
        The seven parts, ``""`` for a missing one (records written before the code, the
        nested objects' state, the passed arguments or the defaults were kept have fewer).
    """
    parts = (shape or "").split("/", 7)[:7]
    binding, values, code, nested, passed, defaults, full = parts + [""] * (7 - len(parts))
    return binding, values, code, nested, passed, defaults, full or binding


def sequence_kinds(shape: str | None) -> str:
    """An ``argument_shape``'s eighth part: which of the arguments' lists were tuples.

    A tuple's JSON form is a list, so ``f((1, 2))`` and ``f([1, 2])`` have one digest (and
    a ``bytearray``'s is its ``bytes``'); this part says, in the order ``value_classes``
    walks the arguments, ``T`` for each tuple and ``L`` for each list (``Y`` for ``bytes``,
    ``A`` for a ``bytearray``), then after a ``|`` the same for what the callable binds
    (``_bound_kinds.bound_kinds``: a partial's arguments, a closure's cells...).

    Returns:
        The part, ``""`` when the arguments hold neither, or the record was written before
        it was kept.
    """
    parts = (shape or "").split("/", 7)
    return parts[7] if len(parts) == 8 else ""


def code_changed(was: str | None, now: str | None) -> bool:
    """Whether two shapes' code digests, both kept by one interpreter version, differ.

    Returns:
        ``False`` when either has none (a module-level function; a record written before
        the code was kept) or they were made by other interpreter versions.
    """
    old, new = shape_parts(was)[2], shape_parts(now)[2]
    return bool(old and new) and old.partition(":")[0] == new.partition(":")[0] and old != new
