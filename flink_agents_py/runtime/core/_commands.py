"""Commands: what an action execution asks the core to do, as typed, immutable data.

An action's context never starts work itself: it records a command (run a function, start a
chat, start a sub-agent, run a deferred call, poll an async sub-agent, attach to an open
invocation, cancel an invocation) and the core carries the commands out after each step of
the action, in order, in one place (``AgentCore._drain``). A lazy call (``ctx.chat``, a
sub-agent call, a tool call of a chat) holds its command until its first await (or
``start_soon``). Observers get the command of every durable call in ``call_started``, so
they know its kind and target without reading function names.

``InlineCall`` and ``Settle`` describe calls the context completes itself (a synchronous
``durable_execute``; a refused submit or a call cancelled before it started): they are
reported to observers like the others but never reach the core.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...api import AsyncSubagentSetup, DeferredSubagentSetup
from ..context._calls import DurableCall
from ..recorder._state import CallKind

__all__ = ["RunFunction", "StartChat", "StartSubagent", "RunDeferred", "Poll", "Attach",
           "StartWait", "CancelInvocation", "InlineCall", "Settle", "Command", "CallCommand"]


class _OfCall:
    """What every command of one durable call tells an observer."""

    __slots__ = ()
    call: DurableCall

    @property
    def call_id(self) -> str:
        """The call's identity (``<execution id>/c<ordinal>``)."""
        return self.call.call_id

    @property
    def kind(self) -> CallKind:
        """What makes the call."""
        return self.call.kind

    @property
    def target(self) -> str:
        """The function's ``module:qualname``, or the tool, model or sub-agent name."""
        return self.call.target

    @property
    def function(self) -> str:
        """The call's display name, as event logs show it.

        ``chat:<setup>``, ``subagent:<name>``, a function's ``module:qualname``...
        """
        raise NotImplementedError

    def __str__(self) -> str:
        return self.function


@dataclass(frozen=True, slots=True, eq=False)
class RunFunction(_OfCall):
    """Run ``fn(*args, **kwargs)`` on the I/O executor; its outcome completes ``call``.

    Attributes:
        call: the durable call the outcome belongs to.
        fn: what to run (the call's function, or its reconciler at recovery).
        args: positional arguments.
        kwargs: keyword arguments.
        name: the call's function as ``module:qualname``.
    """

    call: DurableCall
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    name: str

    @property
    def function(self) -> str:
        """The function's ``module:qualname``."""
        return self.name


@dataclass(frozen=True, slots=True, eq=False)
class StartChat(_OfCall):
    """Open a chat invocation and dispatch its ``ChatRequestEvent`` (``ctx.chat``).

    Attributes:
        call: the caller's durable call; the chat's response completes it.
        model: the chat model setup's name.
        request: the request (``model``, ``messages``, ``prompt_args``, ``output_schema``).
    """

    call: DurableCall
    model: str
    request: dict[str, Any]

    @property
    def function(self) -> str:
        """``chat:<setup>``."""
        return f"chat:{self.model}"


@dataclass(frozen=True, slots=True, eq=False)
class StartSubagent(_OfCall):
    """Open an internal sub-agent invocation and dispatch its ``InputEvent``.

    Attributes:
        call: the caller's durable call; the ``SubagentResult`` completes it.
        name: the sub-agent's registered name.
        input: its input (JSON form).
    """

    call: DurableCall
    name: str
    input: Any

    @property
    def function(self) -> str:
        """``subagent:<name>``."""
        return f"subagent:{self.name}"


@dataclass(frozen=True, slots=True, eq=False)
class RunDeferred(_OfCall):
    """Prepare a deferred external sub-agent call and run it on the I/O executor.

    Attributes:
        call: the caller's durable call; the checked ``SubagentResult`` completes it.
        name: the sub-agent's registered name.
        setup: its setup (``prepare`` gives the function to run).
        input: its input.
        session_id: the run's session id.
    """

    call: DurableCall
    name: str
    setup: DeferredSubagentSetup
    input: Any
    session_id: str

    @property
    def function(self) -> str:
        """``deferred:<name>``."""
        return f"deferred:{self.name}"


