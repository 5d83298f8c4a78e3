"""Replay across upgrades: patch markers, strict replay, and calls a replay no longer makes.

- ``patched(ctx, change_id)`` is ``RunnerContext.patched``: a versioning marker kept in the
  action execution's state entry beside its call records (under ``patch:<change id>``, not
  at a call ordinal, so adding or removing the marker never shifts the identity of the calls
  around it). A new execution, or a replay at the point where its records end, records the
  marker as taken (``True``); a replay of an execution recorded before the patch existed
  (it has records beyond this point, none of them the marker) records it as not taken
  (``False``). The decision is recorded, so every later ``patched`` of that change in the
  execution, and every later replay, gives the same answer. With a journal, the marker is
  journaled too and consulted at recovery, like a call's outcome.
- Strict replay (``Agent(replay="strict")`` or ``durable_execute(..., strict=True)``): a call
  replayed with other arguments than recorded is a ``ReplayDivergenceError`` instead of a
  warning, and so is a re-entered execution that ends before making all its recorded calls.
- ``restored_event``: the triggering event of an execution re-entered after a restore, as
  the new code rebuilds it; an event its class no longer accepts (a field added, renamed or
  retyped, the class gone), or one the action is no longer triggered by, fails that
  execution with a ``ReplayDivergenceError`` naming the event and the change, before any of
  the action's code runs.
- ``unreached_calls``: a re-entered execution that completed with recorded calls it never
  reached (the code now makes fewer calls) is flagged: a warning, a finding (see
  ``CallLedger.finding``) and, when strict, a ``ReplayDivergenceError``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, NoReturn

from ...api import ChatResponse, Event, ReplayDivergenceError, UsageError
from ...api.internal import EVENT_CLASS_KEY, mask_secrets, shown_key
from ...plan import ActionPlan, AgentPlan, FunctionRef
from .._failures import with_recorded
from .._serde import from_json_value
from ._binding import code_changed, shape_parts
from ._call_changes import changed_callees, changed_defaults, default_text
from ._order import moved_call, reordered_by_nested, reordered_call, replayed_elsewhere, retyped
from ._outcomes import rebuild_exception
from ._state import CallKind, CallRecord

if TYPE_CHECKING:
    from ..context._action_context import ActionContext
    from ..context._calls import DurableCall
    from ._execution import ActionExecution

__all__ = ["PATCH_PREFIX", "is_strict", "patched", "check_arguments", "changed_arguments",
           "recorded_to_missing", "started_tool_unfit",
           "unreached_calls", "check_unreached", "removed_action", "action_or_removed",
           "restored_event", "stand_in_event", "missing_subagent", "replayed_outcome",
           "unrebuildable_outcome"]

log = logging.getLogger("flink_agents_py.runtime")

PATCH_PREFIX = "patch:"
"""The prefix of a patch marker's key in an execution's call records (``patch:<change id>``)."""


def is_strict(ctx: ActionExecution, strict: bool | None) -> bool:
    """Whether a call of ``ctx``'s action replays strictly.

    Args:
        ctx: the action's context (its plan's ``config["replay"]`` is the agent's mode).
        strict: the call's own ``strict=`` argument (``None``: the agent's mode).

    Returns:
        Whether changed arguments are a divergence.

    Raises:
        UsageError: when ``strict`` is neither ``None`` nor a ``bool``.
    """
    if strict is None:
        return ctx.plan.config.get("replay") == "strict"
    if not isinstance(strict, bool):
        raise UsageError(f"durable_execute(..., strict=...) takes True, False or None, got "
                         f"{strict!r} (in action execution {ctx.execution_id})")
    return strict


def patched(ctx: ActionExecution, change_id: str, *, deprecated: bool = False) -> bool:
    """``RunnerContext.patched`` (and, ``deprecated``, ``deprecate_patch``) for ``ctx``.

    Args:
        ctx: the action's context.
        change_id: the change's name.
        deprecated: the old branch is gone: a replay of an execution recorded before the
            patch is then a divergence.

    Returns:
        Whether to take the new branch.

    Raises:
        UsageError: when ``change_id`` is not a non-empty string.
        ReplayDivergenceError: (``deprecated``) when the execution took the old branch.
    """
    what = "deprecate_patch" if deprecated else "patched"
    if not isinstance(change_id, str) or not change_id:
        raise UsageError(f"ctx.{what}(change_id) takes a non-empty string naming the change, "
                         f"got {change_id!r} (in action execution {ctx.execution_id})")
    ctx.check_live(f"ctx.{what}")
    if ctx.diverged is not None:
        raise ctx.diverged
    calls = ctx._record.calls
    slot = PATCH_PREFIX + change_id
    marker_id = f"{ctx.execution_id}/{slot}"
    rec = calls.get(slot)
    if rec is None:
        journaled = ctx.ledger.lookup(ctx.key, marker_id)
        if journaled is not None and journaled.kind is CallKind.PATCH:
            rec = calls[slot] = journaled
    if rec is None:
        taken = not _recorded_beyond(ctx, calls)
        rec = calls[slot] = CallRecord(digest="", kind=CallKind.PATCH,
                                       target=change_id, done=True, ok=True, value=taken)
        if ctx.ledger.journal is not None:
            ctx.ledger.journal.append(ctx.key, marker_id, rec)
    if deprecated and rec.value is not True:
        ctx._diverge(ReplayDivergenceError(
            marker_id, ctx._record.action, (CallKind.PATCH.value, change_id),
            (CallKind.PATCH.value, change_id),
            detail=f"the execution was recorded before patch {change_id!r} and took its old "
                   "branch, which the code no longer has (ctx.deprecate_patch): deploy it only "
                   "once no run recorded before the patch is in flight"))
    return rec.value is True


def _recorded_beyond(ctx: ActionExecution, calls: dict[str, CallRecord]) -> bool:
    """Whether the execution has records at or after its next call ordinal (a replay)."""
    nxt = ctx._next_ordinal
    for k in calls:
        if k.isdigit() and int(k) >= nxt:
            return True
    journaled = ctx.ledger.lookup(ctx.key, f"{ctx.execution_id}/c{nxt}")
    return journaled is not None and journaled.kind is not CallKind.PATCH


def check_arguments(ctx: ActionExecution, call: DurableCall, rec: CallRecord,
                    strict: bool | None = None, *, reruns: bool = False) -> None:
    """Compare ``call`` with the record at its identity (done, or started only).

    Other arguments than recorded are a warning, or (strict) a divergence; the arguments
    of another recorded call of the same kind and target are a divergence (the calls
    came in another order: its outcome, or its started attempt, is that other call's).

    Args:
        ctx: the action's context.
        call: the call being made.
        rec: the record at its identity.
        strict: the call's ``strict=`` (``None``: the agent's mode).
        reruns: ``rec`` holds no outcome and the call runs again (not answered from
            the record, nor from the open invocation the record started).

    Raises:
        ReplayDivergenceError: as said.
    """
    record = ctx._record
    if record.diverged:  # a sibling's replay found this execution runs another's code
        ctx._diverge(ReplayDivergenceError(call.call_id, record.action, (
            rec.kind.value if rec.kind else "", rec.target or ""), (call.kind.value,
                                                                     call.target),
            detail=record.diverged))
    recoded = code_changed(rec.shape, call.shape)  # a lambda's code: not in its digest
    defaults = changed_defaults(shape_parts(rec.shape)[5], shape_parts(call.shape)[5])
    changed = bool(rec.digest) and rec.digest != call.digest or recoded
    err, kinds = replayed_elsewhere(ctx, call, rec, reruns) if changed \
        and rec.digest != call.digest else None, None
    err = err or (reordered_call if changed else reordered_by_nested)(
        call, rec, record.calls, ctx.execution_id, record.action)
    if not changed and err is None:  # (one digest: tuples where lists were recorded?)
        err, kinds = retyped(call, rec, record.calls, ctx.execution_id, record.action)
    if err is None and changed and ctx.run is not None:  # another action's recorded call
        err = moved_call(call, rec, ctx.run.inflight, ctx.execution_id)
    if err is not None:  # not a harmless change: another call's outcome
        ctx._diverge(err)
    if rec.callees is not None and call.callees is not None and rec.callees != call.callees:
        changed_callees(ctx, call, rec)
    if changed and shape_parts(rec.shape)[0] and shape_parts(call.shape)[0] and not recoded:
        (was_bound, was_values, *_, was_all), (now_bound, now_values, *_, now_all) = (
            shape_parts(rec.shape), shape_parts(call.shape))
        if was_bound == now_bound and not defaults or was_all == now_all:  # (or a default
            return  # passed as it was) the same values for the same parameters (keyword form...)
        if was_values == now_values and was_bound != now_bound:  # bound to other parameters
            ctx._diverge(ReplayDivergenceError(
                call.call_id, ctx._record.action, (rec.kind.value if rec.kind else "",
                                                   rec.target or ""),
                (call.kind.value, call.target),
                detail=f"the {call.kind.value} call {call.target!r} is made with the argument "
                       "values recorded, bound to other parameters of the function (e.g. two "
                       "arguments swapped): the recorded outcome is another call's"))
    if changed or defaults or kinds:
        changed_arguments(ctx, call, rec, is_strict(ctx, strict), started=reruns,
                          recoded=recoded and rec.digest == call.digest, defaults=defaults,
                          retyped=kinds)


def changed_arguments(ctx: ActionExecution, call: DurableCall, rec: CallRecord,
                      strict: bool, *, started: bool = False, recoded: bool = False,
                      defaults: list[tuple[str, str]] | None = None,
                      retyped: str | None = None) -> None:
    """A call replayed with other arguments than recorded: warn, or (strict) diverge.

    Args:
        ctx: the action's context.
        call: the call being replayed.
        rec: its record (another digest).
        strict: whether the call replays strictly.
        started: the record holds no outcome, only that the call had started before the
            restore (with the recorded arguments): the call runs again with its new ones.
        recoded: the arguments and what the callable binds are those recorded, but its
            code (a lambda's, a nested function's) does something else with them.
        defaults: the parameters whose default the call runs with otherwise than recorded
            (``_call_changes.changed_defaults``: changed, added or removed).
        retyped: how the arguments' tuples and lists differ from those recorded, their JSON
            forms alike (``_order.retyped``).

    Raises:
        ReplayDivergenceError: when ``strict``.
    """
    kind, target = rec.kind.value if rec.kind else "", rec.target or ""
    what = (f"the same arguments and bound values as recorded, but its code changed (code "
            f"{shape_parts(call.shape)[2]}, recorded {shape_parts(rec.shape)[2]})"
            if recoded else f"other arguments than recorded (digest {call.digest}, recorded "
            f"{rec.digest})")
    also = ""
    if retyped:
        recoded, what = True, retyped + (f", and {default_text(defaults)}" if defaults else "")
    elif defaults and rec.digest == call.digest and not recoded:
        recoded, what = True, f"the arguments recorded, but {default_text(defaults)}"
    elif defaults:
        also = f", and {default_text(defaults)}"
        what += also
    if strict:
        ctx._diverge(ReplayDivergenceError(
            call.call_id, ctx._record.action, (kind, target), (call.kind.value, call.target),
            detail=f"strict replay: the {call.kind.value} call {call.target!r} is made with "
                   f"{what}; branch with ctx.patched(...) to change a call for new runs only"))
    if recoded:
        message = (f"durable call {call.call_id} ({call.target}) is made with {what}: "
                   + ("it had started before the restore and runs again with its new code"
                      if started else "it replays the outcome recorded for the old code"))
    elif started:
        message = (f"durable call {call.call_id} had started with other arguments before the "
                   f"restore (digest {rec.digest}) and runs again with its new ones (digest "
                   f"{call.digest}); what the started attempt did is not reconciled with them")
    else:
        message = (f"durable call {call.call_id} ({call.kind.value} {call.target}) replays a "
                   f"recorded outcome but its arguments changed (digest {call.digest}, recorded "
                   f"{rec.digest}){also}; replay goes by identity")
    message += f" [key {shown_key(ctx.key)}, action {ctx._record.action!r}]"
    log.warning("%s", message)
    ctx.ledger.finding(ctx.key, ctx.execution_id, "arguments_changed", message)


def unreached_calls(ctx: ActionExecution) -> list[tuple[str, CallRecord]]:
    """The recorded calls of ``ctx``'s execution that its run did not make, in order.

    Records in the execution's state entry, then those the journal (if any) holds for the
    ordinals that follow (an outcome journaled after the last checkpoint).

    Returns:
        ``(call id, record)`` for each record at or after the next call ordinal.
    """
    nxt = ctx._next_ordinal
    found = sorted((int(k), r) for k, r in ctx._record.calls.items()
                   if k.isdigit() and int(k) >= nxt)
    if ctx.ledger.journal is not None:
        ordinal = found[-1][0] + 1 if found else nxt
        while len(found) < _MAX_UNREACHED:
            rec = ctx.ledger.lookup(ctx.key, f"{ctx.execution_id}/c{ordinal}")
            if rec is None:
                break
            found.append((ordinal, rec))
            ordinal += 1
    return [(f"{ctx.execution_id}/c{n}", r) for n, r in found]


_MAX_UNREACHED = 1000
"""The most journaled calls ``unreached_calls`` looks up beyond the state's records."""


