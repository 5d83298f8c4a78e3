"""Runs that cannot finish: given up with an error record where a host would wait forever.

A key is busy while its run has actions in flight, and each of them waits for something: a
call on the I/O executor, or a chat or internal sub-agent call that the run's own actions
answer (a run whose actions wait only for outside events or timers is parked, not busy). So
a busy key with no call of its own on the executor and nothing delivered to its inbox can
never move on again: a broken invariant of the runtime (a call whose outcome was lost, an
action waiting for an answer nothing will give). The hosts find such keys where they would
otherwise wait for them for good: at the end of input (Flink's drain, in either mode) and
where the local runner waits for any I/O at all. ``UnfinishedCore.give_up`` then ends the
run with one ``ErrorRecord`` (an ``UnfinishedRunError`` naming what each action in flight
waits for), clears it from the key's state and starts the key's next input, if one is
queued: the run is not lost silently, and the inputs behind it still run.

What is cleared: the run (keyed state then holds no run for the key), its live actions
(their coroutines closed; the spend of the model calls they had answered is merged into the
key's budget entries first, ``commit_spend``) and anything of it in the inbox. An async
sub-agent's remote run that an action of it submitted and never polled would outlive it,
with nobody left to read its result: each is sent its cancel request (once, in a thread of
its own that the core's ``close`` waits for; a failure is logged), as when an action ends
without awaiting its handle, and the error record names them. Early outside events it held
become ``UnmatchedEventError`` records, as when a run ends. The journal keeps the run's
recorded calls, as for any run in flight: a restore from a checkpoint taken before the run
was given up replays them.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from ...api import Budget, UnfinishedRunError
from ...api.internal import cut_masked, described
from .._failures import clip
from ..recorder._state import CallKind, KeyState, RunState
from ..recorder._wait_calls import SLEEP_PREFIX
from ._commands import Poll
from ._completion import cancel_unpolled, commit_spend, unfinished_calls
from ._executor import IOExecutor
from ._results import ErrorRecord, StepResult, input_record
from ._tasks import Task
from ._waits import END_OF_INPUT, WaitsCore

if TYPE_CHECKING:
    from ._observer import Probe

__all__ = ["UnfinishedCore"]

log = logging.getLogger("flink_agents_py.runtime")

CANCEL_JOIN_S = 10.0
"""How long ``close`` waits in all for the cancel requests of runs given up to be sent."""

_HELD_BY_RUN = frozenset({"chat", "subagent"})
"""Kinds of calls the run's own actions answer (an invocation), not the I/O executor."""


def _waits_for(task: Task | None) -> str:
    """What a live action execution (``None``: not live here) waits for, in words."""
    if task is None:
        return "is not live in this process (restored, not re-entered)"
    if task.ending is not None:
        calls = unfinished_calls(task.ctx)
        shown = ", ".join(c.call_id for c in calls) or "none left"
        return f"returned, and waits for the outcome of the calls it started ({shown})"
    call = task.waiting
    if call is None:
        return "is neither running nor waiting for a call"
    kind = getattr(call.kind, "value", call.kind)
    what = f"waits for {kind} call {call.call_id}" + (f" ({call.target})" if call.target
                                                       else "")
    if call.running:
        return f"{what}, handed to the I/O executor, whose outcome never came back"
    if kind in _HELD_BY_RUN:
        return f"{what}, which the run's own actions answer (none of them can move on)"
    return f"{what}, which was never started"


def _send_cancels(requests: list[tuple[Any, str, str, str]]) -> None:
    """Send each ``(setup, name, session id, call id)`` its cancel request; log a failure."""
    for setup, name, session_id, call_id in requests:
        try:
            setup.call_cancel_request(session_id, call_id)
        except Exception as e:  # noqa: BLE001 - best effort: its caller's run is gone
            log.warning("sub-agent %r: the cancel request of remote run %s#%s, whose caller's "
                        "run was given up, failed: %s", name, session_id, call_id,
                        clip(described(e), 500))