@dataclass(frozen=True, slots=True, eq=False)
class Poll(_OfCall):
    """Poll an async external sub-agent's run on the I/O executor until it ends.

    Attributes:
        call: the caller's durable call; the fetched ``SubagentResult`` completes it.
        name: the sub-agent's registered name.
        setup: its setup.
        session_id: the run's session id.
    """

    call: DurableCall
    name: str
    setup: AsyncSubagentSetup
    session_id: str

    @property
    def function(self) -> str:
        """``async:<name>``."""
        return f"async:{self.name}"


@dataclass(frozen=True, slots=True, eq=False)
class Attach(_OfCall):
    """Wait for an invocation already in state (after a restore): nothing to start.

    Attributes:
        call: the caller's durable call; the invocation's result completes it.
        name: the chat model setup or sub-agent name.
    """

    call: DurableCall
    name: str

    @property
    def function(self) -> str:
        """``attach:<name>``."""
        return f"attach:{self.name}"


@dataclass(frozen=True, slots=True, eq=False)
class StartWait(_OfCall):
    """Open a wait of the run: ``ctx.wait_for``, ``ctx.sleep``, a tool call held for approval.

    The core records it in ``RunState.waits`` with its deadline (the host's clock plus
    ``timeout_s``), asks the host for a timer, and emits ``announce`` (an approval request)
    once; re-entering an action whose wait is open already changes nothing.

    Attributes:
        call: the waiting durable call; the outside event (or the timeout) completes it.
        correlation_id: what the outside event carries (a sleep's: ``#sleep/<call id>``).
        timeout_s: seconds until the timeout (a sleep: its length); ``None``: none.
        announce: an output to emit when the wait opens (``ApprovalRequest`` JSON), or
            ``None``.
    """

    call: DurableCall
    correlation_id: str
    timeout_s: float | None
    announce: Any = None

    @property
    def function(self) -> str:
        """``wait:<correlation id>`` or ``sleep:<seconds>``."""
        if self.call.kind is CallKind.SLEEP:
            return f"sleep:{self.timeout_s:g}"
        return f"wait:{self.correlation_id}"


@dataclass(frozen=True, slots=True, eq=False)
class CancelInvocation:
    """Cancel an internal sub-agent invocation and those nested in it.

    Its dispatch stops now; it completes, as cancelled, once its scheduled actions retire.

    Attributes:
        invocation_id: the invocation (its caller's call id).
    """

    invocation_id: str


@dataclass(frozen=True, slots=True, eq=False)
class InlineCall(_OfCall):
    """A synchronous ``durable_execute``: run by the context on the operator thread.

    Attributes:
        call: the durable call.
        name: the function's ``module:qualname``.
    """

    call: DurableCall
    name: str

    @property
    def function(self) -> str:
        """The function's ``module:qualname``."""
        return self.name


@dataclass(frozen=True, slots=True, eq=False)
class Settle(_OfCall):
    """A call whose outcome is decided at once, without work.

    A refused sub-agent submit (``refused:<name>``), a call cancelled before it started
    (``cancel:<name>``).

    Attributes:
        call: the durable call.
        label: its display name.
    """

    call: DurableCall
    label: str

    @property
    def function(self) -> str:
        """The display name."""
        return self.label


Command = (RunFunction | StartChat | StartSubagent | RunDeferred | Poll | Attach | StartWait
           | CancelInvocation)
"""What the core carries out for an action (see ``AgentCore._drain``)."""

CallCommand = (RunFunction | StartChat | StartSubagent | RunDeferred | Poll | Attach | StartWait
               | InlineCall | Settle)
"""The command of one durable call, as observers get it in ``call_started``."""
