"""Which keywords of ``ctx.durable_execute(fn, ...)`` are the runtime's and which are ``fn``'s.

``durable_execute(fn, *args, reconciler=, durable_id=, strict=, **kwargs)``: Apache Flink
Agents' signature keeps ``reconciler`` and ``durable_id`` for itself and gives every other
keyword to ``fn``; this runtime adds ``strict``. Before, all three were always taken, so a
function with a parameter named so never received it, silently (its default ran instead).

The rule now (only calls passing one of the three pay for it: ``fn``'s signature is read):

- ``strict=`` goes to ``fn`` when ``fn`` has a parameter ``strict`` (not already bound by a
  ``functools.partial``), as Flink Agents passes it; else it is the runtime's strict replay
  switch. For both, bind ``fn``'s first: ``durable_execute(partial(fn, strict=a), strict=b)``.
- ``reconciler=`` and ``durable_id=`` are the runtime's, as in Flink Agents. When ``fn`` has
  a parameter of that name, the call is ambiguous and refused with a ``UsageError`` naming
  the function, the parameter and what to write: bind ``fn``'s with ``functools.partial``,
  or make the call with ``DurableCallSpec(kwargs={...})``, whose keywords are all ``fn``'s.
- A function taking them only through ``**kwargs`` does not get them (they are the
  runtime's, as Flink Agents takes its two from any function). One whose parameters cannot
  be read (some built-ins, ``zip``) is refused as ambiguous: whether it has one is unknown.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from ...api import UsageError

__all__ = ["UNSET", "runtime_options"]


class _Unset:
    """The default of ``reconciler`` and ``strict``: told apart from a ``None`` passed."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<unset>"


UNSET: Any = _Unset()

_MEANING = {
    "reconciler": "the runtime's function called at recovery instead of it",
    "strict": "the runtime's strict replay switch",
    "durable_id": "Apache Flink Agents' call id, which the runtime takes",
}

_KEYWORD_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _declared(fn: Callable[..., Any]) -> frozenset[str] | None:
    """``fn``'s keyword parameters no ``partial`` has bound (``None``: unknown)."""
    bound: set[str] = set()
    inner: Any = fn
    while isinstance(inner, functools.partial):
        bound.update(inner.keywords)
        inner = inner.func
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a built-in without a signature
        return None
    return frozenset(p.name for p in parameters if p.kind in _KEYWORD_KINDS and p.name not in bound)


def _name(fn: Any) -> str:
    inner = fn
    while isinstance(inner, functools.partial):
        inner = inner.func
    return getattr(inner, "__qualname__", None) or type(inner).__name__


def runtime_options(
    method: str, fn: Callable[..., Any], reconciler: Any, strict: Any, kwargs: dict[str, Any]
) -> tuple[Callable[..., Any], Any, Any]:
    """Sort a call's ``reconciler``, ``strict`` and ``durable_id`` between runtime and ``fn``.

    Args:
        method: ``durable_execute`` or ``durable_execute_async`` (for the message).
        fn: the function called.
        reconciler: the ``reconciler`` keyword, or ``UNSET``.
        strict: the ``strict`` keyword, or ``UNSET``.
        kwargs: ``fn``'s other keywords (a ``durable_id`` is taken out of them).

    Returns:
        ``(fn, reconciler, strict)``: the function (a ``strict`` that is its own bound to it
        by ``functools.partial``, as a batch call binds it) and the runtime's options, each
        ``None`` when not given.

    Raises:
        UsageError: when a keyword cannot be told to be the runtime's or ``fn``'s: naming
            the function, the keyword, and what to write instead.
    """
    durable_id = "durable_id" in kwargs
    if durable_id:
        kwargs.pop("durable_id")
    declared = _declared(fn)
    clash = [
        name
        for name, given in (("reconciler", reconciler is not UNSET), ("durable_id", durable_id))
        if given and (declared is None or name in declared)
    ]
    if strict is not UNSET:
        if declared is not None and "strict" in declared:
            fn = functools.partial(fn, strict=strict)  # ``fn``'s, as Flink Agents passes it
            strict = UNSET
        elif declared is None:
            clash.append("strict")
    if clash:
        raise UsageError(_ambiguous(method, fn, clash[0], declared))
    return (fn, None if reconciler is UNSET else reconciler, None if strict is UNSET else strict)


def _ambiguous(method: str, fn: Any, name: str, declared: frozenset[str] | None) -> str:
    shown = _name(fn)
    why = (
        f"the parameters of {shown} cannot be read, so {name}= may be its own"
        if declared is None
        else f"{shown} has a parameter {name!r}"
    )
    return (
        f"ctx.{method}({shown}, ..., {name}=...) is ambiguous: {why}, and {name}= is "
        f"{_MEANING[name]}. To give {shown} its {name}, bind it first: ctx.{method}("
        f"functools.partial({shown}, {name}=...), ...) (a {name}= given beside it is then "
        f"the runtime's); or make the call with ctx.durable_execute_all_async([DurableCallSpec("
        f"func={shown}, kwargs={{{name!r}: ...}})]), whose keywords are all the function's"
    )
