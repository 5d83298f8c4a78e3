"""The end of an invocation: complete it once its actions have retired, tell its caller.

A chat (``ctx.chat``) or an internal sub-agent call completes when none of its actions (nor
those of a chat nested in it, which use its memory) is in flight any more; its result then
becomes the caller's durable call outcome. The core calls ``check_invocation`` after each
dispatch, drain and finish that may have emptied a scope.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..recorder._ledger import CallLedger
from ..recorder._state import Invocation, RunState
from ._subgraph import invocation_result, record_for_caller

if TYPE_CHECKING:
    from ._tasks import Step

__all__ = ["check_invocation", "deliver_invocation", "env_of"]


def env_of(run: RunState, scope: str | None) -> str | None:
    """The scope whose resources and memory actions of ``scope`` use (``None``: the root's).

    Returns:
        The invocation id of that scope, or ``None``.
    """
    inv = run.invocations.get(scope) if scope is not None else None
    return inv.env if inv is not None else None


def check_invocation(step: Step, scope: str | None, ledger: CallLedger) -> None:
    """Complete invocation ``scope`` if none of its actions is in flight any more.

    Its actions include those of a chat nested in it, which use its memory: after a
    restore, a caller answered from the journal can complete before such a chat.
    """
    run = step.run
    while scope is not None:
        inv = run.invocations.get(scope)
        if inv is None or any(a.scope == scope or env_of(run, a.scope) == scope
                              for a in run.inflight.values()):
            return
        del run.invocations[scope]
        ok, value = invocation_result(inv, scope)
        deliver_invocation(step, inv, scope, ok, value, ledger)
        scope = inv.caller_scope  # a caller that did not wait may have left its scope empty


def deliver_invocation(step: Step, inv: Invocation, inv_id: str, ok: bool, value: Any,
                       ledger: CallLedger) -> None:
    """Record an invocation's outcome as its caller's call; resume the caller if it waits."""
    if inv.caller not in step.run.inflight:
        return  # the caller finished without awaiting: nobody to tell
    task = step.live.get(inv.caller)
    call = task.ctx.calls.get(inv.ordinal) if task is not None else None
    if task is not None and call is not None:
        if not call.done:
            task.ctx.record_outcome(call, ok, value)
            if task.waiting is call:
                task.waiting = None
                step.ready.append(task)
        return
    rec = record_for_caller(step.run, inv, inv_id, ok, value)
    if rec is not None:
        ledger.recorded(step.key, inv_id, rec, step.run, step.run.inflight[inv.caller].event)
