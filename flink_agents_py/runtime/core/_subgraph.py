"""The subgraph runtime shared by ``ctx.chat`` and internal sub-agents.

A subgraph call is an ``Invocation`` in the run's state, identified by its caller's durable
call id. Its parts, after the design of Apache Flink Agents' shared subgraph runtime:

- *definition*: private routing. A chat routes chat and tool events to the built-in chat and
  tool actions and collects its ``ChatResponseEvent``; an internal sub-agent routes through
  the child's plan and collects its ``OutputEvent`` payloads. Neither reaches the agent's own
  actions.
- *invocation*: one call: its environment (a chat uses its caller's resources and memory; a
  sub-agent its own, isolated to the call), collected outputs, and its actions, the in-flight
  actions of its scope. It completes when none is left, so after all it scheduled retired.
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
import dataclasses
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ...api import (
    AsyncSubagentSetup,
    ChatRequestEvent,
    ChatResponseError,
    ChatResponseEvent,
    DeferredSubagentSetup,
    Event,
    InputEvent,
    InternalSubagent,
    OutputEvent,
    ResourceNotFoundError,
    ResourceType,
    RunStatus,
    SerializationError,
    SubagentResult,
    SubagentSetup,
)
from ...api.internal import described
from ...plan import ActionPlan, AgentPlan
from .._builtins import CHAT_ROUTES
from .._failures import clip, unless_stopping, with_original
from .._serde import event_json, to_json_value, to_plain_json
from ..context._action_context import ActionContext
from ..recorder._outcomes import store_outcome
from ..recorder._state import CallKind, CallRecord, Invocation, RunState, WaitRecord
from ._commands import Poll, RunDeferred, StartChat, StartSubagent
from ._executor import sleep_without_slot
from ._stepper import not_stepping
from ._unheard import missing_trigger_hint, warn_unheard

if TYPE_CHECKING:
    from ..recorder._execution import ActionExecution
    from ._tasks import Task

__all__ = ["POLL_PREFIX", "plan_at", "route_at_root", "route_in_scope", "open_invocation",
           "invocation_result", "record_for_caller", "cancel_invocation", "under_cancelled",
           "cancel_left_behind", "check_result", "checked_result", "polling", "poll_result",
           "prepare_deferred", "resolve_subagent", "stop_cancelled_polls", "subagent_input"]

NOT_STARTED_WARN_S = 60.0
"""How long a polled run may say ``not_started`` (after its submit) before a WARNING says so."""

POLL_PREFIX = "#poll/"
"""The id in ``RunState.waits`` of an async sub-agent poll's deadline: this, then its call id."""

log = logging.getLogger("flink_agents_py.runtime")


def plan_at(root: AgentPlan, path: Sequence[str]) -> AgentPlan:
    """The plan of the sub-agent reached by ``path`` of names from the ``root`` plan.

    Returns:
        The sub-agent's plan (``root`` for an empty path).
    """
    plan = root
    for name in path:
        plan = plan.subagents[name]
    return plan


def under_cancelled(run: RunState, scope: str | None) -> bool:
    """Whether ``scope`` or an invocation it runs inside has been cancelled.

    Returns:
        Whether it is cancelled.
    """
    while scope is not None:
        inv = run.invocations.get(scope)
        if inv is None:
            return False
        if inv.cancelled:
            return True
        scope = inv.caller_scope
    return False


def cancel_invocation(run: RunState, inv_id: str) -> list[str]:
    """Cancel ``inv_id`` and every open invocation nested in it.

    Returns:
        The ids of the invocations cancelled.
    """
    hit = [i for i in run.invocations if i == inv_id or under_cancelled_by(run, i, inv_id)]
    for i in hit:
        run.invocations[i].cancelled = True
    return hit


