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
    ResourceError,
    TokenUsage,
    ToolCall,
    ToolMetadata,
)
from ...api.internal import import_qualified

__all__ = ["ANSWER_TYPES", "REQUESTS_KEPT", "ScriptRule", "ScriptedChatModel", "ScriptedRequest",
           "is_answer", "script_answer", "tool_call_message"]

REQUESTS_KEPT = 10_000
"""How many of its last requests a ``ScriptedChatModel`` keeps (``requests``)."""

ANSWER_TYPES = ("a str, a JSON dict or list (sent as JSON text), a ChatMessage, a ChatResponse, "
                "a ToolCall or a list of ToolCall")
"""What a script function (or a turn of ``model_from_turns``) may answer, in words."""


class ScriptedRequest(BaseModel):
    """The whole request a chat model connection receives, as one value.

    What a script function gets from ``ScriptedChatModel`` (``testing.model_from_function``):
    a test double answers by looking at it. Import it from ``flink_agents_py.testing``.

    Attributes:
        messages: the conversation, oldest first.
        model: the model name the setup asked for, if any.
        tools: the tools offered to the model.
        output_schema: the JSON Schema the answer must follow, if any.
        options: the remaining generation parameters.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    messages: list[ChatMessage]
    model: str | None = None
    tools: list[ToolMetadata] = Field(default_factory=list)
    output_schema: dict[str, Any] | None = None
    options: dict[str, Any] = Field(default_factory=dict)

    @property
    def last_user_text(self) -> str:
        """Content of the last user message ('' when none)."""
        for m in reversed(self.messages):
            if m.role == MessageRole.USER:
                return m.content
        return ""

    @property
    def tool_results(self) -> list[ChatMessage]:
        """Tool messages after the last assistant message that called tools."""
        out: list[ChatMessage] = []
        for m in reversed(self.messages):
            if m.role == MessageRole.TOOL:
                out.append(m)
            else:
                break
        return list(reversed(out))


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
        function: ``fn(request: ScriptedRequest)``, answering what ``script_answer``
            accepts (``ANSWER_TYPES``), named ``module:qualname``, or the function itself
            (``ResourceDescriptor(ScriptedChatModel, function=answer)``: kept as it is, as
            ``from_function`` keeps it, and shown by its name). Used when given, instead of
            ``rules``.
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

    def __init__(self, /, **data: Any) -> None:
        """Build the connection; a callable ``function`` is kept as ``from_function`` keeps it.

        Before, ``function=answer`` (the function, not its name) failed every chat with
        pydantic's "Input should be a valid string", once the resource was first built.
        """
        fn = data.get("function")
        if fn is not None and not isinstance(fn, str) and callable(fn):
            data["function"] = (f"{getattr(fn, '__module__', '?')}:"
                                f"{getattr(fn, '__qualname__', type(fn).__qualname__)}")
        super().__init__(**data)
        if fn is not None and not isinstance(fn, str) and callable(fn):
            self._fn = fn

    @classmethod
    def from_function(cls, fn: Callable[[ScriptedRequest], Any],
                      **fields: Any) -> ScriptedChatModel:
        """A connection answering by ``fn(request)`` (any callable, e.g. a closure).

        Register the instance itself (``agent.add_resource(name,
        ResourceType.CHAT_MODEL_CONNECTION, model)``). The instance pickles (without its
        lock, recreated on unpickling): Flink ships it with cloudpickle, so ``fn`` may be a
        lambda or closure there too; plain ``pickle`` needs a module-level ``fn``. Each
        Flink worker answers with its own copy (its own ``calls`` and ``requests``).

        Args:
            fn: takes a ``ScriptedRequest``; returns an answer ``script_answer`` accepts
                (``ANSWER_TYPES``). Any other value, ``None`` included, fails the chat with
                a ``TypeError`` naming ``fn``.
            **fields: other fields of the connection, e.g. ``flow_control=FlowControl(...)``.

        Returns:
            The connection.
        """
        model = cls(**fields)
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

    def __getstate__(self) -> dict[Any, Any]:
        """Pickled state: everything but the lock (counts and requests travel as they are)."""
        state = dict(super().__getstate__())
        private = dict(state.get("__pydantic_private__") or {})
        private.pop("_lock", None)
        state["__pydantic_private__"] = private
        return state

    def __setstate__(self, state: dict[Any, Any]) -> None:
        """Restore a pickled instance with a new lock."""
        super().__setstate__(state)
        self._lock = threading.Lock()

    def check(self) -> None:
        """Import ``function`` now, so a wrong name stops the job before its first record.

        Before, a typo (``shop_agent:shop_modl``) failed every chat of every record with a
        ``ResourceError`` naming neither this connection nor its ``function``.

        Raises:
            ResourceError: naming this connection, its ``function`` and what went wrong.
        """
        if self._fn is None and self.function is not None:
            try:
                self._fn = import_qualified(self.function)
            except ResourceError as e:
                name = f" {self.resource_name!r}" if self.resource_name else ""
                raise ResourceError(f"chat model connection{name} (ScriptedChatModel): "
                                    f"function={self.function!r}: {e}") from e

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
        self.check()
        if self._fn is not None:
            return _as_response(script_answer(self._fn(request), self._fn), model)
        has_results = bool(request.tool_results)
        text = request.last_user_text
        for rule in self.rules:
            if not re.search(rule.when, text, flags=re.S):
                continue
            if rule.tool_calls and not has_results:
                msg = ChatMessage(role=MessageRole.ASSISTANT, tool_calls=rule.tool_calls)
                return _as_response(msg, model)
            if isinstance(rule.reply_json, str):
                return _as_response(_text(rule.reply_json), model)
            if rule.reply_json is not None:
                return _as_response(_text(_json_text(rule.reply_json)), model)
            return _as_response(_text(rule.reply), model)
        return _as_response(_text(self.default_reply), model)


def is_answer(value: Any) -> bool:
    """Whether ``script_answer`` accepts ``value`` by its type (``ANSWER_TYPES``).

    Args:
        value: a script function's return value, or a turn of ``model_from_turns``.

    Returns:
        Whether it is a ``str``, ``dict``, ``list``, ``ChatMessage``, ``ChatResponse`` or
        ``ToolCall``.
    """
    return isinstance(value, (str, dict, list, ChatMessage, ChatResponse, ToolCall))


def script_answer(value: Any, source: Any, where: str = "") -> ChatMessage | ChatResponse:
    """The assistant's answer for what a script returned: the one conversion of answers.

    ``ScriptedChatModel`` applies it to what its function returns, and ``model_from_turns``
    to each turn (and to what a function turn returns).

    Args:
        value: a ``str`` (the text), a ``dict`` or ``list`` (sent as JSON text; a non-empty
            list of ``ToolCall`` calls those tools instead), a ``ChatMessage``, a
            ``ChatResponse`` (kept as it is) or a ``ToolCall`` (an assistant message calling
            it).
        source: what returned ``value``, named in errors: a function (by its qualified
            name) or a description (a ``str``).
        where: where ``source`` is, added to errors (e.g. ``"turns[1]"``).

    Returns:
        A ``ChatResponse`` as given, else the assistant ``ChatMessage``.

    Raises:
        TypeError: for ``None`` or a value of another type, or a ``dict`` or ``list`` that
            is not JSON (naming ``source``, the type and the accepted types).
        ValueError: when two tool calls of one answer share an id.
    """
    if isinstance(value, (ChatMessage, ChatResponse)):
        return value
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, ToolCall):
        return tool_call_message([value])
    if isinstance(value, list) and value and all(isinstance(v, ToolCall) for v in value):
        return tool_call_message(value)
    who = _name(source) + (f" ({where})" if where else "")
    if value is None:
        raise TypeError(f"{who} returned None (a missing return?): it must return "
                        f"{ANSWER_TYPES}")
    if not is_answer(value):
        raise TypeError(f"{who} returned a {type(value).__name__}: it must return "
                        f"{ANSWER_TYPES}")
    try:
        return _text(_json_text(value))
    except TypeError as e:
        raise TypeError(f"{who} returned a {type(value).__name__} that is not JSON ({e}): it "
                        f"must return {ANSWER_TYPES}") from None


def tool_call_message(calls: Sequence[ToolCall]) -> ChatMessage:
    """An assistant message calling ``calls``.

    Args:
        calls: the tool calls.

    Returns:
        The message.

    Raises:
        ValueError: when two calls share an id (id-less calls share none: the chat action
            gives each its synthetic id).
    """
    ids = [c.id for c in calls if c.id]
    if len(set(ids)) != len(ids):
        raise ValueError(f"tool call ids must differ within a turn, got {ids}")
    return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=list(calls))


def _name(source: Any) -> str:
    """``source`` for an error: a description as it is, a function by its qualified name."""
    if isinstance(source, str):
        return source
    name = getattr(source, "__qualname__", None) or f"a {type(source).__qualname__} instance"
    return f"the script function {name}"


def _text(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, content=text)


def _json_text(value: Any) -> str:
    return orjson.dumps(value).decode()


def _as_response(answer: ChatMessage | ChatResponse, model: str | None) -> ChatResponse:
    if isinstance(answer, ChatResponse):
        return answer
    finish_reason = "tool_calls" if answer.tool_calls else "stop"
    words = len(answer.content.split())
    return ChatResponse(message=answer, model=model or "scripted", finish_reason=finish_reason,
                        usage=TokenUsage(input_tokens=0, output_tokens=words))
