"""``KeySwitching``: the operator's wake-ups in thread mode, per completion and per key group.

In thread mode the Python function's keyed state and timer service are Java objects that act
on the keyed state backend's current key, so a callback may switch that key to another key
of its subtask, work on it as in a callback of its own, and switch back. The operator uses
this in three ways:

- **The pump**: the I/O executor names each key whose call completed (``ready``); every
  callback ends by advancing each of them under its own key. One processing-time timer (on
  whichever key is current) keeps the pump going while calls are in flight, set for when the
  executor expects the next call of any key to complete. So wake-ups cost per completion, not
  per waiting key, and a key waiting on a slow call costs nothing while it waits.
- **The restore sweep**: the first callback after ``open`` lists the keys that have a run in
  keyed state (``KeyedStateBackend.getKeys``), i.e. the runs a checkpoint or savepoint left
  in flight, and advances each one, which rebuilds its actions and resumes them (recorded
  calls are replayed, the others issued again). Before that, when a chat model setup has an
  agent budget, it reads every key's short-term memory once, so the subtask's spend starts
  from what its keys recorded (``runtime.internal.spend_adopter``).
- **Timers per key group, not per key**: Flink moves keyed state and timers between subtasks
  by key group. While a key group has busy keys it keeps one processing-time timer (on the
  first key that became busy in it, re-set every ``GROUP_POLL_MS`` while the group stays
  busy), and it gets one event-time timer at the drain timestamp (registered once per key
  group per operator). After a restore at any parallelism, every subtask holding busy keys
  therefore gets a callback, which sweeps; at the end of bounded input the drain timer makes
  one callback pump every busy key of the subtask until none is left. A key that becomes
  busy costs two calls into Java (its backend key and its key group) instead of four timer
  registrations and deletions.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..runtime import PARKED_SUFFIX, loads_json
from ..runtime.internal import spend_adopter
from ._key_state import _FlinkKeyState

if TYPE_CHECKING:
    from ._operator import AgentOperator

__all__ = ["KeySwitching", "DRAIN_TIMESTAMP", "GROUP_POLL_MS", "RUN_STATE"]

log = logging.getLogger(__name__)

def note_final_drain(agent: str, runs: int, key: Any) -> None:
    """Log, once per subtask, that bounded input ended with runs in flight.

    They finish inside Flink's handling of the final watermark, where no checkpoint or
    savepoint completes: the line tells a deployer whose ``flink stop --savepointPath`` waits
    (and whose CLI then times out) why, and what to do instead.

    Args:
        agent: the agent's name.
        runs: how many keys have a run in flight.
        key: one of them.
    """
    log.info(
        "agent %r: the input ended with %d key(s) having runs in flight (%r among them): they "
        "finish inside Flink's final watermark, and no checkpoint or savepoint completes "
        "until they do (a 'flink stop --savepointPath' waits for them, its CLI times out, "
        "and a second one is declined with 'tasks not ready' and fails the job over); to "
        "stop and upgrade a job with savepoints, read unbounded input (Kafka, a FileSource "
        "with monitor_continuously); see "
        "docs/how-to/limits.md#checkpoints-until-the-end-of-a-bounded-job", agent, runs, key)


DRAIN_TIMESTAMP = 2**63 - 2**40
"""The event-time timer that fires at the end of bounded input (the final watermark).

Far beyond any real watermark (about year 35,000), and far enough below ``Long.MAX_VALUE``
that a drain can take a new, later timestamp for each of its rounds (process mode)."""

RUN_STATE = "agent-run"
"""The name of the keyed state holding a key's run in flight (swept after a restore)."""
MEMORY_STATE = "agent-memory"
"""The name of the keyed state holding a key's short-term memory."""

GROUP_POLL_MS = 2_000
"""How often a key group with busy keys gets a timer callback of its own, in ms: what wakes a
subtask after a restore (the sweep), and a fallback for the pump."""

KNOWN_KEYS = 10_000
"""How many keys' backend keys and key groups an operator keeps after they went idle."""

_FALLBACK_WAIT_MS = 1_000
"""While no pump timer can be earlier, one is not set again unless this much overdue (a
pump timer far overdue was dropped at the end of input), in ms."""

_MAX_EXPECTED_WAIT_MS = 10_000
"""The longest a pump (or, in process mode, a key's poll) is put off on the executor's
estimate alone, in ms."""


def _field(jkey: Any) -> Any:
    """A key as the backend lists it, ``Row(key)``: the key in its Flink form."""
    return jkey.getField(0) if hasattr(jkey, "getField") else jkey


