"""Apache Flink Agents' caller-facing sub-agent API (``api.subagent`` on its main branch).

A setup of Flink Agents' newest form implements one method, ``as_async_callable(ctx,
prompt, session_id, call_id)``, returning a ``DurableCallable`` whose ``call()`` gives a
``Result``; an action calls it with ``setup.call(ctx, prompt, session_id)``. Here such a
setup is one of our ``DeferredSubagentSetup``s: ``call`` runs the callable as the action's
durable call (recorded, replayed after a restore), and ``prepare`` hands the same callable
to our runtime, so ``await ctx.submit_subagent(name, prompt)`` and a chat model delegating
to it (``_subagent_<name>``) reach it too.
"""

from __future__ import annotations

import dataclasses
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..api import DeferredSubagentSetup, SubagentResult

if TYPE_CHECKING:
    from ..api import PreparedCall, RunnerContext

__all__ = ["BaseSubagentCallable", "DurableCallable", "Result", "Subagent", "SubagentSetup"]

T = TypeVar("T")


@dataclass
class Result:
    """The outcome of one sub-agent call (Flink Agents' ``Result``).

    Attributes:
        success: whether the call succeeded.
        result: what a successful call gave (JSON data).
        error_message: a failed call's message (an exception's whole traceback).
    """

    success: bool
    result: Any = None
    error_message: str | None = None

    @staticmethod
    def ok(result: Any) -> Result:
        """A successful result carrying ``result``."""
        return Result(success=True, result=result)

    @staticmethod
    def error(error: BaseException | str) -> Result:
        """A failed result: an exception's traceback as text, or the message given."""
        if isinstance(error, BaseException):
            text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            return Result(success=False, error_message=text)
        return Result(success=False, error_message=error)

    @property
    def exception(self) -> Exception | None:
        """A ``RuntimeError`` carrying a failed call's message; ``None`` on success."""
        return None if self.success else RuntimeError(self.error_message)


def as_result(value: Any) -> Result:
    """``value`` (a ``Result``, its recorded JSON form, or our ``SubagentResult``) as a ``Result``.

    Args:
        value: what a sub-agent call gave.

    Returns:
        The ``Result``.

    Raises:
        TypeError: when ``value`` is none of those.
    """
    if isinstance(value, Result):
        return value
    if isinstance(value, SubagentResult):
        return Result(success=value.success, result=value.result, error_message=value.error_message)
    if (
        isinstance(value, dict)
        and isinstance(value.get("success"), bool)
        and set(value) <= {"success", "result", "error_message"}
    ):
        return Result(**value)
    raise TypeError(f"a sub-agent callable must return a Result, got {type(value).__name__}")


@dataclass
class DurableCallable(Generic[T]):
    """A call for durable execution with a stable id (Flink Agents' ``DurableCallable``).

    Attributes:
        id: the call's id, made from the ids the framework assigned.
        call: the call.
        reconciler: called at recovery instead of ``call`` when the call had started but
            its outcome was recorded nowhere (``None``: call it again).
    """

    id: str
    call: Callable[[], T]
    reconciler: Callable[[], T] | None = field(default=None)


class BaseSubagentCallable(DurableCallable[Result], ABC):
    """The callable an ``as_async_callable`` returns: implement ``call_internal``.

    Its id is ``"<session_id>#<call_id>"``; what ``call_internal`` raises becomes a failed
    ``Result`` carrying the traceback, so a failure reaches the caller as a result.

    Args:
        session_id: the call's session.
        call_id: the call's id.
    """

    def __init__(self, session_id: str, call_id: str) -> None:
        super().__init__(id=f"{session_id}#{call_id}", call=self._invoke)

    def _invoke(self) -> Result:
        try:
            return Result.ok(self.call_internal())
        except Exception as e:  # noqa: BLE001 - the contract: a failure is a failed Result
            return Result.error(e)

    @abstractmethod
    def call_internal(self) -> Any:
        """Make the call; return its JSON data (what it raises is a failed ``Result``)."""