def check_unreached(ctx: ActionExecution) -> ReplayDivergenceError | None:
    """Flag an execution that completed without making all its recorded calls.

    Logs a warning and records a finding naming the calls; in strict mode (the agent's)
    returns the error that fails the action.

    Returns:
        The error, or ``None``.
    """
    missing = unreached_calls(ctx)
    if not missing:
        return None
    names = ", ".join(f"{cid} ({r.kind.value if r.kind else 'call'} {r.target or '?'!r})"
                      for cid, r in missing)
    message = (f"replay of action {ctx._record.action!r} ({ctx.execution_id}) completed with "
               f"fewer durable calls than were recorded: {names} not reached")
    log.warning("%s", message)
    ctx.ledger.finding(ctx.key, ctx.execution_id, "unreached_calls", message)
    if not is_strict(ctx, None):
        return None
    cid, rec = missing[0]
    return ReplayDivergenceError(
        cid, ctx._record.action, (rec.kind.value if rec.kind else "", rec.target or ""),
        ("none", ""), detail=f"strict replay: the action completed without making recorded "
                             f"calls ({names})")


def removed_action(event: Any, user: ActionContext) -> None:
    """The stand-in of an in-flight action the restored plan no longer has: a divergence.

    A run restored from a checkpoint taken by older code re-enters its in-flight actions by
    name; when the new code removed (or renamed) one, that execution fails with this error
    (on the error output, with its key and position) and other keys keep running.

    Raises:
        ReplayDivergenceError: always, naming the action, the key and the fix.
    """
    ctx = user._execution  # called as a user action is: with the context, not the execution
    name = ctx._record.action
    ctx._diverge(ReplayDivergenceError(
        ctx.execution_id, name, ("action", name), ("none", ""),
        detail=f"key {shown_key(ctx.key)} was restored with action {name!r} in flight "
               f"({ctx.execution_id}), and the new code has no action of that name: keep "
               f"the action registered under the name {name!r} (deprecated, e.g. delegating "
               "to the new code, with changes guarded by ctx.patched('change-id')) until no "
               "run in flight uses it"))


