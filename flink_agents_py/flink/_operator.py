"""The agent operator: ``AgentCore`` hosted in a PyFlink ``KeyedProcessFunction``.

Keyed state holds, per key: the in-flight run (``RunState`` as JSON), the short-term memory
(JSON), and the queue of inputs waiting behind the run (a ``MapState`` by position, with head
and tail counters). A checkpoint therefore captures every run's bookkeeping and recorded
durable call outcomes; live coroutines stay in the operator and are rebuilt from state after
a restore (see ``AgentCore``).

Wake-ups: an action waiting for I/O cannot be resumed from the executor's thread, since keyed
state is only reachable inside a callback for that key. While a key is busy the operator keeps
a processing-time timer for it, backing off from 1 ms to ``max_poll_interval_ms`` while nothing
completes. At the end of bounded input Flink drops pending processing-time timers, so every
busy key also has an event-time timer at ``DRAIN_TIMESTAMP``, which fires for each key at the
final watermark. In thread mode the drain timer of a busy key re-registers itself one
millisecond later: Flink polls a timer before firing it and fires every timer up to the
watermark in one loop, so the new one fires in that same loop after every other key's turn,
and all busy keys advance in turns as their I/O completes (the
operator blocks only while no key at all has completed I/O). In process mode, where timer
registrations reach Flink only with the bundle's output, the drain timer blocks until its key
has no work left.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from pyflink.common import Types
from pyflink.datastream import KeyedProcessFunction, OutputTag, RuntimeContext
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor

from ..plan import AgentPlan
from ..runtime import (
    AgentCore,
    Failpoint,
    Journal,
    KeyState,
    Observer,
    RunState,
    StepResult,
    dumps_json,
    loads_json,
)

__all__ = ["AgentOperator", "ERROR_TAG", "DRAIN_TIMESTAMP"]

DRAIN_TIMESTAMP = 2**63 - 2**40
"""The event-time timer that fires for every key at the end of bounded input.

Far beyond any real watermark (about year 35,000), and far enough below ``Long.MAX_VALUE``
that a drain can take a new, later timestamp for each of its rounds."""

ERROR_TAG = OutputTag("agent-errors", Types.PICKLED_BYTE_ARRAY())
"""Side output of failed actions and rejected records (``ErrorRecord`` as a dict)."""


def _timers_are_synchronous(ctx: Any) -> bool:
    """Whether timer registrations reach Flink's timer service at once (thread mode).

    In thread mode the Python function calls the Java timer service directly; in process
    mode registrations travel back with the bundle's output.
    """
    return type(ctx).__module__.startswith("pyflink.fn_execution.datastream.embedded")


class _FlinkKeyState(KeyState):
    """The current key's state in Flink keyed state; loaded lazily, written back on flush."""

    def __init__(self, op: AgentOperator) -> None:
        self._op = op
        self._run: RunState | None = None
        self._run_loaded = False
        self._memory: dict[str, Any] | None = None

    @property
    def run(self) -> RunState | None:
        if not self._run_loaded:
            raw = self._op._run_state.value()
            self._run = RunState.model_validate(loads_json(raw)) if raw else None
            self._run_loaded = True
        return self._run

    @run.setter
    def run(self, value: RunState | None) -> None:
        self._run, self._run_loaded = value, True

    @property
    def memory(self) -> dict[str, Any]:
        if self._memory is None:
            raw = self._op._memory_state.value()
            self._memory = loads_json(raw) if raw else {}
        return self._memory

    @memory.setter
    def memory(self, value: dict[str, Any]) -> None:
        self._memory = value

    def _bounds(self) -> tuple[int, int]:
        return self._op._head_state.value() or 0, self._op._tail_state.value() or 0

    def push_input(self, record: Any) -> None:
        _, tail = self._bounds()
        self._op._queue_state.put(tail, dumps_json(record, sort_keys=False).decode())
        self._op._tail_state.update(tail + 1)

    def pop_input(self) -> tuple[int, Any] | None:
        head, tail = self._bounds()
        if head >= tail:
            return None
        raw = self._op._queue_state.get(head)
        self._op._queue_state.remove(head)
        self._op._head_state.update(head + 1)
        return head, loads_json(raw)

    def queued(self) -> int:
        head, tail = self._bounds()
        return tail - head

    def flush(self) -> None:
        if self._run_loaded:
            if self._run is None:
                self._op._run_state.clear()
            else:
                self._op._run_state.update(
                    dumps_json(self._run.model_dump(mode="python"), sort_keys=False).decode())
        if self._memory is not None:
            self._op._memory_state.update(dumps_json(self._memory, sort_keys=False).decode())