def cancel_left_behind(run: RunState, ctx: ActionExecution, warned: set[str]) -> list[str]:
    """Cancel the sub-agent calls action execution ``ctx``, which has ended, left open.

    A handle is valid only within the execution that submitted it, so once that execution
    returned or raised, nobody can read such a call's result: as a task group's children
    (or Temporal's child workflows when their parent closes), the call does not outlive it.
    It is cancelled as ``handle.cancel()`` would (no further dispatch, its waits end, its polls
    send their runs' cancel requests), instead of holding the key's later records while it
    runs, or waits, for nobody. A WARNING names the line that submitted it (once per line).

    Returns:
        The ids of the invocations cancelled (those nested in them included).
    """
    cancelled: list[str] = []
    for inv_id, inv in list(run.invocations.items()):
        call = ctx.calls.get(inv.ordinal)
        if inv.caller != ctx.execution_id or inv.cancelled or (call is not None and call.used):
            continue  # (awaited: answered from the journal after a restore, its child goes on)
        cancelled.extend(cancel_invocation(run, inv_id))
        what = f"{'chat' if inv.kind is CallKind.CHAT else 'sub-agent'} {inv.name!r}"
        if ctx.diverged is not None:  # the old code made it; its error says what to do
            log.warning("the call %s of %s, in flight at the restore, was cancelled: %s failed "
                        "with a replay divergence", inv_id, what, ctx.execution_id)
        elif (site := call.site if call is not None else "") not in warned:
            warned.add(site)
            log.warning("the call %s of %s%s was never awaited by action execution %s, which "
                        "ended, so it was cancelled (nobody could read its result); await its "
                        "handle, or cancel it", inv_id, what, f" made at {site}" if site else "",
                        ctx.execution_id)
    return cancelled


def under_cancelled_by(run: RunState, scope: str, ancestor: str) -> bool:
    """Whether invocation ``scope`` runs (directly or not) inside ``ancestor``.

    Returns:
        Whether it does.
    """
    inv = run.invocations.get(scope)
    while inv is not None and inv.caller_scope is not None:
        if inv.caller_scope == ancestor:
            return True
        inv = run.invocations.get(inv.caller_scope)
    return False


def route_at_root(plan: AgentPlan, event_type: str, event_id: str | None = None) -> tuple[
        ActionPlan, ...]:
    """The actions an event of the agent's own flow triggers (the core asks once per type).

    A type that triggers no action is dropped when sent: logged once (per core) at WARNING
    (``missing_trigger_hint``: who sent ``event_id``), since a forgotten ``@action(MyEvent)``
    otherwise shows only as a job that outputs nothing (not ``OutputEvent``, nor a type routed
    to no action on purpose: ``plan.OBSERVED_EVENTS``).

    Returns:
        The actions, in declaration order.
    """
    actions = plan.actions_for(event_type)
    if not actions and event_type != "OutputEvent" and event_type not in plan.actions_by_event:
        log.warning("events of type %r trigger no action of the agent (its actions: %s) and "
                    "are dropped: %s", event_type,
                    ", ".join(n for n in plan.actions if not n.startswith("_")) or "none",
                    missing_trigger_hint(plan, event_type, event_id))
    return actions


def route_in_scope(root: AgentPlan, run: RunState, scope: str, event: Event
                   ) -> tuple[ActionPlan, ...]:
    """The actions ``event`` triggers inside invocation ``scope`` (collecting its outputs).

    Returns:
        The actions to run (none for a failed or cancelled invocation).
    """
    inv = run.invocations.get(scope)
    if inv is None or inv.failed or inv.cancelled:
        return ()  # a failed or cancelled call dispatches no successors
    plan = plan_at(root, inv.plan_path)
    if inv.kind == CallKind.CHAT:
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
    actions = plan.actions_for(event.type)
    if not actions:
        warn_unheard(plan, inv.name, event.type, event.id)
    return actions


