"""The context side of a sub-agent call: ``ctx.submit_subagent`` (its identity and record).

A sub-agent call takes a durable call identity in program order like any call. A refusal
(no such sub-agent, or one this agent may not call) is recorded too, so a submit takes its
identity on every path; an internal sub-agent's call opens an invocation in the run; a
deferred one runs on the I/O executor; an async one is submitted once, durably, then polled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...api import AsyncSubagentSetup, DeferredSubagentSetup, InternalSubagent, SubagentResult
from .._schemas import check_subagent_input
from ..context._calls import DurableCall, SubagentHandle
from ..context._long_term_memory import session_id as session_of
from ..core._commands import Poll, RunDeferred, Settle, StartSubagent
from ..core._subgraph import resolve_subagent, subagent_input
from ._call_changes import subagent_shape
from ._outcomes import call_digest
from ._state import CallKind

if TYPE_CHECKING:
    from ._execution import ActionExecution

__all__ = ["submit_subagent"]


async def submit_subagent(
    ctx: ActionExecution, name: str, value: Any, *, check_input: bool = False
) -> SubagentHandle:
    """``RunnerContext.submit_subagent`` of ``ctx``'s action.

    Args:
        ctx: the action execution making the call.
        name: the sub-agent's name.
        value: the input it is given.
        check_input: check ``value`` against the sub-agent's input schema first (a model's
            call: an action's input is its own to get right).

    Returns:
        The handle to await (or cancel).
    """
    ctx.check_live("submit_subagent")
    value = subagent_input(name, value)  # (a dataclass: as its fields)
    setup, kind, refusal = resolve_subagent(ctx, name)
    # a refusal is recorded too, so a submit takes its identity on every path
    ordinal, call_id, dig, rec = ctx._allocate(
        kind, name, lambda cid: call_digest(f"subagent:{name}", (value,), {}, cid), check=False
    )
    if (
        rec is not None
        and rec.kind is CallKind.SUBAGENT_REFUSED
        and rec.target == name
        and rec.done
    ):
        kind = CallKind.SUBAGENT_REFUSED  # refused then: refused again, as recorded
    elif rec is not None:
        ctx._check_same(call_id, rec, kind, name)
    if check_input and rec is None and setup is not None:  # a model's call (not an action's)
        check_subagent_input(name, setup, value)
    call = DurableCall(call_id, ordinal, dig, kind, name)
    call.shape = subagent_shape(name, setup, value)  # the defaults its input leaves
    ctx.calls[ordinal] = call
    if kind is CallKind.SUBAGENT_REFUSED:
        if rec is not None and rec.done:
            ctx._replay(call, rec, Settle(call, f"refused:{name}"))
        else:
            ctx.record_started(Settle(call, f"refused:{name}"))
            ctx.record_outcome(call, True, SubagentResult.failed(refusal))
        return SubagentHandle(ctx, call, name, CallKind.SUBAGENT_REFUSED)
    session_id = session_of(ctx.key, ctx.run.seq, ctx.key_memory())
    if isinstance(setup, InternalSubagent):
        ctx._replay_or_prepare(call, rec, StartSubagent(call, name, value))
        ctx.start_soon(call)  # submitted now, so several calls overlap
        return SubagentHandle(ctx, call, name, CallKind.SUBAGENT)
    if isinstance(setup, DeferredSubagentSetup):
        ctx._replay_or_prepare(call, rec, RunDeferred(call, name, setup, value, session_id))
        return SubagentHandle(ctx, call, name, CallKind.SUBAGENT_DEFERRED, session_id, setup)
    assert isinstance(setup, AsyncSubagentSetup)
    # submitted once, durably; always awaited, so the call takes its ordinal on replay too
    await ctx.execute_as(
        CallKind.SUBAGENT_SUBMIT,
        name,
        setup.call_submit_request,
        (session_id, call_id, value),
        reconciler=lambda: setup.reconcile_submit_request(session_id, call_id, value),
    )
    # polled once submitted (a submit that raised leaves no run to poll, nor to cancel)
    ctx._replay_or_prepare(call, rec, Poll(call, name, setup, session_id))
    return SubagentHandle(ctx, call, name, CallKind.SUBAGENT_RESULT, session_id, setup)