def _task_info(runtime_context: Any) -> tuple[int, int]:
    """``(subtask index, attempt number)``. PyFlink 2.3's thread-mode context calls Java
    methods that moved to ``RuntimeContext.getTaskInfo()``, so that is tried next."""
    found: list[int] = []
    for name, java in (("get_index_of_this_subtask", "getIndexOfThisSubtask"),
                       ("get_attempt_number", "getAttemptNumber")):
        try:
            found.append(int(getattr(runtime_context, name)()))
            continue
        except Exception:  # noqa: BLE001 - e.g. AttributeError from pemja
            pass
        try:
            info = runtime_context._runtime_context.getTaskInfo()
            found.append(int(getattr(info, java)()))
        except Exception:  # noqa: BLE001
            found.append(0)
    return found[0], found[1]


class AgentOperator(KeyedProcessFunction):
    """Runs an agent plan on a keyed stream.

    Input elements are the records (any JSON value); the main output carries each
    ``OutputEvent.output``; ``ERROR_TAG`` carries failures as dicts with the key.

    Args:
        plan: the compiled agent.
        max_in_flight: the most I/O calls running at once in this operator instance.
        max_poll_interval_ms: the longest wait between checks of a busy key, in ms.
        drain_poll_s: at end of input, how long to block per wait for a key's I/O, in s.
        journal: an optional write-ahead journal (picklable; each instance opens its own).
        failpoint: a test hook for crash injection (see ``runtime.Failpoint``).
        metrics: register the agent metrics in the operator's metric group
            (``flink_agents``; see ``observability.AgentMetrics``).
        event_log: an ``observability.EventLog`` (or a path, or a sink); each subtask writes
            its own file.
        observer: an extra ``runtime.Observer`` (picklable).
    """

    def __init__(self, plan: AgentPlan, *, max_in_flight: int = 32,
                 max_poll_interval_ms: int = 20, drain_poll_s: float = 1.0,
                 journal: Journal | None = None, failpoint: Failpoint | None = None,
                 metrics: bool = True, event_log: Any = None,
                 observer: Observer | None = None) -> None:
        self.plan = plan
        self.journal = journal
        self.failpoint = failpoint
        self.metrics = metrics
        self.event_log = event_log
        self.observer = observer
        self.observability: Any = None
        self.max_in_flight = max_in_flight
        self.max_poll_interval_ms = max_poll_interval_ms
        self.drain_poll_s = drain_poll_s
        self.core: AgentCore | None = None
        self._backoff: dict[Any, int] = {}

    def open(self, runtime_context: RuntimeContext) -> None:
        """Create the keyed state handles and start the core's I/O executor."""
        self._run_state = runtime_context.get_state(ValueStateDescriptor("agent-run", Types.STRING()))
        self._memory_state = runtime_context.get_state(
            ValueStateDescriptor("agent-memory", Types.STRING()))
        self._queue_state = runtime_context.get_map_state(
            MapStateDescriptor("agent-queue", Types.LONG(), Types.STRING()))
        self._head_state = runtime_context.get_state(ValueStateDescriptor("agent-queue-head", Types.LONG()))
        self._tail_state = runtime_context.get_state(ValueStateDescriptor("agent-queue-tail", Types.LONG()))
        self.observability = self._open_observability(runtime_context)
        self.core = AgentCore(self.plan, max_in_flight=self.max_in_flight, journal=self.journal,
                              failpoint=self.failpoint, observer=self.observability.observer)
        self.core.open()
        self._backoff = {}

    def _open_observability(self, runtime_context: RuntimeContext) -> Any:
        from ..observability import HostObservability

        group = None
        if self.metrics:
            try:
                group = runtime_context.get_metrics_group()
            except Exception:  # noqa: BLE001 - metrics disabled for Python functions
                logging.getLogger(__name__).warning("no metric group: agent metrics stay local",
                                                    exc_info=True)
        subtask, attempt = _task_info(runtime_context)
        return HostObservability(
            metrics=self.metrics, event_log=self.event_log, observer=self.observer,
            host="flink", subtask=subtask, attempt=attempt, flink_group=group,
            actions=list(self.plan.actions))

    def close(self) -> None:
        """Stop the executor and close resources (and the event log)."""
        if self.core is not None:
            self.core.close()
            self.core = None
        if self.observability is not None:
            self.observability.close()

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        """Queue the record for its key and run what can run."""
        assert self.core is not None
        key = ctx.get_current_key()
        if self.failpoint is not None:
            self.failpoint("element", key, {"record": value})
        res = self.core.on_input(key, value, _FlinkKeyState(self))
        yield from self._emit(res)
        self._schedule(key, res, ctx, progressed=True)

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterator[Any]:
        """Resume the key: apply completed I/O; at the drain timer, finish all its work."""
        if self.core is None:  # a processing-time timer queued before close(): nothing to do
            return
        key = ctx.get_current_key()
        if self.failpoint is not None:
            self.failpoint("timer", key, {"timestamp": timestamp})
        progressed = self.core.has_deliveries(key)
        if timestamp >= DRAIN_TIMESTAMP:
            res = self.core.advance(key, _FlinkKeyState(self))
            yield from self._emit(res)
            if res.busy and _timers_are_synchronous(ctx):
                # Take turns: Flink fires a timer re-registered during the final watermark in
                # the same loop, after the other keys' timers, so every busy key advances as
                # its I/O completes. Block only while no key at all has completed I/O.
                if not self.core.has_deliveries(key) and not self.core.wait_any(0):
                    self.core.wait_any(self.drain_poll_s)
                # one later than this round, so it sorts after every other key's turn
                ctx.timer_service().register_event_time_timer(timestamp + 1)
                return
            while res.busy:  # process mode: timers come back with the bundle, too late here
                self.core.wait_for(key, self.drain_poll_s)
                res = self.core.advance(key, _FlinkKeyState(self))
                yield from self._emit(res)
            self._backoff.pop(key, None)
            return
        if not progressed and key in self.core.live_keys():
            self._schedule(key, StepResult(busy=True), ctx, progressed=False)
            return
        res = self.core.advance(key, _FlinkKeyState(self))
        yield from self._emit(res)
        self._schedule(key, res, ctx, progressed=progressed)

    def _emit(self, res: StepResult) -> Iterator[Any]:
        yield from res.outputs
        for err in res.errors:
            yield ERROR_TAG, err.model_dump(mode="json")
        if self.failpoint is not None and res.outputs:
            self.failpoint("outputs_emitted", None, {"outputs": res.outputs})

    def _schedule(self, key: Any, res: StepResult, ctx: Any, progressed: bool) -> None:
        if not res.busy:
            self._backoff.pop(key, None)
            return
        delay = 1 if progressed else min(self._backoff.get(key, 1) * 2, self.max_poll_interval_ms)
        self._backoff[key] = delay
        timers = ctx.timer_service()
        timers.register_processing_time_timer(timers.current_processing_time() + delay)
        timers.register_event_time_timer(DRAIN_TIMESTAMP)