class UnfinishedCore(WaitsCore):
    """``AgentCore``'s handling of runs that cannot finish (see the module docstring)."""

    executor: IOExecutor
    probe: Probe | None
    _cancelling: list[threading.Thread]  # sending the cancel requests of runs given up
    _run_tokens: dict[Any, Any]
    _windows: dict[str, Budget] | None  # the plan's windowed budgets (``commit_spend``)

    if TYPE_CHECKING:
        def _drain(self, step: Any, task: Task, awaited: Any) -> BaseException | None: ...

    def _settled(self, step: Any, task: Task) -> bool:
        """Whether ``task``'s action, which returned or raised, has no call left running.

        First the async sub-agent runs it submitted and never awaited are sent their cancel
        requests (``_completion.cancel_unpolled``), which it then waits for too.

        Returns:
            Whether it can finish now.
        """
        ctx = task.ctx
        running = False
        for call in ctx.calls.values():  # the usual: no sub-agent handle, one look a call
            if call.kind is CallKind.SUBAGENT_RESULT:
                break
            running = running or call.running
        else:
            return not running
        if cancel_unpolled(ctx, self._warned_sites):
            self._drain(step, task, None)
        return not unfinished_calls(ctx)

    def is_stuck(self, key: Any) -> bool:
        """Whether a busy ``key`` can never move on: no call of it runs, nothing was delivered.

        Meaningful right after ``advance`` returned busy for the key (a parked run is not
        busy). The executor is asked first: it forgets a key's call only after its outcome
        is in the inbox, so a call completing meanwhile is seen by the second look.

        Returns:
            Whether it is stuck.
        """
        return not self.executor.has_calls(key) and not self._inbox.has(key)

    def give_up(self, key: Any, state: KeyState, where: str = f"at the {END_OF_INPUT}"
                ) -> StepResult:
        """End ``key``'s run in flight with an ``UnfinishedRunError`` record, then advance.

        For a run that can never finish (``is_stuck``): one ``ErrorRecord`` with the key, the
        run's input position (``seq``), the actions in flight (``action`` and
        ``execution_id``, comma-separated) and a message naming what each waits for. The
        run is cleared (see the module docstring), and the key's next queued input starts.

        Args:
            key: the key (as the host keys it).
            state: the key's state.
            where: when it was given up, for the message (``"at the end of input"``).

        Returns:
            The advance's result after the run was cleared, the record first.
        """
        run = state.run
        if run is None:  # nothing to give up: its queued inputs start
            return self.advance(key, state)
        shown = self._key_value(key)
        live = self._live.pop(key, None) or {}
        record, error = self._record(shown, run, live, where, self._cancel_abandoned(live))
        log.error("%s", record.message)
        errors = [record, *self._give_up_early(key, run, None)]
        self.counters["runs_abandoned"] += 1
        probe = self.probe
        if probe is not None:  # (a host callback of its own: ``Probe.reading``)
            probe.reading = None
        for exec_id, task in live.items():
            commit_spend(task.ctx, state, self._windows)  # its answered calls' spend counts
            if task.coro is not None:
                task.coro.close()
            if probe is not None and task.started:
                probe.action_finished(shown, exec_id, task.action.name, error, task.token)
        if probe is not None:  # the run ended: what the probe keeps of it is released
            probe.run_completed(shown, run.seq, self._run_tokens.pop(key, None))
        else:
            self._run_tokens.pop(key, None)
        if run.parked:
            self.waiting_changed(-1)
        self._inbox.take(key)
        state.run = None
        res = self.advance(key, state)  # the key's next input, if any
        res.errors[:0] = errors
        return res

    def _cancel_abandoned(self, live: dict[str, Task]) -> list[str]:
        """Send their cancel requests to the async sub-agent runs ``live`` never polled.

        Each once (marked used, as ``_completion.cancel_unpolled`` marks it), in a daemon
        thread of their own (not on the operator thread, and not on the I/O executor, which
        abandons its calls when the job ends right after): ``close`` waits for them, up to
        ``CANCEL_JOIN_S``. A cancel request that raises is logged.

        Returns:
            Each run sent its cancel request, as ``sub-agent 'name' (call id)``.
        """
        sent: list[str] = []
        requests: list[tuple[Any, str, str, str]] = []
        for task in live.values():
            for call in task.ctx.calls.values():
                poll = call.start
                if call.kind is not CallKind.SUBAGENT_RESULT or call.used or call.done \
                        or not isinstance(poll, Poll):
                    continue
                call.used = True
                requests.append((poll.setup, poll.name, poll.session_id, call.call_id))
                sent.append(f"sub-agent {poll.name!r} ({call.call_id})")
        if requests:
            thread = threading.Thread(target=_send_cancels, args=(requests,), daemon=True,
                                      name="flink-agents-cancel-given-up")
            thread.start()
            self._cancelling.append(thread)
        return sent

    def join_cancels(self) -> None:
        """Wait (up to ``CANCEL_JOIN_S`` in all) for the cancel requests of runs given up."""
        deadline = time.monotonic() + CANCEL_JOIN_S
        for thread in self._cancelling:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._cancelling.clear()

    def _record(self, shown: Any, run: RunState, live: dict[str, Task], where: str,
                cancelled: list[str]) -> tuple[ErrorRecord, UnfinishedRunError]:
        """The error record of a run given up (and its exception, for the probe)."""
        names = list(dict.fromkeys(rec.action for rec in run.inflight.values()))
        waits = [f"action {rec.action!r} (execution {exec_id}) {_waits_for(live.get(exec_id))}"
                 for exec_id, rec in run.inflight.items()]
        waits += [f"a wait for {'a timer' if cid.startswith(SLEEP_PREFIX) else repr(cid)} is "
                  "open" for cid, w in run.waits.items() if w.status == "open"]
        why = "; ".join(waits) or "it has no action in flight"
        error = UnfinishedRunError(
            f"the run of key {cut_masked(repr(shown), 200)} (input {run.seq}) could not finish "
            f"{where}: "
            f"it stays busy with nothing in flight and nothing delivered, so nothing "
            f"can move it on: {why}. The run is given up (a defect of the runtime: please "
            "report it with this message); the key's next input, if any, runs"
            + (f"; the async sub-agent runs it never polled are sent their cancel requests: "
               f"{', '.join(cancelled)}" if cancelled else ""))
        record = ErrorRecord(
            key=shown, seq=run.seq, action=", ".join(names) or "<run>",
            execution_id=", ".join(run.inflight) or f"r{run.seq}",
            error_type=type(error).__name__, message=str(error),
            input=input_record(run.input), source=run.source)
        return record, error