def open_invocation(run: RunState, command: StartChat | StartSubagent, caller: str,
                    caller_scope: str | None, env: str | None) -> tuple[str, Event]:
    """Open the invocation a chat or internal sub-agent call starts.

    Args:
        run: the run (the invocation enters ``run.invocations``).
        command: the call's command.
        caller: the calling action execution's id.
        caller_scope: the scope the caller runs in.
        env: the scope whose resources and memory the caller uses.

    Returns:
        The invocation's id and its bootstrap event (for the core to dispatch in it).
    """
    call = command.call
    inv_id = call.call_id
    base_path = run.invocations[env].plan_path if env is not None else []
    bootstrap: Event
    if isinstance(command, StartChat):
        req = command.request
        inv = Invocation(kind=CallKind.CHAT, name=command.model, caller=caller,
                         caller_scope=caller_scope, ordinal=call.ordinal, env=env,
                         plan_path=list(base_path))
        bootstrap = ChatRequestEvent(
            id=f"{inv_id}/b", model=req["model"], messages=req["messages"],
            prompt_args=req["prompt_args"], output_schema=req["output_schema"])
    else:
        inv = Invocation(kind=CallKind.SUBAGENT, name=command.name, caller=caller,
                         caller_scope=caller_scope, ordinal=call.ordinal, env=inv_id,
                         plan_path=[*base_path, command.name],
                         sensory={"_subagent": {"input": to_json_value(
                             command.input, f"input of sub-agent {command.name!r}")}})
        bootstrap = InputEvent(id=f"{inv_id}/b", input=command.input)
    inv.cancelled = under_cancelled(run, caller_scope)
    run.invocations[inv_id] = inv
    return inv_id, bootstrap


def check_result(result: Any, name: str) -> SubagentResult:
    """Check what an external sub-agent returned and put its value in its plain JSON form.

    The caller gets the value's plain JSON form (``to_plain_json``: pydantic models and
    dataclasses become objects, enums their values, datetimes ISO 8601 text...), on the live
    path and after a replay alike. A value with no JSON form (a cycle, a set, a non-finite
    number, one nested too deep to walk) gives a failed result naming the path where it was
    found: a failed delegation, not a failure of the caller.

    Returns:
        The result, its value in plain JSON form.

    Raises:
        TypeError: when ``result`` is not a ``SubagentResult``.
    """
    if not isinstance(result, SubagentResult):
        raise TypeError(f"sub-agent {name!r} returned {type(result).__name__}, "
                        "not a SubagentResult")
    if not result.success:
        return result
    try:
        plain = to_plain_json(result.result, f"result of sub-agent {name!r}")
    except SerializationError as e:
        return SubagentResult.failed(e)
    return result if plain is result.result else result.model_copy(update={"result": plain})


def checked_result(fn: Any, name: str) -> SubagentResult:
    """Run a deferred sub-agent's ``call`` (or reconciler) and check what it returned."""
    return check_result(fn(), name)


def prepare_deferred(run: RunState, ctx: ActionExecution, command: RunDeferred
                     ) -> Callable[[], Any] | None:
    """Prepare the deferred sub-agent call ``command`` of action ``ctx``: what to run.

    A call that starts inside a sub-agent call that was cancelled is cancelled too: its
    request is never issued, as for a deferred call cancelled before its first await (one
    that had started before a restore runs as usual: its request may be out).

    Returns:
        The setup's call (its reconciler, when it had started before a restore), or ``None``
        when its outcome is recorded: cancelled, or what ``prepare`` raised (at the await).
    """
    call = command.call
    rec = ctx.record_of(call)
    started_before = rec is not None and not rec.done
    if not started_before and under_cancelled(run, ctx.scope):
        ctx.settle_unstarted(call, f"cancel:{command.name}",
                             SubagentResult.cancelled_call(command.name))
        return None
    try:
        with not_stepping():  # the setup's own code, as outside an action step
            prepared = command.setup.prepare(
                ActionContext(ctx), command.input, command.session_id, call.call_id)
        _key, fn, reconciler = _prepared(prepared, command.name)
    except BaseException as e:  # noqa: BLE001 - the call's outcome
        unless_stopping(e)  # (a CancelledError of its own too: ``_failures``)
        ctx.record_started(command)
        ctx.record_outcome(call, False, e)
        return None
    ctx.record_started(command)
    return reconciler if (started_before and reconciler is not None) else fn


