"""The subgraph runtime shared by ``ctx.chat`` and internal sub-agents.

A subgraph call is an ``Invocation`` in the run's state, identified by its caller's durable
call id. Its parts, after the design of Apache Flink Agents' shared subgraph runtime:

- *definition*: private routing. A chat routes chat and tool events to the built-in chat and
  tool actions and collects its ``ChatResponseEvent``; an internal sub-agent routes through
  the child's plan and collects its ``OutputEvent`` payloads. Neither reaches the agent's own
  actions.
- *invocation*: one call: its environment (a chat uses its caller's resources and memory;
  a sub-agent its own resources and memory isolated to the call), collected outputs, and
  its actions, which are the in-flight actions of its scope. It completes when none is left,
  so a result is produced only after every action it scheduled has retired.
- *call manager*: the run's ``invocations`` map; the core's scheduler runs every action.

Only the bootstrap event is released while the caller is suspended: the caller's own events
stay buffered until its action completes. A failing action of a sub-agent marks the call
failed, stops successor dispatch, and the call completes as failed once the actions already
scheduled retire; the failure is recorded as the caller's outcome, so it stays a failure
after recovery. After a restore, open invocations are in state: their in-flight actions
re-enter like any other, and the caller, re-entered from its start, re-attaches to its
invocation (by call id) instead of bootstrapping it again.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ..api import (
    AsyncSubagentSetup,
    ChatRequestEvent,
    ChatResponseError,
    ChatResponseEvent,
    Event,
    InputEvent,
    OutputEvent,
    SerializationError,
    SubagentResult,
    ToolRequestEvent,
    ToolResponseEvent,
)
from ..plan import ActionPlan
from ._context import ActionContext, DurableCall, store_outcome
from ._failures import with_original
from ._serde import dumps, event_json, to_plain_json
from ._state import CallKind, CallRecord, Invocation, RunState

if TYPE_CHECKING:
    from ._core import AgentCore, _Step

__all__ = ["route_in_scope", "start_call", "invocation_result", "deliver_to_caller",
           "cancel_invocation", "under_cancelled"]

CHAT_ROUTES = {
    ChatRequestEvent.EVENT_TYPE: "_chat_model_action",
    ToolResponseEvent.EVENT_TYPE: "_chat_model_action",
    ToolRequestEvent.EVENT_TYPE: "_tool_call_action",
}


def under_cancelled(run: RunState, scope: str | None) -> bool:
    """Whether ``scope`` or an invocation it runs inside has been cancelled."""
    while scope is not None:
        inv = run.invocations.get(scope)
        if inv is None:
            return False
        if inv.cancelled:
            return True
        scope = inv.caller_scope
    return False


def cancel_invocation(run: RunState, inv_id: str) -> list[str]:
    """Cancel ``inv_id`` and every open invocation nested in it; returns their ids."""
    hit = [i for i in run.invocations if i == inv_id or under_cancelled_by(run, i, inv_id)]
    for i in hit:
        run.invocations[i].cancelled = True
    return hit


def under_cancelled_by(run: RunState, scope: str, ancestor: str) -> bool:
    """Whether invocation ``scope`` runs (directly or not) inside ``ancestor``."""
    inv = run.invocations.get(scope)
    while inv is not None and inv.caller_scope is not None:
        if inv.caller_scope == ancestor:
            return True
        inv = run.invocations.get(inv.caller_scope)
    return False


def route_in_scope(core: AgentCore, run: RunState, scope: str, event: Event) -> tuple[ActionPlan, ...]:
    """The actions ``event`` triggers inside invocation ``scope`` (collecting its outputs)."""
    inv = run.invocations.get(scope)
    if inv is None or inv.failed or inv.cancelled:
        return ()  # a failed or cancelled call dispatches no successors
    plan = core.plan_at(inv.plan_path)
    if inv.kind == "chat":
        if isinstance(event, ChatResponseEvent):
            inv.outputs.append(event_json(event, f"event {event.id}"))
            return ()
        name = CHAT_ROUTES.get(event.type)
        return (plan.actions[name],) if name else ()
    if isinstance(event, OutputEvent):  # its JSON form: what a replay will hand the caller
        try:  # the plain JSON form results have (see ``check_result``)
            output = to_plain_json(event.output, f"output of event {event.id}")
        except SerializationError:  # a leaf only pydantic renders (a UUID...): its form
            output = event_json(event, f"event {event.id}")["output"]
        inv.outputs.append(output)
    return plan.actions_for(event.type)


def start_call(core: AgentCore, step: _Step, ctx: ActionContext, call: DurableCall) -> None:
    """Start a lazy call: bootstrap an invocation, run a deferred call, or start polling.

    Raises:
        Exception: what a deferred setup's ``prepare`` raised (thrown into the caller).
    """
    start, call.start = call.start, None
    if start is None or start.kind == "attach":
        return
    run = step.run
    base_path = run.invocations[ctx.env].plan_path if ctx.env is not None else []
    if start.kind in ("chat", "subagent"):
        ctx.record_started(call, f"{start.kind}:{start.name}")
        inv_id = call.call_id
        if start.kind == "chat":
            req = start.payload
            inv = Invocation(kind="chat", name=start.name, caller=ctx.execution_id,
                             caller_scope=ctx.scope, ordinal=call.ordinal, env=ctx.env,
                             plan_path=list(base_path))
            bootstrap: Event = ChatRequestEvent(
                id=f"{inv_id}/b", model=req["model"], messages=req["messages"],
                prompt_args=req["prompt_args"], output_schema=req["output_schema"])
        else:
            inv = Invocation(kind="subagent", name=start.name, caller=ctx.execution_id,
                             caller_scope=ctx.scope, ordinal=call.ordinal, env=inv_id,
                             plan_path=[*base_path, start.name],
                             sensory={"_subagent": {"input": start.payload}})
            bootstrap = InputEvent(id=f"{inv_id}/b", input=start.payload)
        inv.cancelled = under_cancelled(run, ctx.scope)
        run.invocations[inv_id] = inv
        core.counters[f"{start.kind}_calls"] += 1
        core._dispatch(step, bootstrap, inv_id)
        return
    if start.kind == "fn":
        fn, args, kwargs = start.payload
        ctx.record_started(call, start.name)
        core.submit(ctx, call, fn, args, kwargs)
        return
    session_id = f"{dumps(step.key).decode()}/r{run.seq}"
    rec = ctx._record.calls.get(str(call.ordinal))
    started_before = rec is not None and not rec.done
    if start.kind == "deferred":
        setup, value = start.payload
        try:
            _key, fn, reconciler = setup.prepare(ctx, value, session_id, call.call_id)
        except Exception as e:  # noqa: BLE001 - the call's outcome: raised at the await,
            ctx.record_started(call, f"deferred:{start.name}")  # and again on replay
            ctx.record_outcome(call, False, e)
            return
        ctx.record_started(call, f"deferred:{start.name}")
        core.counters["subagent_calls"] += 1
        runner = reconciler if (started_before and reconciler is not None) else fn
        core.submit(ctx, call, checked_result, (runner, start.name), {})
    elif start.kind == "poll":
        setup, session_id = start.payload
        ctx.record_started(call, f"async:{start.name}")
        core.counters["subagent_calls"] += 1
        core.submit(ctx, call, poll_result, (setup, session_id, call.call_id, start.name), {})


def check_result(result: Any, name: str) -> SubagentResult:
    """Check what an external sub-agent returned and put its value in its plain JSON form.

    The caller gets the value's plain JSON form (``to_plain_json``: pydantic models and
    dataclasses become objects, enums their values, datetimes ISO 8601 text...), on the live
    path and after a replay alike. A value with no JSON form (a cycle, a set, a non-finite
    number, one nested too deep to walk) gives a failed result naming the path where it was
    found: a failed delegation, not a failure of the caller.

    Raises:
        TypeError: when ``result`` is not a ``SubagentResult``.
    """
    if not isinstance(result, SubagentResult):
        raise TypeError(f"sub-agent {name!r} returned {type(result).__name__}, not a SubagentResult")
    if not result.success:
        return result
    try:
        plain = to_plain_json(result.result, f"result of sub-agent {name!r}")
    except SerializationError as e:
        return SubagentResult.error(e)
    return result if plain is result.result else result.model_copy(update={"result": plain})


def checked_result(fn: Any, name: str) -> SubagentResult:
    """Run a deferred sub-agent's ``call`` (or reconciler) and check what it returned."""
    return check_result(fn(), name)


