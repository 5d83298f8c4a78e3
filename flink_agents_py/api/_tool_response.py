"""``ToolResponse``: a tool's result and status, as Apache Flink Agents' tools return them.

A tool function may return a raw value (a success) or, to report that the operation failed
though the call completed, ``ToolResponse.failure("not found")`` (Flink Agents' main branch,
``api/tools/tool_response.py``). When a chat model calls the tool, a failure reaches the model
as a failed tool result naming the error (``ToolFailure: not found``), a success as its
``result``; a tool called directly (``tool.call(...)``) returns the ``ToolResponse`` itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ToolFailure", "ToolResponse"]


class ToolFailure(Exception):  # noqa: N818 - the model reads its name before the error text
    """A tool's ``ToolResponse.failure(error)``, raised where the model is given the result."""


@dataclass(frozen=True)
class ToolResponse:
    """The result and status of one tool execution (a raw return value is a success)."""

    result: Any = None
    error: str | None = None
    execution_time_ms: int = 0
    tool_name: str | None = None

    @classmethod
    def success(
        cls, result: Any, execution_time_ms: int = 0, tool_name: str | None = None
    ) -> ToolResponse:
        """A successful response carrying ``result``.

        Returns:
            The response.
        """
        return cls(result=result, execution_time_ms=execution_time_ms, tool_name=tool_name)

    @classmethod
    def failure(
        cls, error: str, execution_time_ms: int = 0, tool_name: str | None = None
    ) -> ToolResponse:
        """A failed response: the operation failed, ``error`` says why.

        Returns:
            The response.

        Raises:
            ValueError: ``error`` is ``None``.
        """
        if error is None:
            raise ValueError("error cannot be None")
        return cls(error=error, execution_time_ms=execution_time_ms, tool_name=tool_name)

    def is_success(self) -> bool:
        """Whether the tool operation succeeded.

        Returns:
            ``True`` without an error.
        """
        return self.error is None

    def is_error(self) -> bool:
        """Whether the tool operation failed.

        Returns:
            ``True`` with an error.
        """
        return not self.is_success()

    def unwrapped(self) -> Any:
        """The result a model is given: ``result``, or ``ToolFailure`` raised for an error.

        Returns:
            ``result`` of a success.

        Raises:
            ToolFailure: for a failure, its text the error.
        """
        if self.error is not None:
            raise ToolFailure(self.error)
        return self.result

    def __str__(self) -> str:
        return str(self.result) if self.is_success() else str(self.error)