def _parked(op: AgentOperator) -> bool:
    """Whether the current key's run in keyed state is parked (its text's end says so)."""
    raw = op._run_state.value()
    return bool(raw) and raw.endswith(PARKED_SUFFIX)


def _void_namespace() -> Any:
    """Flink's ``VoidNamespace.INSTANCE`` (the namespace of a Python function's keyed state).

    Returns:
        The Java object, or ``None`` outside a thread-mode TaskManager (no ``pemja``).
    """
    try:
        from pemja import findClass  # type: ignore[import-untyped, import-not-found, unused-ignore]
    except ImportError:
        return None
    return findClass("org.apache.flink.runtime.state.VoidNamespace").INSTANCE


class KeySwitching:
    """The wake-ups of one thread-mode operator (see the module docstring).

    Args:
        op: the operator (its ``core``, ``options``, ``stats``, ``_key`` and ``_emit``).
        backend: Flink's keyed state backend (a Java object with ``getCurrentKey``,
            ``setCurrentKey``, ``getCurrentKeyGroupIndex`` and ``getKeys``).

    Attributes:
        ready: keys whose I/O completed (appended by the executor's thread).
        jkeys: busy keys of this operator: key -> (its backend key, its key group).
    """

    def __init__(self, op: AgentOperator, backend: Any) -> None:
        self.op = op
        self.backend = backend
        self.ready: collections.deque[Any] = collections.deque()
        self.jkeys: dict[Any, tuple[Any, int]] = {}
        self._known: collections.OrderedDict[Any, tuple[Any, int]] = collections.OrderedDict()
        self.swept = False
        self._pump_at: int | None = None  # the earliest pending pump timer
        self._pump_backoff = 1
        self._group_busy: dict[int, int] = {}  # key group -> busy keys in it
        self._group_timer: dict[int, tuple[Any, int]] = {}  # key group -> (key, time)
        self._timer_group: dict[tuple[Any, int], int] = {}  # the same, reversed
        self._group_drain: set[int] = set()  # key groups with a drain timer from here

    # -- busy and idle keys ----------------------------------------------------------------
    def busy(self, key: Any, ctx: Any) -> None:
        """``key`` (current) is busy: remember its backend key; its key group gets timers.

        The backend key and key group of the last ``KNOWN_KEYS`` keys that were busy here
        are kept (a key's group never changes within an operator): a key busy again costs
        no call into Java.
        """
        if key in self.jkeys:
            return
        known = self._known
        entry = known.pop(key, None)
        if entry is None:
            backend = self.backend
            entry = (backend.getCurrentKey(), int(backend.getCurrentKeyGroupIndex()))
            if len(known) >= KNOWN_KEYS:
                known.popitem(last=False)  # the key busy longest ago
        known[key] = entry
        self.jkeys[key] = entry
        group = entry[1]
        busy = self._group_busy.get(group, 0)
        self._group_busy[group] = busy + 1
        if group not in self._group_timer:
            self._set_group_timer(group, key, ctx)
        if group not in self._group_drain:
            ctx.timer_service().register_event_time_timer(DRAIN_TIMESTAMP)
            self._group_drain.add(group)

    def idle(self, key: Any) -> None:
        """``key`` has no run in flight and nothing queued any more."""
        entry = self.jkeys.pop(key, None)
        if entry is None:
            return
        group = entry[1]
        left = self._group_busy[group] - 1
        if left:
            self._group_busy[group] = left
        else:
            del self._group_busy[group]

    def _set_group_timer(self, group: int, key: Any, ctx: Any) -> None:
        at = time.time_ns() // 1_000_000 + GROUP_POLL_MS
        ctx.timer_service().register_processing_time_timer(at)
        self._group_timer[group] = (key, at)
        self._timer_group[(key, at)] = group

    def on_processing_timer(self, key: Any, timestamp: int, ctx: Any) -> None:
        """A processing-time timer of ``key`` fired (the pump follows every callback).

        A key group's own timer is set again while the group has busy keys.
        """
        group = self._timer_group.pop((key, timestamp), None)
        if group is None:
            if self._pump_at is not None and timestamp >= self._pump_at:
                self._pump_at = None  # the earliest pump timer fired (this one or before)
                self.op.stats["pump_timers"] += 1
            return
        self.op.stats["group_timers"] += 1
        if self._group_timer.get(group) == (key, timestamp):
            del self._group_timer[group]
            if self._group_busy.get(group):
                self._set_group_timer(group, key, ctx)  # ``key`` is of that group

    # -- the restore sweep ------------------------------------------------------------------
    def sweep(self, ctx: Any) -> Iterator[Any]:
        """Once per operator, at its first callback: resume the runs keyed state holds.

        Yields:
            The outputs, and ``(ERROR_TAG, error)`` pairs, of the keys advanced.
        """
        self.swept = True
        self._adopt_spend()  # before any call goes out
        try:  # the backend's keys are ``Row(key)``, the key in its Flink type (a pickle...)
            stream = self.backend.getKeys(RUN_STATE, _void_namespace())
            try:
                found = stream.iterator()
                jkeys = []
                while found.hasNext():  # listed first: advancing writes state
                    jkeys.append(found.next())
            finally:
                stream.close()  # RocksDB: releases its native iterator
        except Exception:  # noqa: BLE001 - e.g. a state backend without getKeys
            log.error("could not list the keys with runs in flight in keyed state (state "
                      "backend %s): a run restored from a checkpoint resumes only when its key "
                      "gets another input; use the hashmap or rocksdb state backend",
                      type(self.backend).__name__, exc_info=True)
            return
        convert = ctx._key_converter.to_internal  # as PyFlink's contexts convert their key
        stored = [_field(j) for j in jkeys]
        if not self.op.keys.stable:  # pickled keys: pickled as this job pickles them?
            sample = stored[0] if stored else self._first_key(MEMORY_STATE)
            if sample is not None:
                self.op.keys.check_restored(sample, convert(sample))
        if not jkeys:
            return
        todo = [(convert(s), j) for s, j in zip(stored, jkeys, strict=True)]
        log.info("resuming %d runs in flight from keyed state", len(todo))
        self.op.stats["swept"] += len(todo)
        yield from self._advance_each(todo, ctx, restored=True)

    def _adopt_spend(self) -> None:
        """Agent budgets: start from the subtask spend the restored keys recorded.

        When keyed state holds short-term memory (a restore) and a setup has an agent
        budget, each key's memory is read once (``spend_adopter``); otherwise nothing is
        read or built. A failure is logged: the budget then adopts a key's spend when that
        key calls again, as in process mode.
        """
        core = self.op.core
        assert core is not None
        backend, memory = self.backend, self.op._memory_state
        own = backend.getCurrentKey()
        keys = adopted = 0
        try:
            stream = backend.getKeys(MEMORY_STATE, _void_namespace())
            try:
                found = stream.iterator()
                adopt = spend_adopter(core) if found.hasNext() else None
                while adopt is not None and found.hasNext():
                    backend.setCurrentKey(found.next())
                    raw = memory.value()
                    if raw:
                        keys += 1
                        adopted += adopt(loads_json(raw))
            finally:
                stream.close()
        except Exception:  # noqa: BLE001 - e.g. a state backend without getKeys
            log.warning("agent budgets: could not read the spend the restored keys recorded; "
                        "a key's spend counts when it calls again", exc_info=True)
        finally:
            backend.setCurrentKey(own)
        if adopted:
            log.info("agent budgets: adopted the spend %d entries of %d restored keys recorded",
                     adopted, keys)

    def _first_key(self, state: str) -> Any:
        """The first key (as stored) with a value in keyed state ``state``, or ``None``."""
        try:
            stream = self.backend.getKeys(state, _void_namespace())
        except Exception:  # noqa: BLE001 - listed already for the runs: not expected here
            return None
        try:
            found = stream.iterator()
            return _field(found.next()) if found.hasNext() else None
        finally:
            stream.close()

    # -- the pump ---------------------------------------------------------------------------
    def pump(self, ctx: Any) -> Iterator[Any]:
        """Advance every key whose I/O completed, each under its own key, in this callback.

        Yields:
            The outputs, and ``(ERROR_TAG, error)`` pairs.
        """
        ready, core = self.ready, self.op.core
        assert core is not None
        todo = []
        while ready:  # (whether deliveries wait: ``_advance_each`` asks, once a key)
            key = ready.popleft()
            entry = self.jkeys.get(key)
            if entry is not None:
                todo.append((key, entry[0]))
        if todo:
            yield from self._advance_each(todo, ctx, restored=False)

    def _advance_each(self, todo: list[tuple[Any, Any]], ctx: Any,
                      restored: bool, give_up: bool = False) -> Iterator[Any]:
        """Advance each key of ``todo`` under its own key, then make the callback's own current.

        ``give_up``: end each key's run instead (``AgentCore.give_up``), one that is parked
        excepted (it is not busy).

        Yields:
            The outputs, and ``(ERROR_TAG, error)`` pairs.
        """
        op, backend = self.op, self.backend
        core = op.core
        assert core is not None
        own = op._key
        own_jkey: Any = None  # set once switched away from the callback's own key
        current = own
        done: set[Any] = set()
        try:
            for key, jkey in todo:
                if key in done or (not restored and not core.has_deliveries(key)):
                    continue  # a duplicate, or advanced already
                done.add(key)
                if key != current:
                    if own_jkey is None:
                        known = self._known.get(own)
                        own_jkey = known[0] if known is not None else backend.getCurrentKey()
                    backend.setCurrentKey(jkey)
                    current = key
                op._key = key
                if give_up:
                    if _parked(op):  # not busy: its waits time out at the end of input
                        self.idle(key)
                        continue
                    op.stats["runs_abandoned"] += 1
                    res = core.give_up(key, _FlinkKeyState(op, op._runs))
                    yield from op._emit(res)
                    op._schedule(key, res, ctx, progressed=True)
                    continue
                if restored and _parked(op):
                    core.waiting_changed(1)  # the runs_waiting gauge counts it
                    continue  # waits in keyed state for its event or timer (``_second_input``)
                op.stats["pumped"] += 1
                res = core.advance(key, _FlinkKeyState(op, op._runs))
                if res.outputs or res.errors:  # (else ``_emit`` has nothing to give)
                    yield from op._emit(res)
                if res.busy or res.timers or res.parked or res.ended_timers is not None:
                    op._schedule(key, res, ctx, progressed=True)
                else:  # ``_schedule``'s thread-mode idle case, inline
                    self.idle(key)
        finally:
            if current != own:
                backend.setCurrentKey(own_jkey)
            op._key = own

    def arm_pump(self, ctx: Any) -> None:
        """Keep one processing-time timer (on the current key) while calls are in flight.

        Set for when the executor expects the next call of any key to complete (1 ms when
        completions wait already); while pumps find nothing, backing off to
        ``max_poll_interval_ms``.
        """
        core = self.op.core
        assert core is not None
        executor = core.executor
        if not executor.pending and not self.ready:
            return
        now = time.time_ns() // 1_000_000
        pending = self._pump_at
        if pending is not None and now - _FALLBACK_WAIT_MS < pending <= now + 1:
            return  # none can be set earlier
        if self.ready:
            delay = 1
        else:
            eta = executor.next_completion_any_s()
            delay = (min(int(eta * 1000) + 1, _MAX_EXPECTED_WAIT_MS) if eta
                     else self._pump_backoff)
        at = now + delay
        # a pump timer far overdue was dropped (the end of input): set another
        if pending is not None and pending <= at and pending > now - _FALLBACK_WAIT_MS:
            return
        ctx.timer_service().register_processing_time_timer(at)
        self._pump_at = at

    def after_timer(self, ctx: Any) -> Iterator[Any]:
        """What ends every timer callback: the pump, then its next timer."""
        found = bool(self.ready)
        yield from self.pump(ctx)
        self._pump_backoff = 1 if found else min(self._pump_backoff * 2,
                                                 self.op.options.max_poll_interval_ms)
        self.arm_pump(ctx)

    # -- the end of bounded input -----------------------------------------------------------
    def drain(self, ctx: Any) -> Iterator[Any]:
        """At the final watermark: pump until no key of this operator is busy.

        Blocks while nothing has completed (at most ``drain_poll_s`` per wait). Once no call
        is in flight, each busy key is advanced once more; the run of a key that stays busy
        then, with nothing delivered, can never finish (``AgentCore.is_stuck``): it is given
        up (``AgentCore.give_up``: an ``UnfinishedRunError`` record on the error output, the
        run cleared from keyed state, counted in ``stats["runs_abandoned"]``) and the key's
        next queued input runs, so the drain ends and no run is lost silently.

        Yields:
            The outputs, and ``(ERROR_TAG, error)`` pairs.
        """
        op = self.op
        core = op.core
        assert core is not None
        op.stats["drain_rounds"] += 1
        if op.stats["drain_rounds"] == 1 and self.jkeys:
            note_final_drain(op.plan.name, len(self.jkeys), next(iter(self.jkeys)))
        while True:
            yield from self.pump(ctx)
            if not self.jkeys:
                return
            if self.ready:
                continue
            if core.executor.pending:
                core.wait_any(op.options.drain_poll_s)  # until a call completes
                continue
            busy = [(key, entry[0]) for key, entry in self.jkeys.items()]
            yield from self._advance_each(busy, ctx, restored=True)
            if not self.jkeys or core.executor.pending or self.ready:
                continue
            busy = [(key, entry[0]) for key, entry in self.jkeys.items()]
            # nothing in flight: a key still busy is stuck (or, not expected, holds
            # deliveries its advance did not take: stuck as well, all are given up then)
            stuck = [(key, jkey) for key, jkey in busy if core.is_stuck(key)]
            yield from self._advance_each(stuck or busy, ctx, restored=True, give_up=True)
