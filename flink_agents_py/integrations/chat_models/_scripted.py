"""A deterministic chat model for tests: replies chosen by rules over the request.

Like pydantic-ai's ``FunctionModel``, it is a real connection, not a mock: it goes through
the same setup, tool rounds and durable execution as any provider.
"""

from __future__ import annotations

import collections
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from ...api import (
    ChatMessage,
    ChatModelConnection,
    ChatResponse,
    MessageRole,
    ScriptedRequest,
    TokenUsage,
    ToolCall,
    ToolMetadata,
)
from ...api._resources import import_qualified

__all__ = ["ScriptRule", "ScriptedChatModel", "ScriptedRequest", "REQUESTS_KEPT"]

REQUESTS_KEPT = 10_000
"""How many of its last requests a ``ScriptedChatModel`` keeps (``requests``)."""


class ScriptRule(BaseModel):
    """One rule: when ``when`` (a regex) matches the last user message, reply.

    A rule with tool calls is skipped once the conversation already holds tool results
    (so a tool round ends); ``reply`` is then the answer. ``reply_json`` is sent as JSON text
    (for structured output).
    """

    model_config = ConfigDict(frozen=True)

    when: str = ".*"
    reply: str = ""
    reply_json: Any = None
    tool_calls: list[ToolCall] = Field(default_factory=list)


class ScriptedChatModel(ChatModelConnection):
    """Answers by rules (first match wins) or by a function of the request.

    Attributes:
        rules: the rules, tried in order.
        function: ``module:qualname`` of ``fn(request: ScriptedRequest) -> ChatResponse |
            ChatMessage | str | dict``; a ``dict`` is sent as JSON text. Used when given,
            instead of ``rules`` (``from_function`` takes the callable itself).
        default_reply: the answer when no rule matches.
    """

    rules: list[ScriptRule] = Field(default_factory=list)
    function: str | None = None
    default_reply: str = ""

    _fn: Callable[[ScriptedRequest], Any] | None = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _calls: int = PrivateAttr(default=0)
    _requests: collections.deque[ScriptedRequest] = PrivateAttr(
        default_factory=lambda: collections.deque(maxlen=REQUESTS_KEPT))

    @classmethod
    def from_function(cls, fn: Callable[[ScriptedRequest], Any]) -> ScriptedChatModel:
        """A connection answering by ``fn(request)`` (any callable, e.g. a closure).

        Register the instance itself (``agent.add_resource(name,
        ResourceType.CHAT_MODEL_CONNECTION, model)``). A closure works on the local runner;
        on Flink the instance is pickled, so ``fn`` must then be picklable (a module-level
        function or an instance of a module-level class).

        Args:
            fn: takes a ``ScriptedRequest``; returns a ``ChatResponse``, ``ChatMessage``,
                ``str`` or JSON value (sent as JSON text).

        Returns:
            The connection.
        """
        model = cls()
        model._fn = fn
        return model

    @property
    def calls(self) -> int:
        """How many chat requests this instance answered."""
        return self._calls

    @property
    def requests(self) -> list[ScriptedRequest]:
        """The last ``REQUESTS_KEPT`` requests this instance answered, in order (a copy)."""
        with self._lock:
            return list(self._requests)

    def reset(self) -> None:
        """Forget the requests answered so far (``calls`` starts from 0 again)."""
        with self._lock:
            self._calls = 0
            self._requests.clear()

    def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str | None = None,
        tools: Sequence[ToolMetadata] = (),
        output_schema: dict[str, Any] | None = None,
        **options: Any,
    ) -> ChatResponse:
        """Answer ``messages`` by the script (see the class docstring)."""
        request = ScriptedRequest(messages=list(messages), model=model, tools=list(tools),
                                  output_schema=output_schema, options=options)
        with self._lock:
            self._calls += 1
            self._requests.append(request)
        if self._fn is None and self.function is not None:
            self._fn = import_qualified(self.function)
        if self._fn is not None:
            return _as_response(self._fn(request), model)
        has_results = bool(request.tool_results)
        text = request.last_user_text
        for rule in self.rules:
            if not re.search(rule.when, text, flags=re.S):
                continue
            if rule.tool_calls and not has_results:
                msg = ChatMessage(role=MessageRole.ASSISTANT, tool_calls=rule.tool_calls)
                return _as_response(msg, model, finish_reason="tool_calls")
            if rule.reply_json is not None:
                return _as_response(rule.reply_json, model)
            return _as_response(rule.reply, model)
        return _as_response(self.default_reply, model)


def _as_response(value: Any, model: str | None, finish_reason: str = "stop") -> ChatResponse:
    if isinstance(value, ChatResponse):
        return value
    if isinstance(value, ChatMessage):
        msg = value
    elif isinstance(value, str):
        msg = ChatMessage(role=MessageRole.ASSISTANT, content=value)
    else:
        msg = ChatMessage(role=MessageRole.ASSISTANT, content=orjson.dumps(value).decode())
    if msg.tool_calls:
        finish_reason = "tool_calls"
    words = len(msg.content.split())
    return ChatResponse(message=msg, model=model or "scripted", finish_reason=finish_reason,
                        usage=TokenUsage(input_tokens=0, output_tokens=words))
