"""Chat messages, tool calls and chat responses: the provider-neutral wire of chat models."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from enum import Enum
from typing import Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ._errors import ProviderError
from ._secrets import MaskedStr, cut_masked, mask_secrets
from ._tools import UNREADABLE_ARGUMENTS

__all__ = [
    "MessageRole", "ToolCall", "ChatMessage", "TokenUsage", "ChatResponse", "ChatResult",
    "ToolResult",
]


class MessageRole(str, Enum):
    """The role of a chat message (OpenAI chat-completions roles).

    A ``str`` enum, as Apache Flink Agents' ``MessageRole``: ``role == "user"``,
    ``role.value`` and ``MessageRole("user")`` all work. Its text (``str(role)``,
    ``f"{role}"``) is its value, as a ``StrEnum``'s: a role put into a transcript, a log or a
    chat template reads ``user``, not ``MessageRole.USER``.

    A durable call's identity counts a member as its text (``__identity_is_value__``):
    roles were their text before they were this enum, and a run recorded then, whose
    calls were made with ``message.role``, replays after an upgrade as it was recorded.
    """

    __identity_is_value__: ClassVar[bool] = True  # (a dunder: no member; see ``value_classes``)

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"

    def __str__(self) -> str:
        """The role's value (``"user"``)."""
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        """The role's value, formatted (``f"{role:>9}"``)."""
        return format(self.value, spec)