def action_or_removed(actions: dict[str, ActionPlan], name: str) -> ActionPlan:
    """The plan's action ``name``, or a stand-in that fails as ``removed_action`` does."""
    found = actions.get(name)
    if found is not None:
        return found
    return ActionPlan(name=name, function=FunctionRef.of(removed_action), triggers=())


def restored_event(ctx: ActionExecution, action: ActionPlan, builtin: bool
                   ) -> tuple[Event, ReplayDivergenceError | None]:
    """The triggering event of ``ctx``'s execution, re-entered after a restore.

    The event is rebuilt from the JSON form the old code recorded. When the new code cannot
    rebuild it (its class gained a required field, lost or renamed one, changed a field's
    type, or is gone), or when the new code's action is no longer triggered by its type, the
    execution cannot replay: it fails alone, with the returned error, and the action's code
    does not run. Other keys, and the key's later inputs, go on.

    Args:
        ctx: the re-entered execution.
        action: the new code's action of that name (or the stand-in of a removed one).
        builtin: the action is one of the runtime's own (routed by the runtime, not by its
            triggers: only the event is checked).

    Returns:
        The event, and ``None``; or a stand-in event (only its id and type) and the
        ``ReplayDivergenceError`` that fails the execution (counted and logged here).
    """
    from ..core._results import event_of  # (not at import: core imports the recorder)

    data = ctx._record.event
    etype = str(data.get("type", "")) if isinstance(data, dict) else ""
    tag = data.get(EVENT_CLASS_KEY) if isinstance(data, dict) else None
    where = (f"key {shown_key(ctx.key)} was restored with action {action.name!r} in flight "
             f"({ctx.execution_id}), triggered by an event of type {etype!r}"
             + (f" (class {tag!r})" if tag else "") + " that the old code recorded")
    try:
        event = event_of(data)
    except Exception as e:  # noqa: BLE001 - e.g. a pydantic ValidationError: what changed
        detail = (f"{where}, and the new code cannot rebuild it: {type(e).__name__}: "
                  f"{_one_line(e)}. Keep the event's class under its name, with its old "
                  "fields (new ones optional, with defaults), until no run in flight uses it")
        return stand_in_event(data), _refuse(ctx, action.name, ("event", etype),
                                             ("action", action.name), detail)
    if builtin or action.function.path == _REMOVED or etype in action.triggers:
        return event, None
    now = ", ".join(repr(t) for t in action.triggers) or "no event type"
    detail = (f"{where}, and the new code's action {action.name!r} is triggered by {now}, "
              f"not {etype!r}. Keep {etype!r} among its triggers (@action(..., {etype})) "
              "until no run in flight uses it")
    return event, _refuse(ctx, action.name, ("event", etype), ("action", action.name), detail)