def _prepared(prepared: Any, name: str) -> tuple[Any, Callable[[], Any], Any]:
    """``prepare``'s ``(key, call, reconciler_or_None)``, checked.

    Returns:
        ``prepared`` itself.

    Raises:
        TypeError: naming the sub-agent, when it is not such a triple.
    """
    if (isinstance(prepared, tuple) and len(prepared) == 3 and callable(prepared[1])
            and (prepared[2] is None or callable(prepared[2]))):
        return prepared
    got = (f"a tuple of {len(prepared)}" if isinstance(prepared, tuple)
           else type(prepared).__name__)
    raise TypeError(f"prepare of sub-agent {name!r} returned {got}, not (key, call, "
                    "reconciler_or_None) with call and reconciler callables")


def polling(run: RunState, ctx: ActionExecution, command: Poll) -> tuple[Any, ...]:
    """The arguments of ``poll_result`` for ``command``, made by action ``ctx``.

    The stop flag becomes the call's ``stop``, set when the sub-agent call the action runs
    in is cancelled (``_waits``); set at once when it already is.

    The deadline of the setup's ``timeout_s`` is recorded in the run's waits (``#poll/<call
    id>``, status ``"polling"``, wall-clock milliseconds) when the poll first starts: a poll
    started again after a restore keeps it, so the timeout counts from the first start, not
    anew from each restore.

    Returns:
        ``(setup, session_id, call_id, name, stop, deadline_ms)``.
    """
    stop = command.call.stop = threading.Event()
    if under_cancelled(run, ctx.scope):
        stop.set()
    call, setup = command.call, command.setup
    cid = POLL_PREFIX + call.call_id
    opened = run.waits.get(cid)
    if opened is None and setup.timeout_s is not None:
        opened = run.waits[cid] = WaitRecord(
            call_id=call.call_id, caller=ctx.execution_id, ordinal=call.ordinal,
            deadline_ms=time.time_ns() // 1_000_000 + math.ceil(setup.timeout_s * 1000),
            timeout_s=setup.timeout_s, status="polling")
    deadline_ms = opened.deadline_ms if opened is not None and setup.timeout_s is not None \
        else None
    return setup, command.session_id, call.call_id, command.name, stop, deadline_ms


def stop_cancelled_polls(run: RunState, live: Iterable[Task]) -> None:
    """Stop the async sub-agent polls of the live actions that run in a cancelled call."""
    for task in live:
        if under_cancelled(run, task.ctx.scope):
            for call in task.ctx.calls.values():
                if call.stop is not None:
                    call.stop.set()


