"""What the core checks and applies when an action execution completes.

Structured concurrency: a durable call an action started (``durable_execute_async``, a
deferred sub-agent call) belongs to the action execution, as a task belongs to an asyncio
``TaskGroup``. An action that returns (or raises) while such a call still runs is not
finished: the core finishes it once every call it started has its outcome recorded, so no
started call is left running past its run, none is lost with a crash after the run ended,
and a restore re-enters the action, which starts it again (or answers it from its record).
Chats and internal sub-agent calls are held by the run itself (their invocations), lazy
calls never awaited never start.

At completion the core also checks (see ``completion_error``): lazy calls, waits and sleeps
never awaited (``_calls.unawaited``: a warning naming the line that made each, once per
line), calls a re-entered execution no longer made (``_versioning.check_unreached``), and
then applies the memory writes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from ...api import Budget, CallLimitError, EventChainLimitError, OutputEvent, ReplayDivergenceError
from ...api.internal import shown_key
from .._failures import FailureLog, error_text, failure_text, redact_text, reported_error
from .._spend import drop_ended_spends
from .._terminal import log_text
from ..context._calls import unawaited, unawaited_effect
from ..context._memory import apply_merges, apply_writes, priors
from ..recorder._state import CallKind, InflightAction, KeyState, RunState
from ..recorder._versioning import check_unreached
from ._commands import Poll
from ._invocation_end import env_of
from ._results import ErrorRecord, input_record

if TYPE_CHECKING:
    from ..context._calls import DurableCall
    from ..recorder._execution import ActionExecution
    from ._tasks import Step, Task

__all__ = ["unfinished_calls", "cancel_unpolled", "completion_error", "commit_memory",
           "commit_spend", "report_failure", "emit_output"]

log = logging.getLogger("flink_agents_py.runtime")

def unfinished_calls(ctx: ActionExecution) -> list[DurableCall]:
    """The calls ``ctx``'s action started whose outcome is not recorded yet.

    Returns:
        The calls handed to the I/O executor (a chat's or an internal sub-agent's work is
        the run's own, and a lazy call never awaited never started).
    """
    return [c for c in ctx.calls.values() if c.running]


def cancel_unpolled(ctx: ActionExecution, warned: set[str]) -> bool:
    """Cancel the async sub-agent runs ``ctx``'s action, which ended, submitted and never awaited.

    An async sub-agent's remote run starts at submit; it is polled only when its handle is
    awaited, and a handle is valid only within the action execution that submitted it. So
    once the action returned or raised, nobody can read the run's result: as an internal
    sub-agent's call left behind (``_subgraph.cancel_left_behind``), the run does not outlive
    the action. It gets its cancel request (one durable call, as ``handle.cancel()`` makes;
    the action finishes once it is recorded), and a WARNING names the line that submitted it
    (once per line, in ``warned``). The run's own call stays unstarted, so a re-entered action
    that ends the same way sends (or replays) the same cancel request.

    Returns:
        Whether a cancel request was made (its command is queued on ``ctx``).
    """
    made = False
    for call in list(ctx.calls.values()):
        poll = call.start
        if call.kind is not CallKind.SUBAGENT_RESULT or call.used or call.done \
                or not isinstance(poll, Poll):
            continue
        call.used = True  # dealt with: not warned about again, nor cancelled twice
        ctx.execute_as(CallKind.SUBAGENT_CANCEL, poll.name, poll.setup.call_cancel_request,
                       (poll.session_id, call.call_id),
                       digest_name=f"{CallKind.SUBAGENT_CANCEL.value}:{poll.name}")
        made = True
        if call.site not in warned:
            warned.add(call.site)
            log.warning("the call %s of async sub-agent %r made at %s was never awaited by "
                        "action execution %s, which ended, so its remote run was sent its "
                        "cancel request (nobody could read its result); await its handle, or "
                        "cancel it", call.call_id, poll.name, call.site or "?",
                        ctx.execution_id)
    return made


def completion_error(ctx: ActionExecution, reentered: bool, warned: set[str]
                     ) -> BaseException | None:
    """Check a completed action execution; the error that fails it, if any.

    Logs a warning for each lazy call, wait or sleep never awaited (``unawaited``; once per
    line of code in ``warned``) and for each started call never awaited that failed; for a
    re-entered execution, flags the recorded calls it did not reach (``check_unreached``).

    Args:
        ctx: the action's context.
        reentered: the execution was re-entered after a restore (one that replayed a call
            from the journal is checked too).
        warned: the ``file:line`` sites already warned about (updated).

    Returns:
        A ``ReplayDivergenceError`` in strict mode when recorded calls were not reached, or
        ``None``.
    """
    for call in ctx.calls.values():
        if call.used:  # awaited (or its result asked for): nothing to warn about
            continue
        made = unawaited(call)
        if made and call.site:
            if call.site not in warned:
                warned.add(call.site)
                log.warning(
                    "durable call %s (%s %r) made at %s was never awaited, %s; await it, or "
                    "remove it", call.call_id, call.kind.value, call.target, call.site,
                    unawaited_effect(made))
        elif call.done and not call.ok and not call.used and not call.replayed:
            log.warning("durable call %s (%s %r) was never awaited and failed: %s: %s; its "
                        "failure is recorded, the action is not failed by it",
                        call.call_id, call.kind.value, call.target,
                        type(call.value).__name__, call.value)
    if reentered or (ctx.ledger.journal is not None
                     and any(c.replayed for c in ctx.calls.values())):
        return check_unreached(ctx)
    return None


def commit_memory(ctx: ActionExecution, state: KeyState, run: RunState,
                  windows: dict[str, Budget] | None = None) -> None:
    """Apply the completed action's short-term and sensory memory writes, in order.

    Actions of the same scope still in flight that have used memory get what undoes the
    writes (``InflightAction.memory_undo``): re-executed after a restore, they read what
    they read before these writes, not the writes. Then its merges into the key's short-term
    memory (``ActionExecution.key_merges``: a budget's spend), from the sub-agents' actions
    too, on what is committed by then, and the key's spends whose windows ended go
    (``windows``: the plan's windowed budgets, see ``_spend.spend_windows``).
    """
    view = ctx.short_term_view  # (``short_term_writes`` and ``sensory_writes`` inline)
    writes = view.writes if view is not None else None
    view = ctx.sensory_view
    sensory_writes = view.writes if view is not None else None
    merges = ctx.key_merges
    if not writes and not sensory_writes and not merges:
        return
    inflight = run.inflight
    readers = [r for r in inflight.values()
               if r.memory_ops and env_of(run, r.scope) == ctx.env] if inflight else []
    if writes and ctx.env is not None:
        tree = run.invocations[ctx.env].memory
        if readers:
            _note_undo(readers, "short_term_memory", tree, writes)
        apply_writes(tree, writes)
    if (writes and ctx.env is None) or merges:
        tree = state.memory  # the key's memory: given back, so a host sees the change
        if writes and ctx.env is None:
            if readers:
                _note_undo(readers, "short_term_memory", tree, writes)
            apply_writes(tree, writes)
        if merges:  # a budget's spend: and the key's spends whose windows ended go
            apply_merges(tree, merges)
            drop_ended_spends(tree, windows)
        state.memory = tree
    if sensory_writes:
        tree = run.sensory if ctx.env is None else run.invocations[ctx.env].sensory
        if readers:
            _note_undo(readers, "sensory_memory", tree, sensory_writes)
        apply_writes(tree, sensory_writes)


def commit_spend(ctx: ActionExecution, state: KeyState,
                 windows: dict[str, Budget] | None = None) -> None:
    """Merge the spend of the model calls ``ctx``'s action had answered into the key's memory.

    For an action that did not complete: it failed (it raised after its model call was
    answered, its event was refused by the chain limit, a replay diverged) or its run was
    given up. Its memory writes are dropped, but the money its answered calls spent was
    spent: before, the spend reached the key's budget entry only through ``commit_memory``
    (on success), so a restore, or the in-process ledger dropping the key, forgot it, and an
    input that made each chat's action fail after its call spent without limit. Each call's
    spend is merged once: it is in ``ctx.key_merges`` once for the execution that received
    its answer, the execution is finished here for good (a failure is not retried), and a
    restore from a snapshot taken before this point re-executes the action, whose replayed
    call adds its spend to that execution's merges instead.

    Args:
        ctx: the action's context (its ``key_merges``).
        state: the key's state (its memory gets the merges).
        windows: the plan's windowed budgets (``_spend.spend_windows``).
    """
    merges = ctx.key_merges
    if not merges:
        return
    tree = state.memory
    apply_merges(tree, merges)
    drop_ended_spends(tree, windows)
    state.memory = tree
    ctx.key_merges = []  # counted: not merged again by whoever else finishes the execution


def _note_undo(readers: list[InflightAction], memory: str, tree: dict[str, Any],
               writes: list[tuple[list[str], Any]]) -> None:
    """Give each in-flight reader what undoes ``writes`` on ``tree`` (see ``commit_memory``)."""
    undo = priors(tree, writes)
    for rec in readers:
        rec.memory_undo = [*rec.memory_undo,
                           *([rec.memory_ops, memory, *entry] for entry in undo)]


RUN_ERRORS = (ReplayDivergenceError, CallLimitError, EventChainLimitError)
"""Failures of the whole record's run, reported as its error record wherever they happen.

An action of a chat or of an internal sub-agent that fails otherwise is its invocation's
failure, which its caller sees and may handle. These are not the caller's to handle: a
replay divergence, or a run past its limits (durable calls, chained events), which the
caller's next call would meet again only if it made one. So a parent that caught its
sub-agent's failure and returned ended the record with no error output."""


def report_failure(step: Step, task: Task, error: BaseException, failure_log: FailureLog,
                   counters: MutableMapping[str, int]) -> None:
    """Report a failed action execution: its log line, its invocation, its error record.

    The message is masked (``redact_text``). A failure inside an invocation (a chat's or a
    sub-agent's) is captured by it, and its caller sees it; any other failure, and every
    replay divergence or run limit (``RUN_ERRORS``), becomes an error record of the run.

    Args:
        step: the key's step (its run and results).
        task: the failed execution.
        error: what it raised (or why it failed).
        failure_log: the core's failure log.
        counters: the core's counters (``actions_failed``).
    """
    ctx = task.ctx
    counters["actions_failed"] += 1
    message = redact_text(error_text(error) + reported_error(task.event))
    text = failure_text(error)
    failure_log.action_failed(ctx.execution_id, task.action.name, step.key, error, message,
                              text)
    scope = ctx.scope
    inv = step.run.invocations.get(scope) if scope is not None else None
    if inv is not None:  # captured by the invocation; its caller sees the failure
        if not inv.failed:
            inv.failed = f"action {task.action.name!r} raised {type(error).__name__}: {message}"
            inv.failed_traceback = text
    if inv is None or isinstance(error, RUN_ERRORS):  # always reported
        step.res.errors.append(ErrorRecord(
            key=step.key, seq=step.run.seq, action=task.action.name,
            execution_id=ctx.execution_id, error_type=type(error).__name__,
            message=message, input=input_record(step.run.input), traceback=text,
            source=step.run.source,
        ))


def emit_output(step: Step, event: OutputEvent, check: Callable[[Any], Any] | None,
                probe: Any) -> None:
    """Add an ``OutputEvent``'s output to the step's outputs, or its error record.

    ``check`` (the host's declared output type, e.g. ``to_table``'s row type) raises for an
    output the type cannot hold: the output then becomes an error record of its run (key,
    input position, the action that sent it, the message naming field, type and value) and
    is logged at WARNING; the run and the key's other outputs go on.

    Args:
        step: the key's step.
        event: the output event (its id names the execution that sent it).
        check: the host's check, or ``None``.
        probe: the core's probe (``output_emitted``), or ``None``.
    """
    if check is not None:
        try:
            check(event.output)
        except Exception as e:  # noqa: BLE001 - whatever the type refuses is reported
            sender = event.id.rpartition("/")[0] or event.id  # "<event id>/<action>"
            message = redact_text(error_text(e))
            log.warning("an output of key %s (input %d) is left out: %s: %s", shown_key(step.key),
                        step.run.seq, type(e).__name__, log_text(message))
            step.res.errors.append(ErrorRecord(
                key=step.key, seq=step.run.seq, action=sender.rpartition("/")[2] or "<output>",
                execution_id=sender, error_type=type(e).__name__, message=message,
                input=input_record(step.run.input), source=step.run.source))
            return
    step.res.outputs.append(event.output)
    if probe is not None:
        probe.output_emitted(step.key, event.output, event.id)