_REMOVED = FunctionRef.of(removed_action).path


def _one_line(error: BaseException, limit: int = 600) -> str:
    lines = [ln for ln in str(error).splitlines()
             if not ln.strip().startswith("For further information visit")]  # pydantic's
    text = mask_secrets(" ".join(" ".join(lines).split()))  # masked whole, then cut
    return text if len(text) <= limit else f"{text[:limit]}..."


def stand_in_event(data: Any) -> Event:
    """An event holding only the id and type of the stored event ``data``.

    What a restored execution that cannot replay holds in place of its event: no action
    gets it, only the failure's report.

    Returns:
        The event (built without validating).
    """
    event_id = str(data.get("id", "")) if isinstance(data, dict) else ""
    etype = str(data.get("type", "")) if isinstance(data, dict) else ""
    return Event.model_construct(id=event_id, type=etype or "Event", attributes={})


def missing_subagent(ctx: ActionExecution, path: tuple[str, ...], root: AgentPlan
                     ) -> ReplayDivergenceError:
    """The divergence of an execution restored inside an internal sub-agent that is gone.

    The run was in a call of the internal sub-agent at ``path`` (names from the agent's
    plan down) when the checkpoint was taken, and the new code has no internal sub-agent
    there (renamed, removed, or no longer internal). The execution fails alone (its call
    fails for its caller) instead of the restore failing the job.

    Args:
        ctx: the restored execution.
        path: the sub-agent names from the root plan to the plan it ran in.
        root: the new code's plan.

    Returns:
        The error (counted and logged here).
    """
    plan, missing = root, path[0]
    for name in path:
        if name not in plan.subagents:
            missing = name
            break
        plan = plan.subagents[name]
    now = ", ".join(repr(n) for n in plan.subagents) or "none"
    return _refuse(ctx, ctx._record.action, ("subagent", missing), (
        "none", ""), detail=(
        f"key {shown_key(ctx.key)} was restored with action {ctx._record.action!r} in flight "
        f"({ctx.execution_id}) inside a call of the internal sub-agent {missing!r} (path "
        f"{'/'.join(path)}), and the new code has no internal sub-agent of that name (its "
        f"internal sub-agents there: {now}): keep it registered under the name {missing!r} "
        "until no run in flight calls it"))


