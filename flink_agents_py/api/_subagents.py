"""Sub-agents: resources of type ``AGENT`` an action (or a chat model) delegates work to.

Three kinds, one calling convention (``handle = await setup.submit(ctx, input)``, then
``result = await handle``, a ``SubagentResult``):

- ``InternalSubagent``: another ``Agent`` compiled into the parent's plan and run in the same
  operator on a private event flow, with its own resources and memory isolated per call.
- ``DeferredSubagentSetup``: your ``prepare`` returns ``(key, call, reconciler)``; nothing is
  sent at submit time, the call runs under durable execution when the caller first awaits.
- ``AsyncSubagentSetup``: publish/subscribe against a remote run: submit once, poll the
  status without blocking the operator, fetch the result, cancel on request.

External setups are registered by descriptor (``ResourceDescriptor(clazz="pkg.mod.Setup",
endpoint=..., description=..., input_schema=...)``): every extra argument is a pydantic field
of the setup. The shapes follow Apache Flink Agents' sub-agent documentation.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ._resources import Resource, ResourceType

if TYPE_CHECKING:
    from ._context import RunnerContext

__all__ = [
    "SubagentResult",
    "RunStatus",
    "SubagentFuture",
    "SubagentSetup",
    "InternalSubagent",
    "DeferredSubagentSetup",
    "AsyncSubagentSetup",
    "PreparedCall",
]


class SubagentResult(BaseModel):
    """The outcome of one sub-agent call.

    Attributes:
        success: whether the sub-agent produced a result.
        result: the result (for an internal sub-agent, the list of its ``OutputEvent``
            payloads, a list even when it emitted one).
        error_message: why the call failed (names the sub-agent and what happened).
    """

    model_config = ConfigDict(frozen=True)

    success: bool
    result: Any = None
    error_message: str | None = None

    @classmethod
    def ok(cls, value: Any) -> SubagentResult:
        """A successful result carrying ``value``."""
        return cls(success=True, result=value)

    @classmethod
    def error(cls, reason: Any) -> SubagentResult:
        """A failed result; ``reason`` (text or an exception) becomes the error message."""
        if isinstance(reason, BaseException):
            reason = f"{type(reason).__name__}: {reason}"
        return cls(success=False, error_message=str(reason))


class RunStatus(BaseModel):
    """The status of a remote run, as ``AsyncSubagentSetup.call_query_status`` reports it."""

    model_config = ConfigDict(frozen=True)

    state: Literal["not_started", "running", "completed", "failed"]
    error: str | None = None

    @classmethod
    def not_started(cls) -> RunStatus:
        """The remote has no run for this call."""
        return cls(state="not_started")

    @classmethod
    def running(cls) -> RunStatus:
        """The run goes on."""
        return cls(state="running")

    @classmethod
    def completed(cls) -> RunStatus:
        """The run finished; fetch its result."""
        return cls(state="completed")

    @classmethod
    def failed(cls, error: str) -> RunStatus:
        """The run failed with ``error``."""
        return cls(state="failed", error=error)

    @property
    def terminal(self) -> bool:
        """Whether the run has ended (completed or failed)."""
        return self.state in ("completed", "failed")


class SubagentFuture(Awaitable[SubagentResult]):
    """The handle of one sub-agent call; ``await`` it for the ``SubagentResult``.

    Awaiting it again returns the same result. Valid only within the action execution that
    submitted the call.
    """

    @abstractmethod
    def __await__(self) -> Any: ...

    @abstractmethod
    async def cancel(self) -> None:
        """Cancel the call: an internal child stops dispatching, a deferred call that has
        not started never starts, an async one gets ``call_cancel_request``. Awaiting the
        handle afterwards gives a failed result saying it was cancelled."""


class SubagentSetup(Resource):
    """Base of ``AGENT`` resources.

    Attributes:
        description: what the sub-agent does (shown to chat models that may delegate).
        input_schema: JSON Schema text of the input; ``None`` when undeclared.
    """

    RESOURCE_TYPE: ClassVar[ResourceType] = ResourceType.AGENT

    description: str | None = None
    input_schema: str | None = None


    @field_validator("input_schema")
    @classmethod
    def _schema_not_blank(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("input_schema must not be blank; omit it instead")
        return v

    @property
    def name(self) -> str:
        """The name the sub-agent is registered under."""
        return self.resource_name

    async def submit(self, ctx: RunnerContext, input: Any) -> SubagentFuture:
        """Submit ``input`` and return the call's handle (see the module docstring)."""
        return await ctx.submit_subagent(self.name, input)

    def result_type(self) -> type | None:
        """The declared type of a successful result (narrows what a chat model sees)."""
        return None