async def poll_result(setup: AsyncSubagentSetup, session_id: str, call_id: str, name: str,
                      stop: threading.Event | None = None,
                      deadline_ms: int | None = None) -> SubagentResult:
    """Poll a remote run until it ends (on the I/O executor), then fetch its result.

    Once ``stop`` is set (the sub-agent call the caller runs in was cancelled), the next
    round sends the run's cancel request instead and ends as cancelled: a run that goes on
    for ever would otherwise keep the cancelled call from completing. Past the setup's
    ``timeout_s`` the run is sent its cancel request too, and the call fails (timed out). A
    cancel request that raises (the remote is down) is logged and named in the failure's
    message; the call still ends cancelled, or timed out, as it would have.

    Args:
        setup: the sub-agent's setup.
        session_id: the run's session id.
        call_id: the caller's durable call (the remote run's id).
        name: the sub-agent's registered name.
        stop: set when the sub-agent call the caller runs in is cancelled.
        deadline_ms: when ``timeout_s`` ends, in wall-clock milliseconds (``polling``
            recorded it when the poll first started); ``None``: ``timeout_s`` from now.

    Returns:
        The fetched result (checked), a failed one for a failed or timed-out run, or a
        cancelled one.

    Raises:
        TypeError: when the status probe returns no ``RunStatus``, or the fetch no
            ``SubagentResult`` (a fault of the setup, as what they raise is).
    """
    deadline: float | None = None  # on the monotonic clock
    unknown_since: float | None = None  # since when the remote says it has no such run
    if deadline_ms is not None:
        deadline = time.monotonic() + (deadline_ms - time.time_ns() / 1e6) / 1000
    elif setup.timeout_s is not None:
        deadline = time.monotonic() + setup.timeout_s
    while True:
        if stop is not None and stop.is_set():
            await _cancel_remote(setup, session_id, call_id, name)
            return SubagentResult.cancelled_call(name)
        status = await asyncio.to_thread(setup.call_query_status, session_id, call_id)
        if not isinstance(status, RunStatus):
            raise TypeError(f"call_query_status of sub-agent {name!r} returned "
                            f"{type(status).__name__}, not a RunStatus")
        if status.state == "completed":
            fetched = await asyncio.to_thread(setup.call_fetch_result, session_id, call_id)
            return check_result(fetched, name)
        if status.state == "failed":
            why = f": {status.error}" if status.error else " (its status gave no reason)"
            return SubagentResult.failed(f"sub-agent {name!r}: the remote run failed{why}")
        unknown_since = _still_unknown(status, unknown_since, setup, session_id, call_id, name)
        wait = setup.status_poll_interval_millis / 1000
        if deadline is not None:  # the last probe is at the deadline
            left = deadline - time.monotonic()
            if left <= 0:
                unsent = await _cancel_remote(setup, session_id, call_id, name)
                return SubagentResult.failed(
                    f"sub-agent {name!r}: the remote run timed out: it had not ended after "
                    f"timeout_s={setup.timeout_s or 0:g} s of polling (counted from its first "
                    "poll, across restores); "
                    + (f"its cancel request failed ({unsent})" if unsent
                       else "it was sent its cancel request"))
            wait = min(wait, left)
        await sleep_without_slot(wait)  # its I/O slot runs other calls between polls


def _still_unknown(status: RunStatus, since: float | None, setup: AsyncSubagentSetup,
                   session_id: str, call_id: str, name: str) -> float | None:
    """Track a polled run the remote says it never started; warn once it has said so long.

    Its submit request was sent and recorded, so a remote that keeps answering
    ``not_started`` has lost the run, or never got it (an unknown call id): polling goes on
    (a queued run may answer so for a while) until ``timeout_s``, or for ever without one,
    and a WARNING after ``NOT_STARTED_WARN_S`` says which run and why the key waits.

    Returns:
        Since when (monotonic) it has answered ``not_started`` without a break (``None``:
        its last answer was another; ``-1.0``: warned already).
    """
    if status.state != "not_started":
        return None
    now = time.monotonic()
    if since is None or since < 0:
        return now if since is None else since
    if now - since < NOT_STARTED_WARN_S:
        return since
    log.warning("sub-agent %r: for %.0f s the remote has answered that run %s#%s was never "
                "started, though its submit request was sent and recorded (a lost run, or an "
                "id it does not know?); still polling it, %s", name, now - since, session_id,
                call_id, f"up to timeout_s={setup.timeout_s:g} s" if setup.timeout_s
                else "for ever: no timeout_s is set")
    return -1.0