def _refuse(ctx: ActionExecution, name: str, recorded: tuple[str, str],
            current: tuple[str, str], detail: str) -> ReplayDivergenceError:
    try:
        ctx._diverge(ReplayDivergenceError(ctx.execution_id, name, recorded, current,
                                           detail=detail))
    except ReplayDivergenceError as e:
        return e
    raise AssertionError("unreachable")  # pragma: no cover


def replayed_outcome(ctx: ActionExecution, call: DurableCall, rec: CallRecord) -> Any:
    """The outcome recorded for ``call``, rebuilt for the new code: what a replay hands over.

    The result (or the exception to raise), its pydantic models rebuilt from their recorded
    classes. For a chat with an ``output_schema`` class made with other arguments than
    recorded (its schema is one of them), the recorded structured output must also fit the
    class the new code asks for: the future types it so when awaited, and a
    ``ChatResponseError`` there would reach the action, which may catch it and go on without
    the recorded answer. (Made with the recorded arguments, it is left to the future: what
    the live path did.)

    Args:
        ctx: the replaying execution.
        call: the call being replayed.
        rec: its record (done).

    Returns:
        The result, or the exception the call raised.

    Raises:
        ReplayDivergenceError: when the recorded outcome no longer fits the new code
            (``unrebuildable_outcome``).
    """
    try:  # a stored model the new code cannot rebuild (its class changed): a divergence
        outcome = from_json_value(rec.value) if rec.ok else \
            with_recorded(rebuild_exception(rec), rec.traceback)
    except Exception as e:  # noqa: BLE001 - the recorded value no longer fits the code
        unrebuildable_outcome(ctx, call, rec, e)
    schema = getattr(call, "schema_cls", None)  # a ``ChatFuture``'s output schema class
    if schema is not None and rec.digest and rec.digest != call.digest \
            and isinstance(outcome, ChatResponse) and isinstance(outcome.structured, dict):
        try:
            schema.model_validate(outcome.structured)
        except Exception as e:  # noqa: BLE001 - e.g. a ValidationError: what changed
            unrebuildable_outcome(ctx, call, rec, e, what=(
                f"structured output recorded for the chat call {call.target!r} does not fit "
                f"the output_schema class {schema.__name__} the new code asks for"))
    return outcome


