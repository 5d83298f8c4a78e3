"""The core side of waits: open them, park runs that only wait, deliver events and timeouts.

``WaitsCore`` is a base of ``AgentCore``; hosts call three of its methods:

- a wait opens when the core carries out its ``StartWait`` command (``_start_wait``): it is
  recorded in ``RunState.waits`` with its deadline (the host's clock, ``clock_ms``, plus the
  timeout), the deadline goes to the host in ``StepResult.timers``, and an announcement (an
  ``ApprovalRequest``) to the outputs, once;
- after each ``advance``, a run whose every action in flight waits for an outside event or a
  timer, with no call running, is **parked** (``_park``): it is not busy, its live actions are
  dropped, and the host keeps nothing of it in memory beyond keyed state;
- ``on_outside_event`` completes the wait an ``ExternalEvent`` is for (or reports it as
  unmatched, named), ``on_timers`` the waits whose deadline has passed (a sleep ends, a wait
  fails with ``WaitTimeoutError``), or every open wait at the end of all input. The outcome
  is recorded as the waiting call's, in keyed state, then the key advances: a parked run's
  actions re-enter from their start and replay their recorded calls up to the wait, which
  now returns.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...api import (
    ExternalEvent,
    ExternalEventError,
    SerializationError,
    UnmatchedEventError,
    WaitTimeoutError,
)
from ...api.internal import key_from_json, key_json, shown_key
from .._serde import to_json_value
from .._unread import logged
from ..recorder._ledger import CallLedger
from ..recorder._outcomes import store_outcome
from ..recorder._state import CallKind, CallRecord, KeyState, RunState, WaitRecord
from ..recorder._wait_calls import SLEEP_PREFIX, approval_for_another_key
from ._commands import StartWait
from ._inbox import Inbox
from ._invocation_end import check_invocation
from ._results import ErrorRecord, StepResult, shown_input
from ._subgraph import cancel_left_behind, stop_cancelled_polls, under_cancelled
from ._tasks import Delivery, Step, Task

if TYPE_CHECKING:
    from ..recorder._execution import ActionExecution

__all__ = ["WaitsCore", "wall_clock_ms", "END_OF_INPUT", "EARLY_HOLD_S", "EARLY_MAX"]

EARLY_HOLD_S = 600
"""How long an outside event that arrived before its wait opened is held for it, in seconds."""

EARLY_MAX = 16
"""How many such early events a run holds at most (one more is refused at once)."""

END_OF_INPUT = "end of input"
"""What the message of a wait failed because all input ended says."""


def wall_clock_ms() -> int:
    """The wall clock in milliseconds (Flink's processing time is the same clock).

    Returns:
        Milliseconds since the epoch.
    """
    return time.time_ns() // 1_000_000


class WaitsCore:
    """The waits of ``AgentCore`` (see the module docstring).

    Attributes:
        clock_ms: the host's clock, in milliseconds (the core reads no clock of its own):
            the wall clock by default; the local runner sets a virtual one.
    """

    clock_ms = staticmethod(wall_clock_ms)
    gauges: dict[str, int] | None = None
    """A host's metrics counters (``AgentMetrics.counters``), where the core keeps the
    ``runs_waiting`` gauge too (as in ``counters``); ``None``: only in ``counters``."""
    counters: Any  # the core's counters (a ``collections.Counter``)
    _live: dict[Any, dict[str, Task]]
    _key_value: Callable[[Any], Any]  # a key's value from the host's key (``KeyEncoding``)
    _inbox: Inbox
    _cancelled: list[str]  # sub-agent calls cancelled in the current step, to check
    _warned_sites: set[str]  # the lines warned about once (a call never awaited...)
    ledger: CallLedger

    if TYPE_CHECKING:
        def advance(self, key: Any, state: KeyState) -> StepResult: ...

        def _read_run(self, key: Any, state: KeyState) -> ErrorRecord | None: ...

    # -- host interface ------------------------------------------------------------------
    def on_outside_event(self, key: Any, record: Any, state: KeyState,
                         where: str = "") -> StepResult:
        """Deliver an outside event of ``key`` to the wait it is for, and advance the key.

        An event that is not an ``ExternalEvent`` (or whose payload has no JSON form: the
        wait goes on waiting), or arrives for no open wait (no run in
        flight, an unknown correlation id, a duplicate, a late one), becomes an
        ``ErrorRecord`` (action ``"<outside>"``, execution id ``where``) naming why.

        Args:
            key: the key it was routed by.
            record: an ``ExternalEvent`` or its dict.
            state: the key's state.
            where: names the record in errors (``"outside event 3"``).

        Returns:
            What the key's advance produced.
        """
        unreadable = self._read_run(key, state)  # damaged stored run: reported, dropped
        if unreadable is not None:
            res = self.on_outside_event(key, record, state, where)
            res.errors.insert(0, unreadable)
            return res
        where = where or "outside event"
        try:
            event = ExternalEvent.of(record, where)
            to_json_value(event.payload, f"the payload of {where}")
        except (ExternalEventError, SerializationError) as e:  # the wait goes on waiting
            return self._refuse(key, state, ExternalEventError(str(e)), record, where)
        run = state.run
        cid = event.correlation_id
        if approval_for_another_key(cid, self._key_value(key)):  # never this key's: not held
            shown = shown_key(self._key_value(key))
            return self._refuse(key, state, UnmatchedEventError(
                f"outside event with correlation id {shown_key(cid)} arrived for no waiter: it "
                f"answers an approval requested for another key than {shown}: send the answer with "
                "the key of its request (ApprovalRequest.key; approve() and reject() do)"),
                event.model_dump(mode="json"), where)
        wait = run.waits.get(cid) if run is not None else None
        if run is not None and cid.startswith("#"):  # the runtime's own: never an event's
            wait = WaitRecord(call_id="", caller="", ordinal=-1, status="reserved")
        if run is not None and wait is None \
                and sum(w.status == "early" for w in run.waits.values()) < EARLY_MAX:
            return self._hold_early(key, state, run, cid, event.payload, where)
        if run is not None and wait is not None and wait.status == "open" \
                and wait.deadline_ms is not None \
                and wait.deadline_ms <= self.clock_ms():
            # its deadline passed before it came (the job was down, or its timer is late):
            # the wait times out first, whichever the host happens to process first
            self._fire_due(key, run, [(cid, wait)], self.clock_ms())
        if run is None or wait is None or wait.status != "open":
            shown = self._key_value(key)
            why = (f"no run of key {shown_key(shown)} is in flight{_typed_key_hint(shown)} "
                   f"({_NO_RUN})" if run is None
                   else f"the run of key {shown_key(shown)} (input {run.seq}) has no wait for "
                        f"it, and holds {EARLY_MAX} early events already (an unknown "
                        "correlation id, or one whose wait has not opened yet)"
                   if wait is None
                   else f"a duplicate: the wait of call {wait.call_id} got its event already"
                   if wait.status == "delivered"
                   else "a duplicate: an event with that id is held for its wait already"
                   if wait.status == "early"
                   else "a reserved correlation id (starting with '#')"
                   if wait.status == "reserved"
                   else f"the wait of call {wait.call_id} ended without it: the sub-agent "
                        "call it waited in was cancelled"
                   if wait.status == "cancelled"
                   else f"late: the wait of call {wait.call_id} timed out")
            error = UnmatchedEventError(f"outside event with correlation id {shown_key(cid)} "
                                        f"arrived for no waiter: {why}")
            return self._refuse(key, state, error, event.model_dump(mode="json"), where)
        problem = _approval_problem(run, wait, event.payload)
        if problem is not None:  # the wait goes on waiting for an answer it can read
            return self._refuse(key, state, ExternalEventError(
                f"{where}: the answer to approval {cid!r} {problem}"), record, where)
        wait.status = "delivered"
        self._complete_wait(key, run, wait, True, event.payload)
        return self.advance(key, state)

    def on_timers(self, key: Any, now_ms: int, state: KeyState,
                  end_of_input: bool = False) -> StepResult | None:
        """Fire the waits of ``key`` due at ``now_ms``, then advance the key.

        A sleep ends; a ``wait_for`` or a held tool call fails with ``WaitTimeoutError``.
        With ``end_of_input`` every open wait is due (nothing can arrive any more).

        Args:
            key: the key whose timer fired.
            now_ms: the host's clock, in milliseconds.
            state: the key's state.
            end_of_input: all input has ended.

        Returns:
            What the key's advance produced; ``None`` when no wait of the key was due
            (nothing was done).
        """
        unreadable = self._read_run(key, state)  # damaged stored run: reported, dropped
        if unreadable is not None:
            res = self.advance(key, state)
            res.errors.insert(0, unreadable)
            return res
        run = state.run
        if run is None or not run.waits:
            return None
        # at the end of input an early event is given up only when no wait can open for it
        # any more: a run still working, or a record of the key queued behind it, may claim
        # it (it has arrived; their waits open later and take it, within its hold time: the
        # end-of-input timer's timestamp is no clock to measure that by)
        given_up = [] if end_of_input and (not run.parked or state.queued() > 0) \
            else self._give_up_early(key, run, now_ms, end_of_input)
        due = [(cid, w) for cid, w in run.waits.items() if w.status == "open" and (
            end_of_input or (w.deadline_ms is not None and w.deadline_ms <= now_ms))]
        if not due:
            if not given_up:
                return None
            res = StepResult(parked=True) if run.parked else self.advance(key, state)
            if run.parked:
                state.flush()
            res.errors.extend(given_up)
            return res
        self._fire_due(key, run, due, now_ms, end_of_input)
        res = self.advance(key, state)
        res.errors[:0] = given_up
        return res

    def _fire_due(self, key: Any, run: RunState, due: list[tuple[str, WaitRecord]],
                  now_ms: int, end_of_input: bool = False) -> None:
        """End the ``due`` waits: a sleep is over, a wait fails with ``WaitTimeoutError``."""
        for cid, wait in due:
            if cid.startswith(SLEEP_PREFIX):
                wait.status = "delivered"
                self._complete_wait(key, run, wait, True, None)
                continue
            wait.status = "timed_out"
            # at the end of input the host's clock may say any time (Flink's end-of-input
            # timer is far past every deadline): the wait ended because nothing can arrive
            why = (f"within {wait.timeout_s:g} s" if not end_of_input
                   and wait.deadline_ms is not None and wait.deadline_ms <= now_ms
                   and wait.timeout_s is not None else f"before the {END_OF_INPUT}")
            self._complete_wait(key, run, wait, False, WaitTimeoutError(
                f"no outside event with correlation id {cid!r} arrived for key "
                f"{self._key_value(key)!r} {why}",
                cid, wait.timeout_s))

    def waiting_changed(self, delta: int) -> None:
        """Move the ``runs_waiting`` gauge: parked runs (``RunState.parked``) in this process.

        The core moves it as runs park and wake; a host adds the parked runs it restored
        (the gauge never goes below 0: a restored run the host did not count may wake).

        Args:
            delta: how many runs more (less) wait.
        """
        counters = self.counters
        counters["runs_waiting"] = max(0, counters["runs_waiting"] + delta)
        if self.gauges is not None:
            self.gauges["runs_waiting"] = counters["runs_waiting"]

    # -- internals -----------------------------------------------------------------------
    def _refuse(self, key: Any, state: KeyState, error: Exception, record: Any,
                where: str) -> StepResult:
        run = state.run
        # a parked run stays parked: nothing of it is loaded for an event it does not take
        res = StepResult(parked=True) if run is not None and run.parked \
            else self.advance(key, state)
        res.errors.append(logged(ErrorRecord(
            key=self._key_value(key), seq=run.seq if run is not None else -1,
            action="<outside>",
            execution_id=where, error_type=type(error).__name__, message=str(error),
            input=record if isinstance(record, dict) else shown_input(record))))
        return res

    def _hold_early(self, key: Any, state: KeyState, run: RunState, cid: str, payload: Any,
                    where: str) -> StepResult:
        """Hold an event whose wait has not opened (yet) in the run's waits, as ``"early"``.

        It is given up (an ``UnmatchedEventError``) ``EARLY_HOLD_S`` later, or when the run
        ends, if no wait claimed it by then.

        Returns:
            What the key's advance produced, with the timer that gives the event up.
        """
        deadline = self.clock_ms() + EARLY_HOLD_S * 1000
        run.waits[cid] = WaitRecord(call_id="", caller=where, ordinal=-1, deadline_ms=deadline,
                                    status="early", payload=payload)
        if run.parked:  # stays parked: nothing of it is loaded for an event it holds
            res = StepResult(parked=True)
            state.flush()
        else:
            res = self.advance(key, state)
        res.timers = [*(res.timers or ()), deadline]
        return res

    def _early_error(self, key: Any, run: RunState, cid: str, wait: WaitRecord,
                     why: str) -> ErrorRecord:
        error = UnmatchedEventError(
            f"outside event with correlation id {shown_key(cid)} arrived for no waiter: the run "
            f"of key {shown_key(self._key_value(key))} (input {run.seq}) has no wait for it: it "
            f"was held for its wait to open, and {why}{_waited_for(run)}")
        return logged(ErrorRecord(
            key=self._key_value(key), seq=run.seq, action="<outside>",
            execution_id=wait.caller or "outside event", error_type=type(error).__name__,
            message=str(error), input={"key": key_json(self._key_value(key)),
                                       "correlation_id": cid, "payload": wait.payload}))

    def _give_up_early(self, key: Any, run: RunState, now_ms: int | None,
                       end_of_input: bool = False) -> list[ErrorRecord]:
        """Drop the run's early events held past their time (all, for ``None``: run ended).

        With ``end_of_input`` all of them go: the caller passes it only when no wait opens
        for them any more (the run is parked and no record of its key is queued).

        Returns:
            An ``UnmatchedEventError`` record naming each.
        """
        gone = [(cid, w) for cid, w in run.waits.items() if w.status == "early" and (
            now_ms is None or end_of_input
            or (w.deadline_ms is not None and w.deadline_ms <= now_ms))]
        why = ("the run ended without waiting for it" if now_ms is None
               else f"the {END_OF_INPUT} came before its wait opened" if end_of_input
               else f"none opened within {EARLY_HOLD_S} s")
        errors = []
        for cid, wait in gone:
            del run.waits[cid]
            errors.append(self._early_error(key, run, cid, wait, why))
        return errors

    def _run_ended(self, key: Any, run: RunState, res: StepResult,
                   next_queued: bool) -> dict[str, WaitRecord] | None:
        """The core's hook when a run completes: the early events no wait of it claimed.

        They go on to the key's next run when a record of the key is queued (its wait may
        claim them), within their hold time; otherwise they are errors.

        Returns:
            The early events the next run holds, or ``None``.
        """
        if not run.waits:
            return None
        carried = ({cid: w for cid, w in run.waits.items() if w.status == "early"} or None
                   if next_queued else None)
        kept = {w.deadline_ms for w in (carried or {}).values()}
        ended = res.ended_timers if res.ended_timers is not None else []
        ended.extend(w.deadline_ms for cid, w in run.waits.items()
                     if w.deadline_ms is not None and w.status not in ("timed_out", "polling")
                     and w.deadline_ms not in kept)  # (a timer is its key's and time's)
        res.ended_timers = ended  # the host deletes them: they would fire for nothing
        if not next_queued:
            res.errors.extend(self._give_up_early(key, run, None))
        return carried

    def _start_wait(self, step: Step, ctx: ActionExecution, command: StartWait) -> None:
        """Open the wait ``command`` describes (see the module docstring)."""
        run, call = step.run, command.call
        cid = command.correlation_id
        held = run.waits.get(cid)
        if held is not None and held.status == "early":
            problem = _answer_problem(command.call.kind, held.payload)
            error = (self._unread_answer(step, cid, held, problem) if problem is not None
                     else self._early_error(step.identity, run, cid, held,
                                            f"none opened within {EARLY_HOLD_S} s")
                     if held.deadline_ms is not None and held.deadline_ms <= self.clock_ms()
                     else None)  # (given up as its timer would have: the timer is late)
            if error is not None:  # refused as after the wait opened, or given up
                step.res.errors.append(error)
                del run.waits[cid]
                held = None
        if held is not None and held.status == "early":  # it came before: claimed now
            ctx.record_started(command)
            run.waits[command.correlation_id] = WaitRecord(
                call_id=call.call_id, caller=ctx.execution_id, ordinal=call.ordinal,
                timeout_s=command.timeout_s, status="delivered")
            if command.announce is not None:
                step.res.outputs.append(command.announce)
            ctx.record_outcome(call, True, held.payload)
            return
        if held is not None:
            return  # open already: re-entered (its deadline and announcement stand)
        ctx.record_started(command)
        timeout = command.timeout_s
        deadline = None if timeout is None else self.clock_ms() + math.ceil(timeout * 1000)
        run.waits[command.correlation_id] = WaitRecord(
            call_id=call.call_id, caller=ctx.execution_id, ordinal=call.ordinal,
            deadline_ms=deadline, timeout_s=timeout)
        res = step.res
        if deadline is not None:
            if res.timers is None:
                res.timers = []
            res.timers.append(deadline)
        if command.announce is not None:
            res.outputs.append(command.announce)
        if under_cancelled(run, ctx.scope) and command.call.kind is not CallKind.SLEEP:
            self._cancel_wait(step, command.correlation_id, run.waits[command.correlation_id])

    def _unread_answer(self, step: Step, cid: str, held: WaitRecord,
                       problem: str) -> ErrorRecord:
        """The error record of an early approval answer its wait cannot read."""
        where = held.caller or "outside event"
        key = self._key_value(step.identity)
        return logged(ErrorRecord(
            key=key, seq=step.run.seq, action="<outside>", execution_id=where,
            error_type=ExternalEventError.__name__,
            message=f"{where}: the answer to approval {cid!r} {problem}",
            input={"key": key_json(key), "correlation_id": cid, "payload": held.payload}))

    def _cancel_left_behind(self, step: Step, ctx: ActionExecution) -> None:
        """Cancel the sub-agent calls the ended action ``ctx`` never awaited; end their waits.

        See ``_subgraph.cancel_left_behind``; their polls end at their next round.
        """
        left = cancel_left_behind(step.run, ctx, self._warned_sites)
        if left:
            self._cancelled.extend(left)
            self._end_cancelled(step)

    def _end_cancelled(self, step: Step) -> None:
        """After sub-agent calls were cancelled: end their waits, then check each call.

        A wait for an outside event (a ``wait_for``, a held tool call) of an action in a
        cancelled call ends at once with ``WaitTimeoutError`` (status ``"cancelled"``): its
        event could come days later, or never, and the call completes only once its actions
        have. An async sub-agent's poll there sends the run's cancel request and ends as
        cancelled, at its next round. A sleep runs to its end, as any call in flight does.
        """
        run = step.run
        for cid, wait in list(run.waits.items()):
            action = run.inflight.get(wait.caller)
            if wait.status == "open" and not cid.startswith(SLEEP_PREFIX) \
                    and action is not None and under_cancelled(run, action.scope):
                self._cancel_wait(step, cid, wait)
        stop_cancelled_polls(run, step.live.values())  # a remote run's poll ends so too
        while self._cancelled:
            check_invocation(step, self._cancelled.pop(0), self.ledger)

    def _cancel_wait(self, step: Step, cid: str, wait: WaitRecord) -> None:
        """End an open wait of a cancelled sub-agent call with ``WaitTimeoutError``."""
        wait.status = "cancelled"
        error = WaitTimeoutError(
            f"the wait for correlation id {cid!r} of key {shown_key(step.key)} ended without "
            "its event: the sub-agent call it waited in was cancelled", cid, wait.timeout_s)
        task = step.live.get(wait.caller)
        call = task.ctx.calls.get(wait.ordinal) if task is not None else None
        if task is None or call is None or call.done:
            self._complete_wait(step.identity, step.run, wait, False, error)
            return
        task.ctx.record_outcome(call, False, error)
        if task.waiting is call or task.ending is not None:
            task.waiting = None
            step.ready.append(task)

    def _complete_wait(self, key: Any, run: RunState, wait: WaitRecord, ok: bool,
                       value: Any) -> None:
        """Record a wait's outcome: to its live call, else into the run's state entry.

        The run is no longer parked: the next ``advance`` re-enters it.
        """
        if run.parked:
            self.waiting_changed(-1)
        run.parked = False
        task = self._live.get(key, {}).get(wait.caller)
        call = task.ctx.calls.get(wait.ordinal) if task is not None else None
        if task is not None and call is not None and not call.done:
            self._inbox.put(key, Delivery(task.ctx, call, ok, value))
            return
        action = run.inflight.get(wait.caller)
        if action is None:
            return  # the action finished without awaiting its wait
        rec = action.calls.get(str(wait.ordinal))
        if rec is None:
            rec = action.calls[str(wait.ordinal)] = CallRecord(digest="")
        if rec.done:
            return
        store_outcome(rec, wait.call_id, ok, value)
        self.ledger.recorded(key, wait.call_id, rec, run, action.event)

    def _park(self, key: Any, state: KeyState, res: StepResult) -> None:
        """After an advance: park the run if it only waits (see ``RunState.parked``)."""
        run = state.run
        assert run is not None
        live = self._live.get(key) or {}
        parked = any(w.status == "open" for w in run.waits.values()) \
            and not self._inbox.has(key) \
            and not any(c.running for t in live.values() for c in t.ctx.calls.values()) \
            and all(t.waiting is not None or t.ending is not None for t in live.values())
        if parked != run.parked:
            self.waiting_changed(1 if parked else -1)
        run.parked = parked
        if not parked:
            return
        res.busy, res.parked = False, True
        for task in live.values():  # dropped: the run re-enters from keyed state
            if task.coro is not None:
                task.coro.close()


_NO_RUN = ("an event is held only for a run in flight: it came before the key's record "
           "started one, or after the run ended; send it once the run waits, as an answer "
           "to the request read from the outputs is")


def _waited_for(run: RunState, most: int = 5) -> str:
    """`` (the run waited for: 'a', 'b')``: the ids of the run's waits, to show a typo by."""
    ids = [cid for cid, w in run.waits.items() if not cid.startswith("#")
           and w.status != "early"]
    if not ids:
        return ""
    more = f" and {len(ids) - most} more" if len(ids) > most else ""
    return f" (the run waited for: {', '.join(shown_key(c) for c in ids[:most])}{more})"


