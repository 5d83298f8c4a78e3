"""The agent operator's second input (outside events) and its wait timers, on Flink.

**Union with a tagged envelope, not ``connect``.** The agent runs in one
``KeyedProcessFunction`` (``AgentOperator``), with its keyed state, its restore sweep and its
key switching in thread mode. A ``KeyedCoProcessFunction`` over ``connect`` would be a second
operator class with the same state under other callbacks. Instead, a connected agent takes the
union of its input and its outside events, each outside event wrapped in an
``OutsideEnvelope`` (its records pass unchanged), keyed by one selector that asks the envelope
for the event's key: one operator, one uid, the same state, so a job that gains a second input
restores from its earlier savepoints; a job without one pays nothing (no envelope, no map).

**Timers.** A wait's deadline is a processing-time timer of its key in Flink's timer service
(checkpointed, moved with its key group on a rescale); ``WAITS_END_TIMESTAMP``, an event-time
timer registered when a run parks, fires at the end of all input (the final watermark, once
both inputs have ended), where every wait still open times out, as Flink fires event-time
timers then. Nothing of a parked run is kept in the operator's memory: its run text leaves
the operator's cache, and the restore sweep leaves parked runs in keyed state (they resume on
their event or timer).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from ..runtime import StepResult
from ..runtime import wall_clock_ms as _wall_clock_ms
from ._key_state import _FlinkKeyState
from ._switching import DRAIN_TIMESTAMP

if TYPE_CHECKING:
    from ._operator import AgentOperator

__all__ = ["OutsideEnvelope", "envelope_key", "WAITS_END_TIMESTAMP", "outside_element",
           "wait_timer", "register_waits", "wrap_outside"]

WAITS_END_TIMESTAMP = DRAIN_TIMESTAMP - 1
"""The event-time timer of a parked run: fires at the final watermark (end of all input)."""


class OutsideEnvelope:
    """An outside event on its way to the agent operator, told from an input record by type.

    Args:
        event: the outside event (an ``ExternalEvent`` or its dict).
    """

    __slots__ = ("event",)

    def __init__(self, event: Any) -> None:
        self.event = event

    def __reduce__(self) -> tuple[Any, ...]:
        return OutsideEnvelope, (self.event,)


def wrap_outside(event: Any) -> OutsideEnvelope:
    """The envelope of one outside event (the map before the union).

    Returns:
        The envelope.
    """
    return OutsideEnvelope(event)


def envelope_key(records: Callable[[Any], Any], events: Callable[[Any], Any],
                 value: Any) -> Any:
    """The key of a value of the union: ``events`` of an envelope's event, else ``records``.

    Returns:
        The key.
    """
    if type(value) is OutsideEnvelope:
        return events(value.event)
    return records(value)


def outside_element(op: AgentOperator, key: Any, event: Any, ctx: Any) -> Generator[Any]:
    """``process_element`` of an outside event: deliver it to its key's wait.

    Yields:
        The outputs, and ``(ERROR_TAG, error)`` pairs.
    """
    core = op.core
    assert core is not None
    switch = op._switch
    if switch is not None and not switch.swept:
        yield from switch.sweep(ctx)
    res = core.on_outside_event(key, event, _FlinkKeyState(op, op._runs), "outside event")
    yield from op._emit(res)
    op._schedule(key, res, ctx, progressed=True)
    if switch is not None:
        yield from switch.pump(ctx)
        switch.arm_pump(ctx)


def register_waits(op: AgentOperator, key: Any, res: StepResult, ctx: Any) -> None:
    """Set the timers an advance asked for; forget a parked run (see the module docstring).

    The timers of a run that ended are deleted first: its deadlines that had not fired,
    and the end-of-input timer, which on an unbounded input would otherwise stay in the
    timer service for ever, one for every key that ever waited.
    """
    ended = res.ended_timers
    if ended is not None:
        service = ctx.timer_service()
        # a timer is its key's and time's: keep the operator's own at the same time
        own = {op._poll_at.get(key), op._flush_at[1] if op._flush_at is not None
               and op._flush_at[0] == key else None,
               op._switch._pump_at if op._switch is not None else None}
        for deadline in set(ended) - own:
            service.delete_processing_time_timer(deadline)
        service.delete_event_time_timer(WAITS_END_TIMESTAMP)
    timers = res.timers
    if timers:
        service = ctx.timer_service()
        for deadline in timers:
            service.register_processing_time_timer(deadline)
    if res.parked:
        op._runs.pop(key, None)
        ctx.timer_service().register_event_time_timer(WAITS_END_TIMESTAMP)


def wait_timer(op: AgentOperator, key: Any, timestamp: int, ctx: Any
               ) -> Generator[Any, None, bool]:
    """A timer of ``key``: fire its waits that are due (all of them at the end of input).

    Yields:
        The outputs, and ``(ERROR_TAG, error)`` pairs.

    Returns:
        Whether the timer is done with: the end-of-input timer, or (process mode, where the
        operator's poll would advance the key) a timer of a parked run.
    """
    core = op.core
    assert core is not None
    if timestamp >= DRAIN_TIMESTAMP:
        return False
    end = timestamp == WAITS_END_TIMESTAMP
    state = _FlinkKeyState(op, op._runs)
    run = state.run
    if run is None or not run.waits:
        state.flush()
        return end
    res = core.on_timers(key, max(timestamp, _wall_clock_ms()) if not end else timestamp,
                         state, end_of_input=end)
    if res is None:
        parked = run.parked
        if parked:  # not cached again: a parked run is kept in keyed state only
            op._runs.pop(key, None)
        else:
            state.flush()  # puts a busy run back in the operator's cache
        return end or (op._switch is None and parked)
    yield from op._emit(res)
    op._schedule(key, res, ctx, progressed=True)
    return end or op._switch is None