class Subagent(ABC):
    """What an action calls a sub-agent through (Flink Agents' ``Subagent``)."""

    @abstractmethod
    def call(self, ctx: RunnerContext, prompt: Any, session_id: str | None = None) -> Result:
        """Call the sub-agent and return its ``Result`` (no ``session_id``: a new session)."""

    @abstractmethod
    def as_async_callable(
        self, ctx: RunnerContext, prompt: Any, session_id: str | None = None
    ) -> DurableCallable[Result]:
        """The deferred call of one invocation (no ``session_id``: a new session)."""


class SubagentSetup(DeferredSubagentSetup):
    """An external sub-agent of Flink Agents' newest form: implement ``as_async_callable``.

    Register it as an ``AGENT`` resource (an instance or a descriptor); an action calls it
    with ``ctx.get_resource(name, ResourceType.AGENT).call(ctx, prompt, session_id)``.
    """

    def call(
        self,
        ctx: RunnerContext,
        prompt: Any,
        session_id: str | None = None,
        call_id: str | None = None,
    ) -> Result:
        """Call the sub-agent as the action's durable call and return its ``Result``.

        Ids not given are assigned (``ctx.next_session_id()``, ``ctx.next_call_id``), so a
        replay makes the same call; its result is recorded and replayed after a restore.

        Args:
            ctx: the calling action's context.
            prompt: the sub-agent's input.
            session_id: the session to continue (``None``: a new one).
            call_id: the call's id (``None``: the session's next; the framework's to give).

        Returns:
            The call's ``Result``.
        """
        if session_id is None:
            session_id = ctx.next_session_id()
        if call_id is None:
            call_id = ctx.next_call_id(session_id)
        callable_ = self.as_async_callable(ctx, prompt, session_id, call_id)
        reconcile = callable_.reconciler
        recorded = ctx.durable_execute(  # recorded in its JSON form, a dict of its fields
            _fields_of(callable_.call),
            reconciler=None if reconcile is None else _fields_of(reconcile),
        )
        return as_result(recorded)

    @abstractmethod
    def as_async_callable(
        self,
        ctx: RunnerContext,
        prompt: Any,
        session_id: str | None = None,
        call_id: str | None = None,
    ) -> DurableCallable[Result]:
        """The deferred call of one invocation, its id made from the two ids alone.

        Args:
            ctx: the calling action's context.
            prompt: the sub-agent's input.
            session_id: the session (``None``: take ``ctx.next_session_id()``).
            call_id: the call's id (``None``: take ``ctx.next_call_id(session_id)``).

        Returns:
            The ``DurableCallable`` (``BaseSubagentCallable`` gives the id).
        """

    def prepare(
        self, ctx: RunnerContext, input: Any, session_id: str, call_id: str
    ) -> PreparedCall:
        """Our runtime's form of ``as_async_callable`` (see ``DeferredSubagentSetup``).

        Args:
            ctx: the caller's context.
            input: the sub-agent's input.
            session_id: the caller's session.
            call_id: the call's id.

        Returns:
            ``(id, call, reconciler)``, each giving our ``SubagentResult``.
        """
        callable_ = self.as_async_callable(ctx, input, session_id, call_id)
        reconcile = callable_.reconciler
        return (
            callable_.id,
            lambda: _subagent_result(callable_.call()),
            None if reconcile is None else lambda: _subagent_result(reconcile()),
        )


def _fields_of(call: Callable[[], Any]) -> Callable[[], dict[str, Any]]:
    """``call`` giving its ``Result`` as the dict of its fields (what a durable call records)."""

    def result_fields() -> dict[str, Any]:
        return dataclasses.asdict(as_result(call()))

    return result_fields


def _subagent_result(value: Any) -> SubagentResult:
    """A ``Result`` as our ``SubagentResult`` (a failed one keeps its message as the reason)."""
    result = as_result(value)
    if result.success:
        return SubagentResult.ok(result.result)
    return SubagentResult.failed(result.error_message or "the sub-agent call failed")