def _typed_key_hint(key: Any) -> str:
    """A hint when ``key`` may be another key's text (``'7'`` for ``7``) or number.

    Keys are typed, and an outside event read from JSON text often carries a number as
    text: the run it is for waits under the other key.

    Returns:
        The hint, with its leading space; ``""`` for a key no other key's form is like.
    """
    if isinstance(key, str):
        tagged = _tagged_text(key)
        if tagged is not None:  # a UUID or a date as text: its key's JSON form is tagged
            return (f" (keys are typed: if the records' key is the {tagged} {key!r}, send the "
                    f"event with that key, or its JSON form {{{tagged!r}: {key!r}}}, not the "
                    "string)")
        try:
            number: float = int(key)
        except ValueError:
            try:
                number = float(key)
            except ValueError:
                return ""
        if not math.isfinite(number):  # 'nan', 'inf': words, not numbers someone keyed by
            return ""
        return (f" (keys are typed: if the records' key is the number {number!r}, send the "
                f"event with that number as its key, not the string {key!r})")
    if isinstance(key, (int, float)) and not isinstance(key, bool):
        return (f" (keys are typed: if the records' key is the string {str(key)!r}, send the "
                f"event with that string as its key, not the number {key!r})")
    return ""


def _tagged_text(text: str) -> str | None:
    """The tag of the key type whose canonical text ``text`` is (``"uuid"``...), if any."""
    for tag in ("uuid", "date", "datetime"):
        try:
            if key_json(key_from_json({tag: text})) == {tag: text}:
                return tag
        except ValueError:
            continue
    return None


