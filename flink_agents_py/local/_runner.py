"""The local runner: ``AgentCore`` hosted in-process, for fast tests and small bounded jobs.

The host loop makes two kinds of callbacks into the core, as the Flink operator does: an
input record for its key (``on_input``) and a wake-up of a key whose I/O completed
(``advance``). Between two callbacks the keyed state is consistent, so a checkpoint could be
taken there: ``LocalAgentJob.snapshot()`` returns that state as plain JSON data (each key's
run, short-term memory and queued inputs, and the source's position), and
``LocalAgentJob.restore(snapshot)`` starts a job from it, with new live objects, as Flink
restores keyed state after a failure.
"""

from __future__ import annotations

import functools
import itertools
import math
import queue
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..api import Agent, AgentAlreadyAppliedError, ExternalEvent
from ..api.internal import already_applied
from ..io import LineResult
from ..plan import AgentPlan
from ..runtime import (
    JSON_KEYS,
    AgentCore,
    ErrorRecord,
    InMemoryKeyState,
    RejectedKey,
    RunState,
    StateFormatError,
    StepResult,
    decode_key,
    dumps_json,
    encode_key,
    loads_json,
    rejected_record,
    warm_up,
)
from ..runtime.internal import (
    UnreadErrors,
    bad_line,
    key_from_json,
    key_json,
    spend_adopter,
    stored_run,
)
from ._clock import AdvanceTime, AfterRecords, VirtualTimers
from ._progress import Progress
from ._records import check_records, check_snapshot

if TYPE_CHECKING:
    from ._environment import LocalExecutionEnvironment

__all__ = ["LocalAgentJob", "LocalRunResult", "SNAPSHOT_FORMAT"]

SNAPSHOT_FORMAT = "flink-agents-py/local-snapshot/1"
"""The ``format`` field of a local runner snapshot."""

_FLINK_AGENTS_NAMES = {
    "to_list": "collect() runs the job and returns its outputs",
    "execute": "apply(agent).collect() (or .run()) runs the job",
}
"""Flink Agents' local-runner names this runner spells otherwise, with what to use here."""


def _no_attribute(owner: object, name: str) -> AttributeError:
    """The ``AttributeError`` for ``name``; for a Flink Agents name, saying what to use.

    Returns:
        The error to raise (a Flink Agents program gets ``flink_agents_py.compat`` named).
    """
    hint = _FLINK_AGENTS_NAMES.get(name)
    text = f"{type(owner).__name__!r} object has no attribute {name!r}"
    if hint is not None:
        text += (f": here {hint}; a Flink Agents program keeps its from_list(...).apply(...)"
                 ".to_list() and execute() when it imports AgentsExecutionEnvironment from "
                 "flink_agents_py.compat")
    return AttributeError(text, name=name, obj=owner)


@dataclass
class LocalRunResult:
    """What a local run produced.

    Attributes:
        outputs: ``OutputEvent.output`` values in emission order (per key, in input order).
            After a ``restore``, only those emitted after the snapshot.
        errors: failed actions and rejected records, with their keys.
        counters: runtime counters (runs, actions, durable calls executed and replayed).
        metrics: the metrics snapshot (``AgentMetrics.snapshot()``; ``{}`` with
            ``metrics=False``): counts by action, model, tool and sub-agent, tokens,
            replayed versus executed calls, and latency summaries in ``latency_ms``.
        completed: ``False`` when the run was stopped early by ``max_steps`` (a simulated
            crash); every record was processed otherwise.
        steps: how many host callbacks the run made (checkpoint opportunities).
        keyed_outputs: ``(key, output)`` pairs, in the order of ``outputs``.
    """

    outputs: list[Any] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    completed: bool = True
    steps: int = 0
    keyed_outputs: list[tuple[Any, Any]] = field(default_factory=list)


class _Stop(Exception):
    """Internal: ``max_steps`` reached."""


def _json_tree(value: Any, what: str) -> Any:
    """``value`` through its JSON bytes, as Flink's keyed state keeps it."""
    try:
        return loads_json(dumps_json(value, sort_keys=False))
    except Exception as e:  # noqa: BLE001 - names what could not be kept
        raise TypeError(f"cannot snapshot {what}: {type(e).__name__}: {e}") from e


