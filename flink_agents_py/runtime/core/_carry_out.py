"""How the core carries out the commands an action recorded (``AgentCore._drain``'s).

A durable call an action makes becomes a typed command (``_commands``); after the action's
step the core carries each out in order: a function handed to the I/O executor, a chat or
an internal sub-agent call opened as an invocation of the run, a deferred or polled
external sub-agent call, a wait, a cancelled invocation.
"""

from __future__ import annotations

from typing import Any

from ..recorder._execution import ActionExecution
from ._commands import (
    CancelInvocation,
    Command,
    Poll,
    RunDeferred,
    RunFunction,
    StartChat,
    StartSubagent,
    StartWait,
)
from ._deferred_timeout import bounded_deferred
from ._subgraph import cancel_invocation, open_invocation, poll_result, polling, prepare_deferred
from ._tasks import Step

__all__ = ["carry_out"]


def carry_out(core: Any, step: Step, ctx: ActionExecution, command: Command) -> None:
    """Carry out one command of ``ctx``'s action (see ``_commands``) for ``core``.

    Args:
        core: the ``AgentCore``.
        step: the step the action runs in.
        ctx: its execution.
        command: what it recorded.
    """
    if type(command) is RunFunction:  # the usual (a function's): as below, no ``isinstance``
        if command.call.start is command:
            command.call.start = None
        ctx.record_started(command)
        core._submit(step.identity, ctx, command.call, command.fn, command.args, command.kwargs)
        return
    if isinstance(command, CancelInvocation):
        core._cancelled.extend(cancel_invocation(step.run, command.invocation_id))
        return
    call = command.call
    if call.start is command:  # a lazy call's command: issued now, once
        call.start = None
    if isinstance(command, RunFunction):
        ctx.record_started(command)
        core._submit(step.identity, ctx, call, command.fn, command.args, command.kwargs)
    elif isinstance(command, (StartChat, StartSubagent)):
        ctx.record_started(command)
        inv_id, bootstrap = open_invocation(step.run, command, ctx.execution_id, ctx.scope, ctx.env)
        core.counters["chat_calls" if isinstance(command, StartChat) else "subagent_calls"] += 1
        core._dispatch(step, bootstrap, inv_id)
    elif isinstance(command, RunDeferred):
        runner = prepare_deferred(step.run, ctx, command)
        if runner is not None:  # (else its outcome is recorded: raised, or cancelled)
            core.counters["subagent_calls"] += 1
            fn, args = bounded_deferred(step.run, ctx, command, runner)
            core._submit(step.identity, ctx, call, fn, args, {})
    elif isinstance(command, Poll):
        ctx.record_started(command)
        core.counters["subagent_calls"] += 1
        core._submit(step.identity, ctx, call, poll_result, polling(step.run, ctx, command), {})
    elif isinstance(command, StartWait):
        core._start_wait(step, ctx, command)
    # Attach: the invocation is in state already (after a restore); only wait for it