def unrebuildable_outcome(ctx: ActionExecution, call: DurableCall, rec: CallRecord,
                          error: BaseException, what: str | None = None) -> NoReturn:
    """Fail a replay whose recorded outcome the new code cannot rebuild: a divergence.

    A durable call's result (or raised exception) is recorded in its JSON form, with the
    class of each pydantic model in it. The live path checks that form rebuilds, so when a
    replay cannot rebuild it, the code changed: the model's class gained a required field,
    lost, renamed or retyped one, or is gone. Handing over something else (or raising the
    rebuild's error into the action, which may catch it and go on) would be a wrong answer.

    Args:
        ctx: the replaying execution.
        call: the call being replayed.
        rec: its record.
        error: what rebuilding the outcome raised.
        what: what does not fit, when not a stored model (the message says so instead).

    Raises:
        ReplayDivergenceError: always, naming the call, its target, and what failed.
    """
    kind, target = rec.kind.value if rec.kind else call.kind.value, rec.target or call.target
    if what is None:
        outcome = "result" if rec.ok else f"failure ({rec.error_type})"
        what = (f"the {outcome} recorded for the {kind} call {target!r} holds a value the "
                "new code cannot rebuild")
        cause = "a stored model's class changed or is gone"
    else:
        what, cause = f"the {what}", "the class changed"
    ctx._diverge(ReplayDivergenceError(
        call.call_id, ctx._record.action, (kind, target), (call.kind.value, call.target),
        detail=f"key {shown_key(ctx.key)}: {what} ({type(error).__name__}: {_one_line(error)}); "
               f"{cause}: keep it under its name, with its old fields (new ones optional, "
               "with defaults), until no run in flight recorded it"))