class _KeyState(InMemoryKeyState):
    """In-memory key state that counts the inputs it handed out; rebuilt from snapshots.

    The count serves the progress bar and snapshots. Where a queued record was read (a
    ``LineResult``'s line) is kept for its run's error rows (``RunState.source``), in this
    process only: a snapshot does not carry it.
    """

    _sources: dict[int, str] | None = None  # by the seq its record will run as

    def push_input(self, record: Any, source: str | None = None) -> None:
        self._queue.append(record)
        if source is not None:
            if self._sources is None:
                self._sources = {}
            self._sources[self._next_seq + len(self._queue) - self._head - 1] = source

    @property
    def popped_source(self) -> str | None:  # type: ignore[override]
        """Where the record ``pop_input`` last gave (seq ``_next_seq - 1``) was read."""
        sources = self._sources
        return None if sources is None else sources.pop(self._next_seq - 1, None)

    def popped(self) -> int:
        return self._next_seq

    def queue(self) -> list[Any]:
        return self._queue[self._head:]

    def load(self, run: RunState | None, memory: dict[str, Any], queued: list[Any],
             next_seq: int) -> None:
        self.run, self.memory = run, memory
        self._queue, self._head, self._next_seq = list(queued), 0, next_seq


class LocalAgentJob:
    """An agent applied to a bounded list of records; run it with ``collect`` or ``run``."""

    def __init__(self, env: LocalExecutionEnvironment, records: Iterable[Any],
                 key_selector: Callable[[Any], Any],
                 counted: Callable[[Any], bool] | None = None,
                 value_selector: Callable[[Any], Any] | None = None) -> None:
        self._env = env
        self._records = records
        self._key_selector = key_selector
        self._value_selector = value_selector
        self._counted = counted
        self._plan: AgentPlan | None = None
        self._restore_from: dict[str, Any] | None = None
        self._states: dict[Any, _KeyState] | None = None
        self._position = self._steps = 0
        self.result: LocalRunResult | None = None
        self._outside: Iterable[Any] = ()
        self._outside_key: Callable[[Any], Any] = ExternalEvent.key_of
        self._outside_position = 0
        self._interleaved = False
        self._timers = VirtualTimers()
        self._lineage: str | None = None

    def __getattr__(self, name: str) -> Any:
        raise _no_attribute(self, name)

    def connect(self, events: Iterable[Any],
                key_selector: Callable[[Any], Any] | None = None, *,
                interleaved: bool = False) -> LocalAgentJob:
        """Give the agent a second input: outside events its actions wait for.

        Each item is an ``ExternalEvent`` (or its dict: ``key``, ``correlation_id``,
        ``payload``), delivered to the run of its key to complete the action's
        ``await ctx.wait_for(correlation_id)``, or an ``AdvanceTime(seconds)``. The items
        are delivered in order once every input record has been worked off as far as it
        goes (its runs completed or waiting), each after the one before has been; then the
        virtual clock skips to each remaining timer in turn, and at the end every wait still
        open fails with ``WaitTimeoutError`` (all input has ended). An event that arrives
        for no waiter goes to the errors, named.

        With ``interleaved=True`` the items go while the records still flow, placed by
        ``AfterRecords(n)`` items: the items after one go once the first ``n`` records are
        in and worked off as far as they go (the items before the first ``AfterRecords``,
        before the first record). The items are read as they are due, so a generator can
        answer what the outputs hold by then.

        Args:
            events: the outside events (a list, to ``restore`` a snapshot of the job).
            key_selector: an event's key (default: its ``key`` field).
            interleaved: deliver the items between the records, where their
                ``AfterRecords`` place them (default: after all records).

        Returns:
            ``self``.

        Raises:
            UsageError: when ``events`` is one event (or a dict), not a list of them.
        """
        check_records(events, "connect")
        self._outside = events
        self._outside_key = key_selector or ExternalEvent.key_of
        self._interleaved = interleaved
        return self

    def apply(self, agent: Agent | AgentPlan) -> LocalAgentJob:
        """Use ``agent`` (compiled now; ``PlanError`` is raised here). Returns ``self``.

        Raises:
            AgentAlreadyAppliedError: when this job already has an agent (one agent a job, as
                in Apache Flink Agents: a second one would neither read the first's outputs
                nor run beside it; before, it silently replaced the first).
        """  # noqa: DOC201
        if self._plan is not None:
            raise AgentAlreadyAppliedError(already_applied(self._plan.agent, agent, "from_list"))
        self._plan = agent if isinstance(agent, AgentPlan) else AgentPlan.from_agent(agent)
        return self

    def restore(self, snapshot: dict[str, Any]) -> LocalAgentJob:
        """Start the next ``run`` from ``snapshot`` instead of from the beginning.

        As Flink restores a job from a checkpoint: each key's state is rebuilt from its JSON
        form on a new runtime (actions in flight re-enter from their start and replay their
        recorded durable calls), the source skips the records it had delivered, and keys
        with work in flight are woken first. The records must be the same as those of the
        job the snapshot was taken from. Outputs emitted before the snapshot are not emitted
        again.

        Args:
            snapshot: what ``snapshot()`` returned (or its JSON text, parsed).

        Returns:
            ``self``.

        Raises:
            ValueError: when ``snapshot`` is not a local runner snapshot (names what is
                wrong), or its source had delivered more records than the job has.
        """
        check_snapshot(snapshot, SNAPSHOT_FORMAT, self._records)
        self._restore_from = snapshot
        return self

    def snapshot(self) -> dict[str, Any]:
        """The job's state now, as plain JSON data: what a checkpoint would hold.

        Call it from an ``on_step`` hook while the job runs, or after ``run`` returned (e.g.
        stopped early by ``max_steps``, a simulated crash). Each key's in-flight run and
        memory go through their JSON form exactly as the Flink host keeps them in keyed
        state; live objects (coroutines, I/O in flight) are not part of it.

        Returns:
            ``{"format", "lineage" (the job's token, a restore keeps it), "position" (records
            the source delivered), "keys": [{"key", "run", "memory", "queue", "next_seq"}]}``.

        Raises:
            RuntimeError: when the job has not run.
        """
        if self._states is None:
            raise RuntimeError("the job has not run: nothing to snapshot")
        keys = []
        for identity, state in self._states.items():
            if state.run is None and not state.memory and not state.queued() \
                    and not state.popped():
                continue  # never had a record (its sequence numbers must go on otherwise)
            key = decode_key(identity)  # the key's value (restored to the same identity)
            keys.append({
                "key": key_json(key),  # its JSON form: a tuple a list, a UUID tagged
                "run": loads_json(state.run.to_stored()) if state.run is not None else None,
                "memory": _json_tree(state.memory, f"the memory of key {key!r}"),
                "queue": _json_tree(state.queue(), f"the queued inputs of key {key!r}"),
                "next_seq": state.popped(),
            })
        return {"format": SNAPSHOT_FORMAT, "lineage": self._lineage, "position": self._position,
                "keys": keys, "outside_position": self._outside_position,
                "clock_ms": self._timers.now_ms}

    @property
    def steps(self) -> int:
        """Host callbacks made so far by the current (or last) run."""
        return self._steps

    def collect(self) -> list[Any]:
        """Run to completion and return the outputs (errors are in ``self.result.errors``).

        Returns:
            The outputs; each error record, which it does not return, is logged at WARNING.
        """
        result = self.run()
        unread = UnreadErrors("job.result.errors, or run() instead of collect()")
        for error in result.errors:
            unread.add(error)
        return result.outputs

    def run(self, *, on_step: Callable[[LocalAgentJob], None] | None = None,
            max_steps: int | None = None, one_at_a_time: bool = False) -> LocalRunResult:
        """Run every record to completion (or until ``max_steps``).

        Runs of different keys overlap while they wait for I/O; runs of one key go one at a
        time, in input order.

        Args:
            on_step: called with the job after every host callback (an input record handed
                to the core, or a key woken for completed I/O): a point where a checkpoint
                could be taken; it may call ``snapshot()``.
            max_steps: stop after this many host callbacks, as if the process crashed there
                (I/O in flight is abandoned; ``result.completed`` is ``False``).
            one_at_a_time: hand the core the next record only when every run so far has
                ended or parked (no overlap across keys), so outputs come in input order: the
                order Flink Agents' local runner, which runs one record at a time, gives.

        Returns:
            The outputs, errors, counters and metrics of the run.

        A run that stays busy with nothing in flight and nothing delivered (a defect of the
        runtime: nothing can move it on) is given up where the runner would wait for it for
        good: an ``UnfinishedRunError`` in ``result.errors`` names its key, input and what
        its actions wait for, ``result.counters["runs_abandoned"]`` counts it, and the
        key's next input runs, as on Flink.

        Raises:
            RuntimeError: when no agent was applied.
        """
        if self._plan is None:
            raise RuntimeError("call .apply(agent) before running")
        from ..observability import HostObservability

        wake: queue.SimpleQueue[Any] = queue.SimpleQueue()
        opts = self._env.options
        snap = self._restore_from or {}  # lineage: the snapshot's, the options', else new
        self._lineage = snap.get("lineage") or opts.lineage or secrets.token_hex(8)
        obs = HostObservability(metrics=opts.metrics, event_log=opts.event_log,
                                observer=opts.observer, host="local", agent=self._plan.name,
                                apache_event_log=opts.apache_event_log, lineage=self._lineage)
        # keys encoded as Flink's default encoding has them (``1``, ``True``, ``1.0``: three)
        core = AgentCore(self._plan, max_in_flight=opts.max_in_flight, notify=wake.put,
                         journal=opts.journal, failpoint=opts.failpoint, observer=obs.observer,
                         key_value=decode_key, lineage=self._lineage,
                         max_in_flight_per_key=opts.max_in_flight_per_key)
        obs.watch(core.resources)  # live gauges: flow limits, agent budgets left
        timers = self._timers = VirtualTimers()
        core.clock_ms = timers.clock
        if obs.metrics is not None:
            core.gauges = obs.metrics.counters  # the runs_waiting gauge
        self._outside_position = 0
        states: dict[Any, _KeyState] = {}
        self._states, self._position, self._steps = states, 0, 0
        busy: dict[Any, None] = {}  # keys with work left, in the order they got it
        logged: set[tuple[str, str]] = set()  # rejections whose traceback was logged
        result = LocalRunResult()
        self.result = result
        bar = Progress(self._records, self._counted) if self._env.progress else None

        def step(key: Any, res: StepResult) -> None:
            outs = res.outputs
            if outs:
                result.outputs.extend(outs)
                shown = decode_key(key)
                result.keyed_outputs.extend([(shown, o) for o in outs])
            if res.errors:
                result.errors.extend(res.errors)
            if res.timers:
                timers.add(key, res.timers)
            if res.busy:
                busy.setdefault(key)
            else:
                busy.pop(key, None)
            if bar is not None:
                bar.update(key, states[key], result, core.executor.in_flight)
            self._steps += 1
            if on_step is not None:
                on_step(self)
            if max_steps is not None and self._steps >= max_steps:
                raise _Stop

        # where a run that can never finish is given up (``AgentCore.give_up``)
        stuck_at = ["before the local runner's next input"]

        def drain_wakeups(block: bool) -> None:
            try:
                key = wake.get(timeout=1.0) if block else wake.get_nowait()
            except queue.Empty:
                if block and core.executor.pending == 0:  # nothing can wake a stuck key
                    for k in [k for k in busy if core.is_stuck(k)]:
                        step(k, core.give_up(k, states[k], stuck_at[0]))
                return
            step(key, core.advance(key, states[key]))

        def fire(until_ms: int | None) -> None:
            while (due := timers.pop_due(until_ms)) is not None:
                fired = core.on_timers(due[1], timers.now_ms, states[due[1]])
                if fired is not None:
                    step(due[1], fired)
                    while busy:
                        drain_wakeups(block=True)
            if until_ms is not None:
                timers.now_ms = max(timers.now_ms, until_ms)

        outside = enumerate(self._outside)  # read lazily, as items are due
        gate: list[int | None] = [0 if self._interleaved else None]  # records due first

        def deliver(records_in: int | None) -> None:
            """Deliver the outside items due once ``records_in`` records are in (all)."""
            while records_in is None or (gate[0] is not None and gate[0] <= records_in):
                while busy:  # the records in are worked off as far as they go
                    drain_wakeups(block=True)
                nxt = next(outside, None)
                if nxt is None:
                    return
                index, item = nxt
                if isinstance(item, AfterRecords):
                    gate[0] = item.count
                if index < self._outside_position or isinstance(item, AfterRecords):
                    self._outside_position = max(self._outside_position, index + 1)
                    continue  # delivered before the snapshot restored (or a marker)
                self._outside_position = index + 1
                if isinstance(item, AdvanceTime):
                    fire(timers.now_ms + math.ceil(item.seconds * 1000))
                    continue
                key = JSON_KEYS.flink_key(self._outside_key, item)  # its identity
                rejected = JSON_KEYS.rejected(key)
                if rejected is not None:
                    result.errors.append(rejected_record(rejected, item,
                                                         f"outside event {index}", seen=logged))
                    continue
                state = states.get(key)
                if state is None:
                    state = states[key] = _KeyState()
                step(key, core.on_outside_event(key, item, state, f"outside event {index}"))

        key_selector, value_selector = self._key_selector, self._value_selector
        warm_up(self._plan)  # imports a key's first run would otherwise wait for
        core.open()
        try:
            start = self._load(states, busy, bar, lambda key, e: result.errors.append(
                core.unreadable_run(key, e)))
            adopt = spend_adopter(core) if self._restore_from is not None else None
            if adopt is not None:  # agent budgets: the spend every restored key recorded
                for st in states.values():
                    adopt(st.memory)
            core.waiting_changed(sum(1 for st in states.values()
                                     if st.run is not None and st.run.parked))
            for key in list(busy):  # restored keys with work: wake them, as timers would
                step(key, core.advance(key, states[key]))
            for index, record in enumerate(self._records):
                if index < start:
                    continue
                if self._interleaved:
                    deliver(index)
                self._position = index + 1
                source = None
                if type(record) is LineResult:  # from read_json_lines: its line is its place
                    source = f"line {record.line}"
                    if record.error is not None:  # the line could not be read: an error row
                        result.errors.append(bad_line(record, f"record {index}"))
                        if bar is not None:
                            bar.rejected(record)
                        continue
                    record = record.record
                key, value = JSON_KEYS.flink_key(key_selector, record), record
                rejected = JSON_KEYS.rejected(key)
                if value_selector is not None and rejected is None:
                    try:
                        value = value_selector(record)
                    except Exception as e:  # noqa: BLE001 - a bad record is reported
                        rejected = RejectedKey.of(e)
                if rejected is not None:  # reported (and logged), not fatal
                    result.errors.append(rejected_record(rejected, record, f"record {index}",
                                                         source, seen=logged))
                    if bar is not None:
                        bar.rejected(record)
                    continue
                state = states.get(key)
                if state is None:
                    state = states[key] = _KeyState()
                before = state.queued() + state.popped() if bar is not None else 0
                res = core.on_input(key, value, state, f"record {index}", source)
                if bar is not None:
                    if state.queued() + state.popped() > before:
                        bar.queued(key, record)
                    else:
                        bar.rejected(record)
                step(key, res)
                while not wake.empty():
                    drain_wakeups(block=False)
                while one_at_a_time and busy:
                    drain_wakeups(block=True)
            stuck_at[0] = "at the end of input"  # of the records (outside items may follow)
            deliver(None)  # the items left, once all records are worked off
            while busy:
                drain_wakeups(block=True)
            fire(None)  # nothing else can happen: time skips to each timer left
            for key, state in list(states.items()):  # all input has ended
                ended = core.on_timers(key, timers.now_ms, state, end_of_input=True) \
                    if state.run is not None else None
                if ended is not None:
                    step(key, ended)
                    while busy:
                        drain_wakeups(block=True)
        except _Stop:
            result.completed = False
        finally:
            obs.read_gauges()  # their last values, before the resources close
            core.close()
            obs.close()
            if bar is not None:
                bar.close(result)
        result.counters = dict(core.counters)
        result.metrics = obs.snapshot()
        result.steps = self._steps
        return result

    def _load(self, states: dict[Any, _KeyState], busy: dict[Any, None],
              bar: Progress | None,
              unreadable: Callable[[Any, StateFormatError], None]) -> int:
        """Fill ``states`` from the snapshot to restore (if any); returns its position.

        A key whose stored run is damaged is restored without it (``unreadable`` reports
        it); a run of a later format version fails the whole restore.

        Returns:
            The snapshot's position in the records (0 without one).

        Raises:
            StateFormatError: when a run is of a later format version.
        """
        snap = self._restore_from
        if snap is None:
            return 0
        for entry in snap["keys"]:
            key = encode_key(key_from_json(entry["key"]))  # its identity (see ``run``)
            state = states[key] = _KeyState()
            # a damaged run: that key's alone is dropped, its queue and memory are kept
            run = stored_run(entry["run"], functools.partial(unreadable, key))
            state.load(run, dict(entry["memory"]), list(entry["queue"]), int(entry["next_seq"]))
            if (run is not None and not run.parked) or state.queued():
                busy.setdefault(key)
            self._timers.add_run(key, run)
            if bar is not None:
                bar.flags[key] = [True] * state.popped() + [bar.counted(r) for r in entry["queue"]]
                bar.seen[key] = state.popped() - (1 if run is not None else 0)
        self._position = int(snap.get("position", 0))
        self._outside_position = int(snap.get("outside_position", 0))
        self._timers.now_ms = int(snap.get("clock_ms", 0))
        if bar is not None:  # records the source delivered, less those still to finish
            delivered = itertools.islice(iter(self._records), self._position)
            bar.done = sum(1 for r in delivered if bar.counted(r)) - sum(
                sum(flags[bar.seen[k]:]) for k, flags in bar.flags.items())
            bar.bar.update(bar.done - bar.bar.n)
        return self._position