async def _cancel_remote(setup: AsyncSubagentSetup, session_id: str, call_id: str,
                         name: str) -> str:
    """Send the run's cancel request (on the I/O executor); a failure is logged, not raised.

    Returns:
        ``""`` when it was sent, else what it raised (type and message, clipped).
    """
    try:
        await asyncio.to_thread(setup.call_cancel_request, session_id, call_id)
    except Exception as e:  # noqa: BLE001 - best effort: the call ends either way
        why = clip(described(e), 500)
        log.warning("sub-agent %r: the cancel request of remote run %s#%s failed: %s",
                    name, session_id, call_id, why)
        return why
    return ""


def invocation_result(inv: Invocation, inv_id: str) -> tuple[bool, Any]:
    """The caller's outcome of a completed invocation: ``(ok, value or exception)``."""
    if inv.kind == CallKind.CHAT:
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
        return True, SubagentResult.failed(f"sub-agent {inv.name!r} failed: {inv.failed}",
                                          traceback=inv.failed_traceback)
    return True, SubagentResult.ok(list(inv.outputs))


def record_for_caller(run: RunState, inv: Invocation, inv_id: str, ok: bool, value: Any
                      ) -> CallRecord | None:
    """Record a completed invocation's outcome as its caller's durable call.

    For a caller that has not reached the call again yet (re-entered after a restore): it
    replays the outcome when it gets there.

    Returns:
        The record written, or ``None`` when the caller finished without awaiting (nobody
        to tell).
    """
    rec = run.inflight.get(inv.caller)
    if rec is None:
        return None
    crec = rec.calls.setdefault(str(inv.ordinal), CallRecord(
        digest="", kind=inv.kind,
        target=inv.name))
    store_outcome(crec, inv_id, ok, value)
    return crec


def subagent_input(name: str, input: Any) -> Any:
    """A sub-agent call's input as the call takes it: a dataclass instance as its fields.

    A dataclass has no stored form the runtime can rebuild it from (a pydantic model has:
    its class is recorded with it), so it goes on as the ``dict`` of its fields in their JSON
    form, as a chat model calling the sub-agent would give it; other inputs as they are.

    Returns:
        The input the call takes.

    Raises:
        SerializationError: naming the sub-agent and the path, for a field with no JSON form.
    """
    if dataclasses.is_dataclass(input) and not isinstance(input, type):
        return to_plain_json(input, f"input of sub-agent {name!r}")
    return input


def resolve_subagent(ctx: ActionExecution, name: str
                     ) -> tuple[SubagentSetup | None, CallKind, str]:
    """The setup of sub-agent ``name`` as ``ctx`` sees it and its call's kind, or why not.

    Args:
        ctx: the submitting action's context.
        name: the ``AGENT`` resource's name.

    Returns:
        ``(setup, kind, "")`` (``SUBAGENT`` for an internal one, ``SUBAGENT_DEFERRED``,
        ``SUBAGENT_RESULT`` for an async one), or ``(None, SUBAGENT_REFUSED, the reason)``:
        an unknown name, a setup that cannot be built, a resource that is not a sub-agent
        setup, or one of no known kind.
    """
    refused = CallKind.SUBAGENT_REFUSED
    try:
        setup = ctx.get_resource(name, ResourceType.AGENT)
    except ResourceNotFoundError as e:
        return None, refused, f"sub-agent {name!r}: {e}"
    except Exception as e:  # noqa: BLE001 - a setup that cannot be built
        return None, refused, f"sub-agent {name!r} cannot be built: {described(e)}"
    if not isinstance(setup, SubagentSetup):
        return None, refused, (f"resource {name!r} is a {type(setup).__name__}, not a "
                               "sub-agent setup")
    if isinstance(setup, InternalSubagent):
        return setup, CallKind.SUBAGENT, ""
    if isinstance(setup, DeferredSubagentSetup):
        return setup, CallKind.SUBAGENT_DEFERRED, ""
    if isinstance(setup, AsyncSubagentSetup):
        return setup, CallKind.SUBAGENT_RESULT, ""
    return None, refused, (f"sub-agent {name!r}: {type(setup).__name__} is neither internal, "
                           "deferred nor async")