def recorded_to_missing(ctx: ActionExecution, names: set[str], missing: str) -> None:
    """Fail a tool round whose recorded call, at the next identity, went to ``names``.

    A chat's tool round re-entered after a restore follows the model turn the old code
    recorded: it may ask for a tool (or offered sub-agent) that the new code renamed or
    removed. The new code refuses such a request without a durable call, so when no later
    call of the round takes the old call's identity (where another call would diverge as
    made to another target), its recorded outcome, or its started attempt, would be
    dropped with a warning only. Called once the round has made its calls.

    Args:
        ctx: the tool round's execution.
        names: the tool and sub-agent names the round refused as unknown.
        missing: what the new code lacks, for the error (``no tool named 'x' ...``).

    Raises:
        ReplayDivergenceError: when the record at the next identity is a tool or sub-agent
            call to one of ``names``.
    """
    nxt = ctx._next_ordinal
    call_id = f"{ctx.execution_id}/c{nxt}"
    rec = ctx._record.calls.get(str(nxt)) or ctx.ledger.lookup(ctx.key, call_id)
    if rec is None or rec.kind is None or rec.kind is CallKind.PATCH or rec.target not in names:
        return
    state = "is recorded" if rec.done else \
        "had started before the restore (its outcome was recorded nowhere)"
    ctx._diverge(ReplayDivergenceError(
        call_id, ctx._record.action, (rec.kind.value, rec.target or ""), ("none", ""),
        detail=f"recorded {rec.kind.value} {rec.target!r}, now calling none: the call {state}, "
               f"and the new code has {missing}. Keep {rec.target!r} registered under that "
               "name until no run in flight uses it"))


def started_tool_unfit(ctx: ActionExecution, tool: Any, name: str,
                       arguments: dict[str, Any]) -> None:
    """Fail a tool round whose call had started, when the new tool refuses its arguments.

    A chat's tool round re-entered after a restore follows the model turn the old code
    recorded, with the arguments it gave for the old tool's parameters. When the call at the
    next identity had started before the restore (its outcome recorded nowhere) and the new
    code's tool of that name no longer accepts them (a parameter renamed, retyped, made
    required), running it again only tells the model they do not fit: the started call,
    and whatever it did, would be dropped with a warning, as for a renamed tool.

    Args:
        ctx: the tool round's execution.
        tool: the new code's tool (``FunctionTool``).
        name: the tool's name in the model turn.
        arguments: the arguments the recorded model turn gave.

    Raises:
        ReplayDivergenceError: when the record at the next identity is a started call of
            this tool and ``tool.checked_arguments(arguments)`` refuses them.
    """
    nxt = ctx._next_ordinal
    call_id = f"{ctx.execution_id}/c{nxt}"
    rec = ctx._record.calls.get(str(nxt)) or ctx.ledger.lookup(ctx.key, call_id)
    checked = getattr(tool, "checked_arguments", None)
    if rec is None or rec.done or rec.kind is not CallKind.TOOL or rec.target != name \
            or checked is None:
        return
    try:
        checked(arguments)
    except ValueError as e:
        ctx._diverge(ReplayDivergenceError(
            call_id, ctx._record.action, (rec.kind.value, name), (CallKind.TOOL.value, name),
            detail=f"the call of tool {name!r} had started before the restore (its outcome "
                   f"was recorded nowhere) with arguments the new code's tool refuses "
                   f"({_one_line(e)}): "
                   "running it again would drop the started call. Keep the tool's old "
                   "parameters (add new ones as optional) until no run in flight uses them"))