class ToolCall(BaseModel):
    """One tool call the model asked for.

    Attributes:
        id: the provider's call id; empty when none was given (``ToolCall(name=...,
            arguments=...)``), and then the runtime gives the call a synthetic one, the
            same when a replay builds it again: a model's tool call ``<chat event
            id>#<round>.<position>`` (the chat action), a call of a ``ToolRequestEvent`` an
            action builds ``<its event id>#<position>``.
        name: the tool's name.
        arguments: the arguments as a JSON object.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    id: str = ""
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _wire_form(cls, data: Any) -> Any:
        # Flink Agents' (and OpenAI's) form, as a connection written for it returns:
        # {"id": ..., "type": "function", "function": {"name": ..., "arguments": {...}}},
        # the arguments possibly JSON text, the id possibly a UUID
        if not isinstance(data, dict) or "function" not in data or "name" in data:
            return data
        function = data["function"]
        if not isinstance(function, dict):
            return data
        arguments = function.get("arguments") or {}
        if isinstance(arguments, str):  # "" and "null": a call without arguments
            arguments = _text_arguments(arguments)
        given = data.get("id")
        return {"id": str(given) if given is not None else "", "name": function.get("name"),
                "arguments": arguments}

    def _wire(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments}}

    def __getitem__(self, key: str) -> Any:
        """Read as Flink Agents' (OpenAI's) tool call dict: ``call["function"]["name"]``."""
        return self._wire()[key]

    def get(self, key: str, default: Any = None) -> Any:
        """``dict.get`` over the same form as ``call[key]``."""
        return self._wire().get(key, default)


def _text_arguments(text: str) -> dict[str, Any]:
    """Tool call arguments given as text, as the JSON object they must be.

    Returns:
        The object (``{}`` for none: ``""`` or ``null``); for text that is not one JSON
        object (nor one with text around it: ``one_json_object``), ``{UNREADABLE_ARGUMENTS:
        what was wrong}``, which the tool refuses, telling the model.
    """
    try:
        value = (strict_json(text) if text.strip() else None) or {}
    except ValueError:
        value = one_json_object(text)
        if value is None:
            return {UNREADABLE_ARGUMENTS: f"are not JSON (or hold more than one JSON object): "
                                          f"{mask_secrets(text)[:300]!r}"}
    if not isinstance(value, dict):
        return {UNREADABLE_ARGUMENTS: f"are not a JSON object: {mask_secrets(text)[:300]!r}"}
    return value


_FENCE = re.compile(r"^\s*```[\w-]*\s*|\s*```\s*$")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999: a JSON number no double holds (orjson refuses it)
        raise ValueError(f"the number {text[:40]} is too large for a float (infinity is not JSON)")
    return value


_STRICT_JSON = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite_float)


def strict_json(text: str) -> Any:
    """Decode JSON text with the standard library, refusing ``NaN`` and ``Infinity``.

    A number too large for a float (``1e999``, which Python reads as an infinity) is
    refused too, as orjson refuses it.

    Python's decoder takes them, but they are not JSON: a model's answer or tool call
    arguments holding one had no stored form, and failed the chat when recorded instead of
    being refused as unreadable.

    Args:
        text: the JSON text.

    Returns:
        The value.

    Raises:
        ValueError: when ``text`` is not JSON.
    """
    try:
        return _STRICT_JSON.decode(text)
    except RecursionError:  # nested deeper than the stack: not readable JSON here either
        raise ValueError("the JSON is nested too deeply to read (deeper than the "
                         "interpreter's stack)") from None


def strict_json_at(text: str, at: int) -> tuple[Any, int]:
    """Decode the JSON value starting at ``at`` of ``text``, as ``strict_json`` decodes.

    For text a model wrote with other text around it (tool calls written as text): ``NaN``
    and ``Infinity`` are refused, and a value nested deeper than the interpreter's stack
    is not JSON here (a ``ValueError``, never a ``RecursionError``).

    Args:
        text: the text.
        at: where the value starts.

    Returns:
        The value, and the index just past it.

    Raises:
        ValueError: when no JSON value starts at ``at``, or it holds ``NaN``/``Infinity``,
            or it nests too deeply to read.
    """
    try:
        value, end = _STRICT_JSON.raw_decode(text, at)
    except RecursionError:
        raise ValueError("the JSON is nested too deeply to read (deeper than the "
                         "interpreter's stack)") from None
    return value, end


def one_json_object(text: str) -> dict[str, Any] | None:
    """The one JSON object ``text`` holds, with other text around it (``None``: not so).

    Models wrap tool call arguments in a markdown fence (```json ... ```) or write a
    sentence after them. The object starts at the text's first ``{``, which must open a
    whole object, and no ``{`` follows it (else which one was meant is not sure: the first
    one cut short, two objects). A markdown fence's backticks around it go, and so does a
    reasoning model's ``<think>...</think>`` before it (its server's reasoning parser off),
    whose braces are thoughts, not the answer.

    Args:
        text: the arguments' text.

    Returns:
        The object.
    """
    think_end = text.rfind("</think>")
    text = _FENCE.sub("", text[think_end + 8:] if think_end >= 0 else text)
    start = text.find("{")
    if start < 0:
        return None
    try:
        value, end = _STRICT_JSON.raw_decode(text, start)
    except (ValueError, RecursionError):  # (NaN and Infinity too; nested beyond the stack)
        return None
    if not isinstance(value, dict) or "{" in text[end:]:
        return None
    return value


class ChatMessage(BaseModel):
    """One message of a conversation.

    Attributes:
        role: who speaks.
        content: the text.
        tool_calls: for an assistant message, the tools it asks to call.
        tool_call_id: for a tool message, the call it answers.
        name: for a tool message, the tool's name.
        extra_args: values for the ``{placeholders}`` of the chat model setup's prompt, as
            Apache Flink Agents' ``ChatMessage.extra_args`` (see
            ``ChatModelSetup.build_messages``); never sent to the model. Left out of the
            message's dict and JSON when empty.
        reasoning: for an assistant message, the model's reasoning as its provider gave it,
            kept so that it goes back with the message: Anthropic's ``thinking`` and
            ``redacted_thinking`` blocks (signatures included), or ``{"type": "reasoning",
            "text": ...}`` for the ``reasoning_content`` of OpenAI-compatible servers
            (DeepSeek, Kimi...; ``"field": "reasoning"`` added when it came as
            ``reasoning``: vLLM, OpenRouter) and Ollama's ``thinking``. Providers that reason while
            calling tools refuse a tool round whose assistant message lost it. Not part of
            ``content``; each provider sends back only its own kind. Left out of the
            message's dict and JSON when empty.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    role: MessageRole = MessageRole.USER
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    extra_args: dict[str, Any] = Field(default_factory=dict)
    reasoning: list[dict[str, Any]] = Field(default_factory=list)

    # added after messages were recorded in durable calls' arguments: out of their JSON form
    # (and so of the calls' digests) while empty (``runtime._serde.OMIT_EMPTY``)
    __json_omit_empty__: ClassVar[tuple[str, ...]] = ("reasoning",)

    @model_serializer(mode="wrap")
    def _without_empty_extra_args(self, handler: SerializerFunctionWrapHandler
                                  ) -> dict[str, Any]:
        # the JSON form of a message without them stays what it was (recorded digests)
        data: dict[str, Any] = handler(self)
        if not self.extra_args:
            data.pop("extra_args", None)
        if not self.reasoning:
            data.pop("reasoning", None)
        return data

    def __setattr__(self, name: str, value: Any) -> None:
        # Flink Agents' messages are mutable; ours are recorded (a model's answer, a durable
        # call's arguments) and replayed as they were: say how to get a changed one
        try:
            super().__setattr__(name, value)
        except ValidationError as e:
            if e.errors()[0]["type"] != "frozen_instance":
                raise
            message = (f"ChatMessage is immutable once built (messages are recorded and "
                       f"replayed as they were): to change {name!r}, make a changed copy, "
                       f"message.model_copy(update={{{name!r}: ...}}), or build a new "
                       f"ChatMessage(..., {name}=...)")
            if name not in type(self).model_fields:
                message = (f"ChatMessage has no field {name!r} (its fields: "
                           f"{', '.join(type(self).model_fields)}), and is immutable once "
                           f"built: pass values for a prompt's placeholders in extra_args")
            raise ValidationError.from_exception_data(type(self).__name__, [{
                "type": PydanticCustomError("frozen_instance", message),
                "loc": (name,), "input": value}]) from None

    @classmethod
    def of(cls, role: MessageRole | str, content: str, **fields: Any) -> ChatMessage:
        """A message of ``role`` with text ``content`` (Flink Agents' constructor)."""
        return cls.model_validate({"role": role, "content": content, **fields})

    @classmethod
    def user(cls, content: str, **fields: Any) -> ChatMessage:
        """A user message."""
        return cls(role=MessageRole.USER, content=content, **fields)

    @classmethod
    def system(cls, content: str, **fields: Any) -> ChatMessage:
        """A system message."""
        return cls(role=MessageRole.SYSTEM, content=content, **fields)

    @classmethod
    def assistant(cls, content: str, **fields: Any) -> ChatMessage:
        """An assistant message."""
        return cls(role=MessageRole.ASSISTANT, content=content, **fields)

    @classmethod
    def tool(cls, content: str, **fields: Any) -> ChatMessage:
        """A tool message (a tool call's result; Flink Agents' ``ChatMessage.tool``)."""
        return cls(role=MessageRole.TOOL, content=content, **fields)

    @property
    def text(self) -> str:
        """The message's text (``content``; Flink Agents' name)."""
        return self.content

    @property
    def reasoning_text(self) -> str:
        """The text of the message's ``reasoning`` (what the model thought), joined."""
        return "\n\n".join(str(r.get("text") or r.get("thinking") or "")
                           for r in self.reasoning if r.get("text") or r.get("thinking"))

    def __str__(self) -> str:
        """The message as Apache Flink Agents prints one (its ``ChatMessage.__str__``).

        Programs join messages into a transcript with ``str``, as Flink Agents' own prompts
        do (``api/chat_message.py``, 0.3.1); ``repr`` still shows every field.

        Returns:
            ``"role: content"`` (``"user: hi"``).
        """
        return f"{self.role.value}: {self.content}"