def _approval_problem(run: RunState, wait: WaitRecord, payload: Any) -> str | None:
    """Why ``payload`` is no answer to the approval ``wait`` holds (``None``: it is one).

    An approval (a tool call held by ``requires_approval``) takes ``True``/``False`` or a
    mapping whose ``approved`` is a boolean (what ``ApprovalRequest.approve``/``reject``
    build). Anything else (``"yes"``, ``{"approved": "true"}``, ``None``) was rejected
    silently before, so a reviewer's broken answers went unnoticed: now it is refused to the
    error output and the call stays held for an answer it can read (or its timeout).

    Returns:
        The reason, as the end of a sentence starting with the approval's id.
    """
    action = run.inflight.get(wait.caller)
    rec = action.calls.get(str(wait.ordinal)) if action is not None else None
    return None if rec is None else _answer_problem(rec.kind, payload)


def _answer_problem(kind: CallKind | None, payload: Any) -> str | None:
    """Why ``payload`` is no answer to a wait of call ``kind`` (``None``: it is one).

    Returns:
        The reason (see ``_approval_problem``); ``None`` for any wait but an approval's.
    """
    if kind is not CallKind.APPROVAL or isinstance(payload, bool):
        return None  # (a wait of ``ctx.wait_for`` takes any payload)
    if isinstance(payload, dict) and isinstance(payload.get("approved"), bool):
        return None
    got = payload.get("approved") if isinstance(payload, dict) else payload
    what = "its 'approved'" if isinstance(payload, dict) else "its payload"
    return (f"cannot be read: {what} is {got!r}, not true or false (answer with "
            "ApprovalRequest.approve() or reject(), or a payload {'approved': true|false, "
            "...}); the call stays held")
