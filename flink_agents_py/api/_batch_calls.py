"""A batch of durable calls: ``await ctx.durable_execute_all_async([...])`` (Apache Flink Agents).

Each ``DurableCallSpec`` names one call (``func(*args, **kwargs)``); the batch gives one
``Outcome`` per call, in the order given: its value, or the exception it raised. Each call is
an ordinary durable call of the action (``durable_execute_async``): recorded, replayed after a
restore without being called again, and run at once, concurrently with the others, within the
runtime's limits on calls in flight.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ._errors import ReplayDivergenceError, UsageError
from ._secrets import cut_masked

__all__ = ["DurableCallSpec", "Outcome", "batch_awaitables", "gather_outcomes"]

T = TypeVar("T")

_RESERVED = frozenset({"fn", "func", "reconciler", "strict", "durable_id"})
"""Keywords ``durable_execute_async`` keeps for itself: a call's keyword of one of these names
is bound to its function (``functools.partial``) instead, so the function still gets it."""


@dataclass(frozen=True, kw_only=True)
class DurableCallSpec:
    """One call of a batch (Apache Flink Agents' ``DurableCall``; ``compat.DurableCall``).

    Built by keyword, as Flink Agents writes it: ``DurableCall(id="tool-call-1", func=f,
    kwargs={"x": 1})``.

    Attributes:
        func: the function, plain or ``async``.
        args: its positional arguments.
        kwargs: its keyword arguments (``None``: none).
        id: a name for the call. Taken and not used: a call's identity here is its place in
            the action (its ordinal), recorded with its function and arguments.
        reconciler: called at recovery instead of ``func`` when the call had started but its
            outcome was recorded nowhere.
        timeout: taken and not used (reserved in Flink Agents too); the runtime's I/O
            timeouts apply.
    """

    func: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] | None = None
    id: str | None = None
    reconciler: Callable[[], Any] | None = None
    timeout: float | None = None


class Outcome(Generic[T]):
    """What one call of a batch gave: a value (success) or the exception it raised (failure).

    Args:
        value: the call's result (``None`` for a failure).
        error: the exception it raised, or ``None`` for a success.
    """

    __slots__ = ("value", "error")

    def __init__(self, value: T | None = None, error: BaseException | None = None) -> None:
        self.value = value
        self.error = error

    @classmethod
    def success(cls, value: T) -> Outcome[T]:
        """A successful outcome carrying ``value``."""
        return cls(value, None)

    @classmethod
    def failure(cls, error: BaseException) -> Outcome[Any]:
        """A failed outcome carrying the exception ``error``."""
        return cls(None, error)

    def is_success(self) -> bool:
        """Whether the call returned (``error`` is ``None``): a method, as in Flink Agents."""
        return self.error is None

    def is_failure(self) -> bool:
        """Whether the call raised: a method, as in Flink Agents (``outcome.is_failure()``)."""
        return self.error is not None

    def get(self) -> T | None:
        """The value, or raise the call's exception.

        Returns:
            The value of a successful call.

        Raises:
            BaseException: the exception of a failed call.
        """
        if self.error is not None:
            raise self.error
        return self.value

    def __repr__(self) -> str:
        if self.error is not None:
            return f"Outcome.failure({self.error!r})"
        return f"Outcome.success({cut_masked(repr(self.value), 200)})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Outcome):
            return NotImplemented
        return self.value == other.value and self.error is other.error

    __hash__ = None  # type: ignore[assignment]


def _parts(
    call: Any, position: int
) -> tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any], Callable[[], Any] | None]:
    """The function, arguments and reconciler of the batch's call at ``position``."""
    func = getattr(call, "func", None)
    if not callable(func):
        raise UsageError(
            f"durable_execute_all_async: callables[{position}] is "
            f"{type(call).__name__} {cut_masked(repr(call), 80)}, not a call: give "
            f"DurableCall(func=..., args=(...), kwargs={{...}})"
        )
    args = getattr(call, "args", ()) or ()
    kwargs = getattr(call, "kwargs", None) or {}
    if not isinstance(args, (tuple, list)) or not isinstance(kwargs, dict):
        raise UsageError(
            f"durable_execute_all_async: callables[{position}] has args "
            f"{type(args).__name__} and kwargs {type(kwargs).__name__}: args must "
            f"be a tuple or list, kwargs a dict"
        )
    bound = {k: kwargs[k] for k in _RESERVED.intersection(kwargs)}
    if bound:
        func = functools.partial(func, **bound)
        kwargs = {k: v for k, v in kwargs.items() if k not in bound}
    return func, tuple(args), dict(kwargs), getattr(call, "reconciler", None)


def batch_awaitables(ctx: Any, callables: Sequence[Any]) -> list[Any]:
    """Start each call of the batch as a durable call of ``ctx``, in order.

    Args:
        ctx: the action's ``RunnerContext``.
        callables: the calls (``DurableCallSpec``, or any object with ``func``, ``args``,
            ``kwargs`` and ``reconciler``).

    Returns:
        One awaitable per call, in the order given.

    Raises:
        UsageError: when ``callables`` is not a list of calls (naming the first that is not).
    """
    if isinstance(callables, (str, bytes)) or not isinstance(callables, Sequence):
        raise UsageError(
            f"durable_execute_all_async takes a list of DurableCall, got {type(callables).__name__}"
        )
    parts = [_parts(call, i) for i, call in enumerate(callables)]  # all checked first
    # a reconciler only when given: a keyword named so is read against the function's own
    return [
        ctx.durable_execute_async(func, *args, reconciler=reconciler, **kwargs)
        if reconciler is not None
        else ctx.durable_execute_async(func, *args, **kwargs)
        for func, args, kwargs, reconciler in parts
    ]


async def gather_outcomes(awaitables: list[Any]) -> list[Outcome[Any]]:
    """Await each call in order; what one raises is its failed ``Outcome``.

    Args:
        awaitables: the started calls.

    Returns:
        One ``Outcome`` per call, in order.

    Raises:
        ReplayDivergenceError: when a call is not the one recorded at its place (the
            action's code changed): a fault of the action, not of one call.
    """
    outcomes: list[Outcome[Any]] = []
    for awaitable in awaitables:
        try:
            value = await awaitable
        except ReplayDivergenceError:
            raise
        except Exception as e:  # noqa: BLE001 - the call's outcome
            outcomes.append(Outcome.failure(e))
        else:
            outcomes.append(Outcome.success(value))
    return outcomes