MAX_TOKEN_COUNT = 2**53
"""The largest token count a ``TokenUsage`` keeps (what a JSON number holds exactly)."""


class TokenUsage(BaseModel):
    """Token counts as the provider reported them.

    A count above ``MAX_TOKEN_COUNT`` (a broken or hostile provider: ``1e30``, ``inf``) is
    kept as ``MAX_TOKEN_COUNT``: the answer can still be recorded in keyed state, and a
    budget counts it as the huge spend it claims instead of failing after the model call.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    input_tokens: int = 0
    output_tokens: int = 0

    @field_validator("input_tokens", "output_tokens", mode="before")
    @classmethod
    def _bounded(cls, value: Any) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool) \
                and value > MAX_TOKEN_COUNT:  # (inf too; NaN is refused as no integer)
            return MAX_TOKEN_COUNT
        return value


class ChatResponse(BaseModel):
    """What a chat model returned for one request.

    Attributes:
        message: the assistant message (content and tool calls).
        structured: the validated structured output when an ``output_schema`` was asked for.
        model: the model name the provider reported.
        response_id: the provider's response id.
        usage: token usage when reported.
        finish_reason: why generation stopped (``stop``, ``length``, ``tool_calls``...).
        metadata: anything else the provider returned that callers may want.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    message: ChatMessage
    structured: Any = None
    model: str | None = None
    response_id: str | None = None
    usage: TokenUsage | None = None
    finish_reason: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    # -- read as the message (Apache Flink Agents' ChatResponseEvent.response is one) ------
    @property
    def content(self) -> str:
        """The assistant message's text (``message.content``)."""
        return self.message.content

    @property
    def text(self) -> str:
        """The assistant message's text (``message.content``)."""
        return self.message.content

    @property
    def role(self) -> MessageRole:
        """The message's role (``MessageRole.ASSISTANT``)."""
        return self.message.role

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls of the message (empty on a final answer)."""
        return self.message.tool_calls

    @property
    def extra_args(self) -> dict[str, Any]:
        """``metadata``, plus ``"structured_output"`` when structured output was asked for.

        ``"structured_output"`` (Flink Agents' ``STRUCTURED_OUTPUT`` key) holds ``structured``.
        """
        extra = dict(self.metadata)
        if self.structured is not None:
            extra["structured_output"] = self.structured
        return extra

    def __str__(self) -> str:
        """The message's text form (``ChatMessage.__str__``), as Flink Agents prints it.

        Flink Agents' ``ChatResponseEvent.response`` is the message, so this prints as it.

        Returns:
            ``"assistant: ..."``.
        """
        return str(self.message)


ChatResult = ChatResponse
"""What ``await ctx.chat(...)`` returns: the final ``ChatResponse`` of the chat."""


class ToolResult(BaseModel):
    """The outcome of one tool call, paired with its call by ``call_id``.

    Attributes:
        call_id: the id of the ``ToolCall`` this answers.
        name: the tool's name.
        ok: whether the tool returned normally.
        content: the tool's return value as JSON (when ``ok``).
        error: what failed and why (when not ``ok``), worded for the model to correct its call.
        traceback: where the tool raised (when it did), bounded and redacted; for logs and
            traces, never sent to the model.

    Known secrets in ``error`` and ``traceback`` are masked (``api.mask_secrets``).
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    call_id: str
    name: str
    ok: bool = True
    content: Any = None
    error: MaskedStr | None = None
    traceback: MaskedStr | None = None


TRUNCATED_REASONS = frozenset({"length", "max_tokens", "model_context_window_exceeded"})
"""Finish reasons saying an answer was cut at a token limit (OpenAI's and Ollama's
``length``, Anthropic's ``max_tokens`` and ``model_context_window_exceeded``)."""


def refuse_truncated_calls(reason: Any, names: Sequence[Any]) -> None:
    """Refuse the tool calls of an answer cut at the output token limit.

    A model that reaches its output token limit while writing a tool call stops mid-way:
    OpenAI-compatible servers answer ``finish_reason: "length"`` with the arguments' JSON
    text cut short, Anthropic ``stop_reason: "max_tokens"`` with whatever part of the
    ``input`` was complete (often ``{}``), Ollama ``done_reason: "length"``. Such calls do
    not say what the model meant, so none may run.

    Args:
        reason: the answer's finish (stop) reason as the provider gave it.
        names: the names of the tool calls the answer holds (empty: nothing to refuse).

    Raises:
        ProviderError: not retryable (the same request is cut the same way), naming the
            reason and the calls, when ``reason`` is one of ``TRUNCATED_REASONS`` and the
            answer holds tool calls.
    """
    if not names or reason not in TRUNCATED_REASONS:
        return
    shown = ", ".join(repr(cut_masked(str(n), 100)) for n in list(names)[:5])
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    raise ProviderError(
        f"the model's answer was cut at its output token limit (finish reason {reason!r}) "
        f"while it was writing tool call(s) {shown}{more}: their arguments may be "
        "incomplete, so none was run; raise max_tokens in the chat model setup's options "
        "(or ask for less in one call)")


FILTERED_REASONS = frozenset({"content_filter", "refusal", "safety", "prohibited_content"})
"""Finish reasons saying a provider's filter stopped an answer (OpenAI's and Azure's
``content_filter``, Anthropic's ``refusal``, Gemini's ``safety`` through gateways)."""


def refuse_empty_answer(reason: Any, answered: bool, reasoning_tokens: Any = None) -> None:
    """Refuse an answer stopped at a token limit or by a filter before it said anything.

    A reasoning model (OpenAI's o-series and GPT-5, Claude with extended thinking) can
    spend its whole output limit thinking: the answer is then no text and no tool call,
    with ``finish_reason: "length"``; a filter's stop is no text with ``content_filter``.
    Read as an empty answer, a chat went on with nothing, or a structured-output chat asked
    again saying ``''`` is not JSON, and the same would happen again.

    Args:
        reason: the answer's finish (stop) reason as the provider gave it.
        answered: whether the answer holds text or a tool call.
        reasoning_tokens: the output tokens the model spent reasoning, when reported.

    Raises:
        ProviderError: not retryable, naming the reason and what to do, when the answer
            holds nothing and ``reason`` is one of ``TRUNCATED_REASONS`` or
            ``FILTERED_REASONS``.
    """
    if answered:
        return
    if reason in TRUNCATED_REASONS:
        spent = (f" (it spent {reasoning_tokens} output tokens reasoning)"
                 if isinstance(reasoning_tokens, int) and reasoning_tokens > 0 else "")
        raise ProviderError(
            f"the model reached its output token limit (finish reason {reason!r}) before it "
            f"wrote any answer{spent}; raise max_tokens (max_completion_tokens) in the chat "
            "model setup's options, or lower its reasoning effort")
    if reason in FILTERED_REASONS:
        raise ProviderError(
            f"the provider's content filter stopped the answer (finish reason {reason!r}) "
            "before it wrote any text; the same request is stopped the same way")
