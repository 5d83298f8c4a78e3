"""The error hierarchy of flink-agents-py: one root, specific subclasses."""

from __future__ import annotations

__all__ = [
    "AgentsError",
    "PlanError",
    "ActionError",
    "ResourceNotFoundError",
    "ResourceError",
    "ProviderError",
    "NotInActionContextError",
    "ChatResponseError",
    "DurableExecutionError",
    "SerializationError",
    "UnsupportedAwaitError",
]


class AgentsError(Exception):
    """Root of every error this package raises on purpose."""


class PlanError(AgentsError):
    """An agent cannot be compiled into a plan.

    Args:
        problems: every problem found, each a sentence naming the culprit. All problems are
            collected before raising so a user fixes them in one pass.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid agent plan ({len(self.problems)} problem(s)):\n{lines}")


class ActionError(AgentsError):
    """An action raised; carries the action name and the identity of its execution."""

    def __init__(self, action: str, execution_id: str, cause: BaseException) -> None:
        self.action = action
        self.execution_id = execution_id
        self.cause_type = type(cause).__name__
        super().__init__(f"action {action!r} ({execution_id}) failed: {self.cause_type}: {cause}")


class ResourceNotFoundError(AgentsError, KeyError):
    """No resource of the asked type is registered under the asked name."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the sentence readable
        return str(self.args[0]) if self.args else "resource not found"


class ResourceError(AgentsError):
    """A resource could not be built from its descriptor, or was declared wrongly."""


class ProviderError(AgentsError):
    """A chat model provider failed.

    Args:
        message: what failed.
        status_code: the provider's HTTP status code when there was one.
        retryable: whether a retry may succeed (timeouts, 429, 5xx).
    """

    def __init__(self, message: str, *, status_code: int | None = None, retryable: bool = False):
        self.status_code = status_code
        self.retryable = retryable
        super().__init__(message if status_code is None else f"{message} (status {status_code})")


class NotInActionContextError(AgentsError):
    """A call that needs a running action was made outside one."""


class ChatResponseError(AgentsError):
    """A chat ended in failure; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class DurableExecutionError(AgentsError):
    """A durable call cannot be recorded or replayed (see the message for which call)."""


class SerializationError(DurableExecutionError):
    """A value that must be stored (event, memory, durable argument or result) has no JSON form.

    The message names the value's place (``where``) and the offending type.
    """


class UnsupportedAwaitError(AgentsError, TypeError):
    """An action awaited something the runtime cannot make durable.

    Actions are stepped by the operator, not by an asyncio event loop: await only the futures
    a ``RunnerContext`` returns, and run other asynchronous code through
    ``ctx.durable_execute_async``.
    """