class InternalSubagent(SubagentSetup):
    """Another agent run inside the same operator as a sub-agent.

    ``ResourceDescriptor(InternalSubagent, agent=ReviewerAgent(), description=...,
    input_schema=...)``: ``agent`` is an ``Agent`` instance or class, or its
    ``module:qualname``. The child's chat prompts take their ``{placeholders}`` from the input's
    fields when the input is an object: a field the prompt does not use is ignored, and a
    placeholder no field fills stays as literal text.
    """

    agent: Any = None


PreparedCall = tuple[str, Callable[[], SubagentResult], Callable[[], SubagentResult] | None]
"""What ``DeferredSubagentSetup.prepare`` returns: ``(key, call, reconciler_or_None)``."""


class DeferredSubagentSetup(SubagentSetup):
    """An external sub-agent whose one call runs when the caller first awaits it.

    Implement ``prepare``. ``session_id`` and ``call_id`` are assigned by the framework and
    are the only values a replay reproduces: build the key (and any idempotency token you
    send) from them alone. ``call()`` returns ``SubagentResult.ok(...)`` or
    ``SubagentResult.error(...)``; an exception escaping it is a system fault that fails the
    calling action. The reconciler, if any, is called at recovery instead of ``call`` when the
    call had started but its outcome was recorded nowhere.
    """

    @abstractmethod
    def prepare(self, ctx: RunnerContext, input: Any, session_id: str, call_id: str) -> PreparedCall:
        """Return ``(key, call, reconciler_or_None)`` for one invocation."""


class AsyncSubagentSetup(SubagentSetup):
    """An external sub-agent reached by submit / poll status / fetch result.

    The framework submits once (durably) when the caller submits, polls
    ``call_query_status`` every ``status_poll_interval_millis`` on the I/O executor (never on
    the operator thread) until the run ends, then fetches the result; all of that is one
    durable call, replayed after a restore. If a crash falls between "request sent" and
    "request recorded", recovery calls ``reconcile_submit_request``, which by default probes the
    status and re-submits only when the probe says the run never started.

    Attributes:
        status_poll_interval_millis: time between status probes, in ms.
    """

    status_poll_interval_millis: int = Field(default=500, ge=1)

    @abstractmethod
    def call_submit_request(self, session_id: str, call_id: str, input: Any) -> None:
        """Start the remote run for this call."""

    @abstractmethod
    def call_query_status(self, session_id: str, call_id: str) -> RunStatus:
        """Probe the run's status (read-only)."""

    @abstractmethod
    def call_fetch_result(self, session_id: str, call_id: str) -> SubagentResult:
        """Fetch the result of an ended run (idempotent)."""

    def call_cancel_request(self, session_id: str, call_id: str) -> None:
        """Ask the remote to cancel the run. Default: nothing. May be called twice after a
        replay, so make it idempotent."""

    def reconcile_submit_request(self, session_id: str, call_id: str, input: Any) -> None:
        """Repair an unrecorded submit after a crash: re-submit only if never started."""
        if self.call_query_status(session_id, call_id).state == "not_started":
            self.call_submit_request(session_id, call_id, input)
