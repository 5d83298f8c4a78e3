"""The agent operator: ``AgentCore`` hosted in a PyFlink ``KeyedProcessFunction``.

Keyed state holds, per key: the in-flight run (``RunState.to_stored()`` text), the short-term
memory (JSON), and the queue of inputs waiting behind the run (a ``MapState`` by position,
with a tail counter, the key's next input sequence number; its head is the input after the
run in flight, ``run.seq + 1``). A checkpoint
therefore captures every run's bookkeeping and recorded durable call outcomes; live
coroutines stay in the operator and are rebuilt from state after a restore (see
``AgentCore``).

Cost per record (``_FlinkKeyState``): each state value is read at most once per callback and
written back only when it changed. A run that starts and completes within one callback never
touches the run state, and an input that arrives for an idle key is handed to its run without
the ``MapState`` queue: such a record costs reading the run and the tail, and writing the
tail; for one of the last 10,000 keys that went idle in this operator, only writing the tail
(the operator remembers what keyed state holds for them: no run, and the tail). This relies
on an invariant of the core: a key with no run in flight has no queued inputs (the core
starts the next queued input as soon as a run completes), and the run in flight is the last
input taken from the queue, so the queue's head is never stored (the ``agent-queue-head``
state of earlier versions held ``run.seq + 1`` too, and is only kept declared).

Wake-ups: an action waiting for I/O cannot be resumed from the executor's thread, since keyed
state is only reachable inside a callback. In thread mode a callback may switch the keyed
state backend's current key, so completions are applied per completion, not per waiting key
(``_switching.KeySwitching``): every callback ends with a pump that advances each key whose
call completed under its own key; one processing-time timer keeps the pump going while calls
are in flight; busy keys have no timers of their own, only their key group has (what wakes a
subtask after a restore, whose first callback then resumes every run left in keyed state);
and the drain timer, one per key group, pumps every busy key at the end of bounded input.
Without key switching (process mode), while a key is busy the operator keeps one
processing-time timer for it, set for when its next call is expected to complete (the I/O
executor knows whether the key's call still waits for a slot or runs, and how long calls of
that function took lately), then backing off from 1 ms to ``max_poll_interval_ms`` while
nothing completes; with many keys waiting the longest backoff grows with their number (half a
millisecond per busy key, at most 5 s), which bounds the idle polls to about 2,000 per second
however many keys wait on calls slower than expected. At the end of bounded input Flink drops
pending processing-time timers, so there every busy key also has an event-time timer at
``DRAIN_TIMESTAMP``, registered once when the key becomes busy and deleted when it becomes
idle, which fires for each key still busy at the final watermark; the first to fire works every
busy key of the subtask (switching the Python state backend's current key) until none has
work left, since timer registrations reach Flink only with the bundle's output
(``_process_drain``).

Checkpoints and the end of bounded input: no checkpoint can complete during that final
drain. The drain runs inside Flink's processing of the final watermark, which holds the
task's mailbox (where checkpoints are taken), and the barrier of the next checkpoint reaches
the operator only behind the end-of-data event that follows the final watermark: after it
Flink finishes the operator and drops processing-time timers, so the drain cannot be spread
over later callbacks either (PyFlink offers a Python function no way to yield to the mailbox
or to defer its end of input). Without limits the operator would take in a whole bounded
input at once, so nearly all of a long job would run in that drain. So the operator does not
read far ahead of its work: an input record waits inside the operator (backpressure) while its
key's queue is at ``max_queued_per_key`` (working that key meanwhile), or while more than
``max_waiting_calls`` calls wait for an I/O slot. The input then ends only when at most that
much work is left; with unaligned checkpoints, whose barriers overtake the records buffered
upstream of a backpressured operator, checkpoints keep completing while the backlog is worked
off (between two callbacks), and a failure near the end of a long bounded job restores from a
recent checkpoint (calls made since then are answered from the journal, when there is one).
Measured in ``tests/test_drain_checkpoint.py``; see ``docs/how-to/limits.md``.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any

from pyflink.common import Types
from pyflink.datastream import KeyedProcessFunction, OutputTag, RuntimeContext
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor

from ..plan import AgentPlan
from ..runtime import (
    AgentCore,
    HostOptions,
    KeyEncoding,
    RunState,
    StepResult,
    key_encoding,
    rejected_record,
    warm_up,
)
from ..runtime.internal import REJECTED_MARK
from ._fast_input import adopt_record_input
from ._fresh import fresh_reduce
from ._gc import hold_gc_settings, release_gc_settings
from ._key_state import _FlinkKeyState
from ._keyed_input import CarriedKey, Positioned, Sealed
from ._process_drain import drain_all, python_state_backend
from ._second_input import OutsideEnvelope, outside_element, register_waits, wait_timer
from ._switching import _MAX_EXPECTED_WAIT_MS, DRAIN_TIMESTAMP, KeySwitching, note_final_drain
from ._task_context import (
    _job_names,
    _parallelism,
    _switchable_backend,
    _task_info,
    _timers_are_synchronous,
)

__all__ = ["AgentOperator", "ERROR_TAG", "DRAIN_TIMESTAMP"]

log = logging.getLogger(__name__)

ERROR_TAG = OutputTag("agent-errors", Types.PICKLED_BYTE_ARRAY())
"""Side output of failed actions and rejected records (``ErrorRecord`` as a dict)."""

_POLL_SPACING_MS = 0.5
"""Per busy key, how much the longest backoff between polls grows, in ms: with ``n`` keys
waiting on calls that take longer than expected, each is polled at most every
``max(max_poll_interval_ms, n * 0.5 ms)`` (capped at ``_MAX_POLL_SPREAD_MS``), so idle polls
stay near 2,000 per second however many keys wait (about 5 % of a core), at the price of
noticing such a late completion up to that much later."""

_MAX_POLL_SPREAD_MS = 5_000
"""The most ``_POLL_SPACING_MS`` stretches the backoff between polls, in ms."""

_BUSY = StepResult(busy=True)

_encoding = key_encoding  # ``AgentOperator`` has an argument of that name


class AgentOperator(KeyedProcessFunction):
    """Runs an agent plan on a keyed stream.

    Input elements are the records (any JSON value); the main output carries each
    ``OutputEvent.output``; ``ERROR_TAG`` carries failures as dicts with the key.

    Args:
        plan: the compiled agent.
        options: how to run it (``runtime.HostOptions``; default: the defaults).
        key_encoding: how the input stream was keyed (``runtime.KeyEncoding``; ``"json"``:
            the current key is an encoded ``str``, decoded for ``ctx.key``).
        **changes: options to change from ``options`` by name (``metrics=False``...).

    Raises:
        TypeError: when a name in ``changes`` is not an option.
        ValueError: when an option is out of range, or ``key_encoding`` is unknown.

    Attributes:
        stats: what the operator did, for measurements: ``timer_callbacks``, ``idle_polls``
            (a poll that found no completed I/O), ``input_waits`` (records that waited
            inside the operator for backpressure), ``drain_rounds``, ``pumped`` (keys
            advanced by the pump, see ``_switching``), ``pump_timers``, ``group_timers``
            (a key group's own timer fired), ``swept`` (runs found in keyed state by the
            first callback after a restore), ``runs_abandoned`` (runs that could not finish
            at the end of input, each reported on ``ERROR_TAG``: ``AgentCore.give_up``).
    """

    def __init__(self, plan: AgentPlan, options: HostOptions | None = None, *,
                 key_encoding: str | KeyEncoding = "json", **changes: Any) -> None:
        base = options if options is not None else HostOptions()
        self.plan = plan
        self.keys = _encoding(key_encoding)
        self.options = base.replace(**changes) if changes else base
        self.observability: Any = None
        self.output_check: Callable[[Any], Any] | None = None  # see ``_typed_outputs``
        self.core: AgentCore | None = None
        self.stats: collections.Counter[str] = collections.Counter()
        self._rejections_logged: set[tuple[str, str]] = set()  # tracebacks logged once
        self._key: Any = None
        self._backoff: dict[Any, int] = {}
        self._poll_at: dict[Any, int] = {}
        self._drain_at: dict[Any, int] = {}
        self._synchronous: bool | None = None
        self._flush_at: tuple[Any, int] | None = None  # (key, time) of the metrics flush timer
        self._pushes_metrics = False  # a Flink metric group takes the metrics (set in open)
        self._is_live: Callable[[Any], bool] = lambda key: True
        self._waiting_limit = self.options.waiting_calls_limit
        self._switch: KeySwitching | None = None  # thread mode: keys can be switched
        self._python_backend: Any = None  # process mode: PyFlink's (``_process_drain``)
        # busy key -> (run text, run, queue head, queue tail) as in keyed state (_FlinkKeyState)
        self._runs: dict[Any, tuple[Any, RunState, int, int]] = {}
        # key idle in keyed state -> its queue tail there, for the last keys gone idle
        self._idle: collections.OrderedDict[Any, int] = collections.OrderedDict()

    def __reduce__(self) -> tuple[Any, ...]:
        """Forget finished jobs' modules first when unpickled (see ``_fresh``).

        Returns:
            ``fresh_reduce(self)``: a thread-mode TaskManager's interpreter, unpickling this
            operator, imports this job's own modules, not those a finished job left behind.
        """
        return fresh_reduce(self)

    def open(self, runtime_context: RuntimeContext) -> None:
        """Create the keyed state handles, start the core's I/O executor, tune the GC.

        The interpreter's cyclic GC settings are held until ``close`` (``_gc``).
        """
        opts = self.options
        self._run_state = runtime_context.get_state(
            ValueStateDescriptor("agent-run", Types.STRING()))
        self._memory_state = runtime_context.get_state(
            ValueStateDescriptor("agent-memory", Types.STRING()))
        self._queue_state = runtime_context.get_map_state(
            MapStateDescriptor("agent-queue", Types.LONG(), Types.STRING()))
        self._head_state = runtime_context.get_state(
            ValueStateDescriptor("agent-queue-head", Types.LONG()))
        self._tail_state = runtime_context.get_state(
            ValueStateDescriptor("agent-queue-tail", Types.LONG()))
        self.observability = self._open_observability(runtime_context)
        backend = _switchable_backend(runtime_context)
        if backend is not None:  # thread mode: its records without PyFlink's Row (_fast_input)
            adopt_record_input(self)
        switch = self._switch = KeySwitching(self, backend) if backend is not None else None
        self._python_backend = python_state_backend(runtime_context) if switch is None else None
        self._runs, self._idle = {}, collections.OrderedDict()
        core = self.core = AgentCore(
            self.plan, max_in_flight=opts.max_in_flight, journal=opts.journal,
            failpoint=opts.failpoint, observer=self.observability.observer,
            notify=switch.ready.append if switch is not None else None,
            key_value=self.keys.value_function(), lineage=opts.lineage,
            output_check=self.output_check,
            max_in_flight_per_key=opts.max_in_flight_per_key)
        core.resources.parallelism = _parallelism(runtime_context)  # agent budgets' shares
        self.observability.watch(core.resources)  # live gauges: flow limits, budgets left
        if self.observability.metrics is not None:
            core.gauges = self.observability.metrics.counters  # the runs_waiting gauge
        warm_up(self.plan)  # imports a key's first run would otherwise wait for
        core.open()
        hold_gc_settings(self)
        self._is_live = core.is_live
        self._waiting_limit = opts.waiting_calls_limit  # (read per record)
        # (read per record: without a metric group nothing waits to be pushed, no call asks)
        self._pushes_metrics = self.observability.flush_interval_ms > 0
        self._backoff, self._poll_at, self._drain_at = {}, {}, {}
        self._flush_at = None
        self.stats.clear()

    def _open_observability(self, runtime_context: RuntimeContext) -> Any:
        from ..observability import HostObservability

        opts = self.options
        group = None
        if opts.metrics:
            try:
                group = runtime_context.get_metrics_group()
            except Exception:  # noqa: BLE001 - metrics disabled for Python functions
                log.warning("no metric group: agent metrics stay local", exc_info=True)
        subtask, attempt = _task_info(runtime_context)
        return HostObservability(
            metrics=opts.metrics, event_log=opts.event_log, observer=opts.observer,
            host="flink", subtask=subtask, attempt=attempt, flink_group=group,
            actions=list(self.plan.actions), agent=self.plan.name,
            apache_event_log=opts.apache_event_log, job=_job_names(runtime_context, opts),
            lineage=opts.lineage or "")

    def close(self) -> None:
        """Stop the executor and close resources (and the event log)."""
        release_gc_settings(self)
        if self.core is not None:
            self.core.close()
            self.core = None
            log.debug("agent operator stats: %s", dict(self.stats))
        if self.observability is not None:
            self.observability.close()

    # -- callbacks ---------------------------------------------------------------------
    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        """Queue the record for its key and run what can run.

        Blocks (backpressure) while the key's queue is at ``max_queued_per_key``, working
        that key meanwhile, and after the record while more than ``max_waiting_calls`` calls
        wait for an I/O slot; each wait lasts at most ``drain_poll_s``, so that the task
        thread returns to Flink (checkpoint barriers, timers) at least that often.

        Yields:
            The outputs, and ``(ERROR_TAG, error)`` pairs.
        """
        core = self.core
        assert core is not None
        key = self._key = ctx.get_current_key()  # its identity (``KeyEncoding``)
        kind = type(value)
        if kind is Sealed:  # process mode: pickled by the key step (``_keyed_input``)
            value = value.opened()
            kind = type(value)
        if kind is CarriedKey:  # a record of a KeyedStream, with its key (keyed by it)
            value = value.record
            kind = type(value)
        where, source = "record", None  # as error rows of records not run name it
        if kind is Positioned:  # a record of from_kafka or a file, with where it was read
            where = source = value.where
            value = value.record
        rejected = self.keys.rejected(key) if type(key) is not str \
            or key[:1] == REJECTED_MARK else None  # (no call for a usual key)
        if rejected is not None:  # its key selector failed, or its key has no encoding
            outside = type(value) is OutsideEnvelope
            yield ERROR_TAG, rejected_record(rejected, value.event if outside else value,
                                             "outside event" if outside else where,
                                             source, self._rejections_logged).json_row()
            return
        if type(value) is OutsideEnvelope:  # the second input (``_second_input``)
            yield from outside_element(self, key, value.event, ctx)
            return
        opts = self.options
        if opts.failpoint is not None:
            opts.failpoint("element", self.keys.value(key), {"record": value})
        switch = self._switch
        if switch is not None and not switch.swept:  # the first callback: runs in state
            yield from switch.sweep(ctx)
        state = _FlinkKeyState(self, self._runs)
        limit = opts.max_queued_per_key
        if limit is not None and state.queued() >= limit:
            self.stats["input_waits"] += 1
            deadline = time.monotonic() + opts.drain_poll_s
            res = core.advance(key, state)
            yield from self._emit(res)
            while res.busy and state.queued() >= limit:
                left = deadline - time.monotonic()
                if left <= 0:  # give the task thread back (checkpoints, timers)
                    self.stats["input_wait_timeouts"] += 1
                    break
                if not core.has_deliveries(key):
                    core.wait_for(key, left)
                res = core.advance(key, state)
                yield from self._emit(res)
        res = core.on_input(key, value, state, where, source, fresh=True)  # (decoded for us)
        if res.errors or opts.failpoint is not None:
            yield from self._emit(res)
        elif res.outputs:  # ``_emit`` inline: outputs only, no failpoint (no generator for it)
            yield from res.outputs
        if switch is None or res.busy or res.timers or res.parked \
                or res.ended_timers is not None:
            self._schedule(key, res, ctx, progressed=True)
        elif key in switch.jkeys:  # ``_schedule``'s thread-mode idle case, inline
            switch.idle(key)
        executor = core.executor  # (no call pending: none waits for a slot, no call for it)
        if executor.pending and executor.waiting > self._waiting_limit:
            self.stats["input_waits"] += 1
            if not executor.wait_waiting_below(self._waiting_limit + 1, opts.drain_poll_s):
                self.stats["input_wait_timeouts"] += 1
        if switch is not None:
            if switch.ready:  # keys whose I/O completed (else the pump has nothing to do)
                yield from switch.pump(ctx)
            if executor.pending or switch.ready:  # (else ``arm_pump`` has nothing to set)
                switch.arm_pump(ctx)
        if self._pushes_metrics and self._flush_at is None and self.observability.unflushed:
            self._arm_flush(key, ctx)

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterator[Any]:
        """Resume the key: apply completed I/O; at the drain timer, finish all its work."""
        core = self.core
        if core is None:  # a processing-time timer queued before close(): nothing to do
            return
        key = self._key = ctx.get_current_key()
        self.stats["timer_callbacks"] += 1
        failpoint = self.options.failpoint
        if failpoint is not None:
            failpoint("timer", self.keys.value(key), {"timestamp": timestamp})
        switch = self._switch
        if switch is not None and not switch.swept:  # the first callback: runs in state
            yield from switch.sweep(ctx)
        if (yield from wait_timer(self, key, timestamp, ctx)):  # a wait's (``_second_input``)
            if switch is not None:
                yield from switch.after_timer(ctx)
            return
        if switch is not None:  # thread mode: timers per key group, the pump (``_switching``)
            if not switch.swept:  # the first callback: runs in state
                yield from switch.sweep(ctx)
            if timestamp >= DRAIN_TIMESTAMP:
                yield from switch.drain(ctx)
            else:
                self._flush_if_due(key, timestamp)
                switch.on_processing_timer(key, timestamp, ctx)
            yield from switch.after_timer(ctx)
        elif timestamp >= DRAIN_TIMESTAMP:
            yield from self._drain(key, timestamp, ctx)
        else:
            yield from self._poll(key, timestamp, ctx)
        if self._pushes_metrics and self._flush_at is None and self.observability.unflushed:
            self._arm_flush(key, ctx)

    def _flush_if_due(self, key: Any, timestamp: int) -> bool:
        """Push the metrics if their flush timer is due.

        Returns:
            Whether this timer was the flush timer.
        """
        if self._flush_at is None or timestamp < self._flush_at[1]:
            return False
        flush_key, flush_time = self._flush_at
        self._flush_at = None
        self.observability.flush()
        return (key, timestamp) == (flush_key, flush_time)

    def _poll(self, key: Any, timestamp: int, ctx: Any) -> Iterator[Any]:
        """A processing-time timer of ``key`` (process mode): its poll or the metrics flush."""
        core = self.core
        assert core is not None
        if self._flush_if_due(key, timestamp) and key not in self._poll_at:
            return  # the metrics flush timer only
        pending = self._poll_at.get(key)
        if pending is not None:
            if pending != timestamp:
                return  # superseded by the key's pending poll
            del self._poll_at[key]
        progressed = core.has_deliveries(key)
        if not progressed and self._is_live(key):
            self.stats["idle_polls"] += 1
            self._schedule(key, _BUSY, ctx, progressed=False)
            return
        # completed I/O, or a key restored from a checkpoint (its actions are not live yet)
        res = core.advance(key, _FlinkKeyState(self, self._runs))
        yield from self._emit(res)
        self._schedule(key, res, ctx, progressed=True)

    def _drain(self, key: Any, timestamp: int, ctx: Any) -> Iterator[Any]:
        """The end of input for ``key``: advance it; finish its work (see the module doc).

        A run that stays busy with nothing in flight and nothing delivered can never finish
        (``AgentCore.is_stuck``): it is given up (``AgentCore.give_up``, an
        ``UnfinishedRunError`` record on the error output, counted in
        ``stats["runs_abandoned"]``) and the key's next input runs, instead of the drain
        waiting for it for good.

        Yields:
            The outputs, and ``(ERROR_TAG, error)`` pairs.
        """
        core = self.core
        assert core is not None
        self.stats["drain_rounds"] += 1
        if self.stats["drain_rounds"] == 1:  # a drain timer is set only while a key is busy
            note_final_drain(self.plan.name, len({*self._drain_at, key}), key)
        self._drain_at.pop(key, None)  # this timer fired
        state = _FlinkKeyState(self, self._runs)
        res = yield from self._drain_step(key, state, core.advance(key, state), ctx)
        if self._synchronous is None:
            self._synchronous = _timers_are_synchronous(ctx)
        if res.busy and self._synchronous:
            # Take turns: Flink fires a timer re-registered during the final watermark in
            # the same loop, after the other keys' timers, so every busy key advances as
            # its I/O completes. Block only while no key at all has completed I/O.
            if not core.has_deliveries(key) and not core.wait_any(0):
                core.wait_any(self.options.drain_poll_s)
            # one later than this round, so it sorts after every other key's turn
            ctx.timer_service().register_event_time_timer(timestamp + 1)
            self._drain_at[key] = timestamp + 1
            return
        if self._python_backend is not None:  # process mode: every busy key at once
            yield from drain_all(self, key, state, res, ctx, self._python_backend)
        else:
            while res.busy:  # no backend to switch: this key alone, then the next
                core.wait_for(key, self.options.drain_poll_s)
                res = yield from self._drain_step(key, state, core.advance(key, state), ctx)
        self._backoff.pop(key, None)
        self._poll_at.pop(key, None)

    def _drain_step(self, key: Any, state: _FlinkKeyState, res: StepResult, ctx: Any
                    ) -> Generator[Any, None, StepResult]:
        """Emit an advance of the drain; give up the key's runs that cannot finish.

        Yields:
            The outputs, and ``(ERROR_TAG, error)`` pairs.

        Returns:
            The last result: the key's next run's when one was given up.
        """
        core = self.core
        assert core is not None
        while True:
            yield from self._emit(res)
            if res.timers or res.parked or res.ended_timers is not None:
                register_waits(self, key, res, ctx)
            if not res.busy or not core.is_stuck(key):
                return res
            self.stats["runs_abandoned"] += 1
            res = core.give_up(key, state)

    def _emit(self, res: StepResult) -> Iterator[Any]:
        yield from res.outputs
        for err in res.errors:
            yield ERROR_TAG, err.json_row()
        failpoint = self.options.failpoint
        if failpoint is not None and res.outputs:
            failpoint("outputs_emitted", None, {"outputs": res.outputs})

    # -- wake-ups ----------------------------------------------------------------------
    def _schedule(self, key: Any, res: StepResult, ctx: Any, progressed: bool) -> None:
        """Keep one poll timer for a busy key (and its drain timer); drop both when idle.

        In thread mode busy keys are the pump's (``KeySwitching``): no timers of their own.
        Timers of waits and parked runs: ``_second_input.register_waits``.
        """
        if res.timers or res.parked or res.ended_timers is not None:
            register_waits(self, key, res, ctx)
        switch = self._switch
        if switch is not None:
            if res.busy:
                switch.busy(key, ctx)
            else:
                switch.idle(key)
            return
        if not res.busy:
            self._backoff.pop(key, None)
            poll = self._poll_at.pop(key, None)
            drain = self._drain_at.pop(key, None)
            if poll is not None and (key, poll) == self._flush_at:
                poll = None  # the same timer as the flush's: let it fire
            if poll is not None or drain is not None:
                timers = ctx.timer_service()
                if poll is not None:
                    timers.delete_processing_time_timer(poll)
                if drain is not None:
                    timers.delete_event_time_timer(drain)
            return
        timers = ctx.timer_service()
        if key not in self._drain_at:  # once per busy period
            timers.register_event_time_timer(DRAIN_TIMESTAMP)
            self._drain_at[key] = DRAIN_TIMESTAMP
        # Flink's processing time is the system clock (System.currentTimeMillis)
        at = time.time_ns() // 1_000_000 + self._poll_delay_ms(key, progressed)
        pending = self._poll_at.get(key)
        if pending is not None:
            if pending <= at:
                return  # an earlier poll is set; it schedules the next one
            timers.delete_processing_time_timer(pending)
        timers.register_processing_time_timer(at)
        self._poll_at[key] = at

    def _arm_flush(self, key: Any, ctx: Any) -> None:
        """Set one processing-time timer (on the current key) to push batched metrics.

        The metrics are counted in Python and pushed to Flink's metric group in batches;
        this timer pushes a last, partial batch of an operator that went idle.
        """
        interval = self.observability.flush_interval_ms
        if interval > 0:
            at = time.time_ns() // 1_000_000 + interval
            ctx.timer_service().register_processing_time_timer(at)
            self._flush_at = (key, at)

    def _poll_delay_ms(self, key: Any, progressed: bool) -> int:
        """When to look at a busy key again, in ms from now.

        At its next call's expected completion; else, or once that has passed, after a
        backoff from 1 ms to ``max_poll_interval_ms``, or to half a millisecond per busy key
        when more keys wait (at most 5 s; see ``_POLL_SPACING_MS``). Process mode only.

        Returns:
            The delay in ms (>= 1).
        """
        core = self.core
        assert core is not None
        if core.has_deliveries(key):
            self._backoff[key] = 1
            return 1
        longest = self.options.max_poll_interval_ms
        spread = min(len(self._poll_at) * _POLL_SPACING_MS, _MAX_POLL_SPREAD_MS)
        if spread > longest:  # many keys waiting: bound the total rate of idle polls
            longest = int(spread)
        backoff = 1 if progressed else min(self._backoff.get(key, 1) * 2, longest)
        self._backoff[key] = backoff
        expected = core.executor.next_completion_s(key)
        if expected is None:
            return backoff
        return max(backoff, min(int(expected * 1000) + 1, _MAX_EXPECTED_WAIT_MS))