async def poll_result(setup: AsyncSubagentSetup, session_id: str, call_id: str,
                      name: str) -> SubagentResult:
    """Poll a remote run until it ends (on the I/O executor), then fetch its result."""
    while True:
        status = await asyncio.to_thread(setup.call_query_status, session_id, call_id)
        if status.state == "completed":
            fetched = await asyncio.to_thread(setup.call_fetch_result, session_id, call_id)
            return check_result(fetched, name)
        if status.state == "failed":
            return SubagentResult.error(f"sub-agent {name!r}: the remote run failed: {status.error}")
        await asyncio.sleep(setup.status_poll_interval_millis / 1000)


def invocation_result(inv: Invocation, inv_id: str) -> tuple[bool, Any]:
    """The caller's outcome of a completed invocation: ``(ok, value or exception)``."""
    if inv.kind == "chat":
        if inv.failed:
            return False, with_original(ChatResponseError(
                f"chat with {inv.name!r} failed: {inv.failed}"), inv.failed_traceback)
        if inv.cancelled:
            return False, ChatResponseError(f"chat with {inv.name!r} was cancelled")
        answers = [o for o in inv.outputs if o.get("request_id") == f"{inv_id}/b"]
        if len(answers) != 1:
            return False, ChatResponseError(
                f"chat {inv_id} ended with {len(answers)} responses to its request, not one")
        answer = ChatResponseEvent.model_validate(answers[0])
        if answer.error is not None or answer.response is None:
            return False, with_original(ChatResponseError(
                answer.error or "the chat ended without a response"), answer.traceback)
        return True, answer.response
    if inv.cancelled:
        return True, SubagentResult.cancelled_call(inv.name)
    if inv.failed:
        return True, SubagentResult.error(f"sub-agent {inv.name!r} failed: {inv.failed}",
                                          traceback=inv.failed_traceback)
    return True, SubagentResult.ok(list(inv.outputs))


def deliver_to_caller(core: AgentCore, step: _Step, inv: Invocation, inv_id: str, ok: bool,
                      value: Any) -> None:
    """Record the outcome as the caller's durable call; resume the caller if it waits."""
    rec = step.run.inflight.get(inv.caller)
    if rec is None:
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
    # the caller has not reached the call again yet (re-entered after a restore): record it,
    # and the caller will replay the outcome when it gets there
    crec = rec.calls.setdefault(str(inv.ordinal), CallRecord(
        digest="", kind=CallKind.CHAT if inv.kind == "chat" else CallKind.SUBAGENT,
        target=inv.name))
    store_outcome(crec, inv_id, ok, value)
    core.outcome_recorded(step.key, inv_id, crec)
