"""How an action execution answers a durable call from its record (``ActionExecution``'s).

A call whose outcome is recorded is completed from the record instead of running again; a
lazy call (a chat, a sub-agent request) is re-attached to its open invocation or armed to
start at its first await. Kept apart from ``_execution`` (one replay path, the same methods).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._budgets import count_replayed
from ..core._commands import Attach, CallCommand, Poll, RunDeferred, StartChat, StartSubagent
from ._state import CallKind, CallRecord
from ._versioning import check_arguments, replayed_outcome

if TYPE_CHECKING:
    from .._resources import ResourceEnvironment
    from ..context._calls import DurableCall
    from ._ledger import CallLedger
    from ._state import RunState

__all__ = ["Replays"]


class Replays:
    """The replay methods of ``ActionExecution`` (a base with no state of its own)."""

    __slots__ = ()

    if TYPE_CHECKING:
        ledger: CallLedger
        key: Any
        run: RunState
        resources: ResourceEnvironment

    def _replay(
        self, call: DurableCall, rec: CallRecord, command: CallCommand, strict: bool | None = None
    ) -> None:
        """Complete ``call`` from its record ``rec`` (checked against the call first)."""
        check_arguments(self, call, rec, strict)  # type: ignore[arg-type]
        outcome = replayed_outcome(self, call, rec)  # type: ignore[arg-type]  # (a divergence
        call.replayed = True  # when it no longer fits)
        call.complete(rec.ok, outcome)
        if rec.ok and call.kind in (CallKind.CHAT, CallKind.MODEL):  # an agent budget's spend
            count_replayed(self.resources, call.target, outcome)
        self.ledger.started(self.key, command, replayed=True)

    def _replay_or_prepare(
        self,
        call: DurableCall,
        rec: CallRecord | None,
        command: StartChat | StartSubagent | RunDeferred | Poll,
    ) -> None:
        """Replay a recorded lazy call, re-attach to its open invocation, or arm its start."""
        if rec is not None and rec.done:
            self._replay(call, rec, command)
        elif rec is not None and call.call_id in self.run.invocations:
            check_arguments(self, call, rec)  # type: ignore[arg-type]  # the open invocation
            call.start = Attach(call, call.target)  # is the recorded call's
        else:
            if rec is not None:  # started before the restore: it starts again
                check_arguments(self, call, rec, reruns=True)  # type: ignore[arg-type]
            call.arm(command)
