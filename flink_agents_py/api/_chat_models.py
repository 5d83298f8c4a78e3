"""Chat models: a connection (how to reach a provider) and a setup (what to ask it).

A ``ChatModelConnection`` knows a provider: client, base URL, credentials, the wire mapping.
A ``ChatModelSetup`` names a connection and picks the model, the prompt, the tools and the
generation parameters; actions ask a setup (resource type ``CHAT_MODEL``) by name.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field, PrivateAttr, field_validator

from ._budgets import Budget
from ._errors import ProviderError, ResourceError, too_deep
from ._flow import ErrorClass, FlowControl
from ._messages import ChatMessage, ChatResponse, MessageRole
from ._prompts import Prompt, warn_unfilled
from ._resources import Resource, ResourceType
from ._tools import FunctionTool, ToolMetadata

__all__ = ["ChatModelConnection", "ChatModelSetup"]


class ChatModelConnection(Resource):
    """Base of provider connections. One method to implement: ``chat`` (or ``achat``).

    A subclass that implements neither cannot be instantiated (Python's ``TypeError``
    naming ``chat``); one that implements only ``achat`` gets a ``chat`` that runs it.

    Implementations are shared by every key of an operator and may be called concurrently
    from the I/O executor: guard clients that are not thread-safe. The operator paces the
    calls by ``flow_control`` (a ``FlowControl``: adaptive concurrency, ``Retry-After``,
    fixed rates); adapters report the provider's rate-limit headers with
    ``report_rate_limit`` and attach them to a ``ProviderError`` as ``rate_limit``.
    """

    RESOURCE_TYPE: ClassVar[ResourceType] = ResourceType.CHAT_MODEL_CONNECTION

    flow_control: FlowControl = Field(default_factory=FlowControl)
    """How the operator paces calls to this connection (``docs/how-to/flow-control.md``)."""

    def _reject_unsupported_output_schema(self, output_schema: Any) -> None:
        """Refuse an output schema this connection's ``chat`` cannot apply (Flink Agents' name).

        A connection with no native structured output calls it first in its ``chat``, so a
        schema is an error rather than an answer mistaken for one that conforms to it.

        Args:
            output_schema: the schema the request carries (``None``: nothing is checked).

        Raises:
            NotImplementedError: naming the connection class, when ``output_schema`` is given.
        """
        if output_schema is None:
            return
        cls = type(self)
        raise NotImplementedError(
            f"{cls.__module__}.{cls.__qualname__} has no native structured output, so it "
            "cannot apply the output schema it was given: apply the schema in its chat(), or "
            "ask without one (the setup then asks for JSON in the prompt)")

    @abstractmethod
    def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str | None = None,
        tools: Sequence[ToolMetadata] = (),
        output_schema: dict[str, Any] | None = None,
        **options: Any,
    ) -> ChatResponse:
        """Send one chat request and return the provider's answer (blocking).

        Args:
            messages: the conversation, system messages included.
            model: the provider's model name (``None``: the connection's default).
            tools: tools the model may call.
            output_schema: a JSON Schema the answer must follow, when structured output is
                asked for.
            **options: generation parameters (``temperature``, ``max_tokens``...).

        Returns:
            The response; ``message.tool_calls`` is non-empty when the model calls tools.

        Raises:
            ProviderError: when the provider fails (``retryable`` set for timeouts, 429, 5xx).
        """
        # reached only by a subclass that implements achat alone (else it is abstract)
        return asyncio.run(self.achat(
            messages, model=model, tools=tools, output_schema=output_schema, **options))

    async def achat(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str | None = None,
        tools: Sequence[ToolMetadata] = (),
        output_schema: dict[str, Any] | None = None,
        **options: Any,
    ) -> ChatResponse:
        """Async form of ``chat``; by default runs ``chat`` in a worker thread."""
        return await asyncio.to_thread(
            self.chat, messages, model=model, tools=tools, output_schema=output_schema, **options
        )

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """Make ``chat`` concrete for a subclass that implements ``achat``.

        One of the two is enough; ABCMeta has computed ``__abstractmethods__`` by the time
        pydantic calls this hook.
        """
        super().__pydantic_init_subclass__(**kwargs)
        if "chat" in cls.__abstractmethods__ and cls.achat is not ChatModelConnection.achat:
            cls.__abstractmethods__ = cls.__abstractmethods__ - {"chat"}


def _default_fallback_on() -> list[ErrorClass]:
    # a provider that is down, overloaded, or not reachable or answering in time: what
    # fallbacks are declared for; a rejected request would be rejected by the next one too
    return ["throttled", "unavailable", "timeout"]


class ChatModelSetup(Resource):
    """What to ask a connection: model, prompt, tools and generation parameters.

    Attributes:
        connection: name of a ``CHAT_MODEL_CONNECTION`` resource.
        model: the provider's model name.
        prompt: name of a ``PROMPT`` resource, a literal system text, or a ``Prompt`` itself
            (as Apache Flink Agents' setups take it); its placeholders are filled from the
            request's ``prompt_args``.
        tools: names of ``TOOL`` resources offered to the model.
        max_tool_rounds: the most model-tool round trips one chat may take (then it fails).
        max_tool_calls: the most tool calls one model message may ask for: a message asking
            for more ends the chat with an error naming the bound and the count, and none
            of its calls runs (a model's answer is data: without a bound, one answer could
            start any number of calls).
        max_tool_result_chars: the most characters of one tool result (its JSON text, or
            its error) the model is sent back: a longer one is cut in the middle, saying how
            many characters it had (``None``: no bound). The tool's recorded result is
            whole.
        tool_dispatch: ``"concurrent"`` starts every tool call of a round before awaiting any;
            ``"serial"`` runs them one after another. Call identities follow the request's
            order either way, so switching between a checkpoint and a restore still finds
            the recorded outcomes.
        subagents: names of ``AGENT`` resources the model may delegate to; each is offered as
            one callable ``_subagent_<name>``, listed after the tools.
        options: generation parameters passed through to the connection.
        error_policy: what a failing model call does to the chat: ``"fail"`` (default) ends
            it with ``ChatResponseEvent.error``; ``"retry"`` retries retryable errors
            (``ProviderError.retryable``: timeouts, connection failures, 429, 5xx; and
            ``TimeoutError``) with exponential backoff and jitter, up to
            ``retry_max_attempts`` attempts in all, then fails; ``"ignore"`` ends the chat
            with an empty assistant message whose ``metadata`` holds ``ignored_error``.
            Upper-case names are accepted. Retries happen inside one durable call, so a
            replay returns the recorded outcome and never retries again.
        retry_max_attempts: attempts per model call under ``"retry"`` (first one included).
        retry_initial_backoff_s: the first backoff; each next one doubles, up to
            ``retry_max_backoff_s``, and each is drawn in ``[b/2, b]`` (jitter).
        retry_max_backoff_s: the cap on one backoff.
        output_retries: when an ``output_schema`` was asked for and the answer does not
            validate, how many times the model is asked again with the validation error
            (then the chat fails, quoting every answer).
        fallbacks: names of other ``CHAT_MODEL`` setups, tried in order when a model call
            of this setup fails (after its retries) with an error of a class in
            ``fallback_on``; the messages go as they are (this setup's prompt included), so
            a fallback should offer the same tools. The answer's
            ``metadata["model_setup"]`` names the setup that answered; it is recorded with
            the durable call, so a replay hands back the same model's answer.
        fallback_on: the error classes (``error_class``) that move on to the next fallback:
            ``"throttled"`` (429/529, held past ``FlowControl.max_throttle_wait_s``),
            ``"unavailable"`` (5xx), ``"timeout"`` (no answer in time, or no connection:
            refused, reset, unknown host), ``"rejected"`` (other 4xx), ``"error"``
            (anything else). Default: ``throttled``, ``unavailable`` and ``timeout``.
        budget: limits on what each key may spend through this setup (tokens, cost by a
            price table, over a window) and what happens when it is spent (``Budget``).
    """

    RESOURCE_TYPE: ClassVar[ResourceType] = ResourceType.CHAT_MODEL

    connection: str
    model: str | None = None
    prompt: str | Prompt | None = None
    tools: list[str] = Field(default_factory=list)
    max_tool_rounds: int = Field(default=8, ge=0)
    max_tool_calls: int = Field(default=64, ge=1)
    max_tool_result_chars: int | None = Field(default=1_000_000, ge=1)
    tool_dispatch: Literal["concurrent", "serial"] = "concurrent"
    subagents: list[str] = Field(default_factory=list)
    options: dict[str, Any] = Field(default_factory=dict)
    error_policy: Literal["fail", "retry", "ignore"] = "fail"
    retry_max_attempts: int = Field(default=3, ge=1)
    retry_initial_backoff_s: float = Field(default=0.5, ge=0, allow_inf_nan=False)
    retry_max_backoff_s: float = Field(default=8.0, ge=0, allow_inf_nan=False)
    output_retries: int = Field(default=1, ge=0)
    fallbacks: list[str] = Field(default_factory=list)
    fallback_on: list[ErrorClass] = Field(default_factory=_default_fallback_on)
    budget: Budget | None = None

    _callables: list[ToolMetadata] | None = PrivateAttr(default=None)

    @field_validator("error_policy", mode="before")
    @classmethod
    def _policy_name(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else getattr(value, "value", value)

    def open(self) -> None:
        """Build the callables offered to the model from scratch: tools, then sub-agents.

        Raises:
            ResourceError: naming the culprit, for a sub-agent without a usable input schema
                or a callable name offered twice.
            ResourceNotFoundError: for a tool or sub-agent name that is not declared.
        """
        from ._subagents import SubagentSetup, subagent_callable

        self._callables = None
        callables = [t.metadata for t in self.tool_resources()]
        for name in self.subagents:
            setup = self.get_resource(name, ResourceType.AGENT)
            if not isinstance(setup, SubagentSetup):
                raise ResourceError(
                    f"chat model {self.resource_name!r}: {name!r} is not a sub-agent")
            callables.append(ToolMetadata(**subagent_callable(name, setup)))
        seen: set[str] = set()
        for c in callables:
            if c.name in seen:
                raise ResourceError(
                    f"chat model {self.resource_name!r} offers the callable {c.name!r} twice")
            seen.add(c.name)
        self._callables = callables

    def callables(self) -> list[ToolMetadata]:
        """What the model is offered (built by ``open``; built now if it was not).

        Built here too when a subclass's ``open`` does not call this class's (a Flink Agents
        setup whose ``open`` does nothing).

        Returns:
            The tools' and sub-agents' metadata, in that order.
        """
        if self._callables is None:
            self.open()
        if self._callables is None:
            ChatModelSetup.open(self)
        assert self._callables is not None
        return list(self._callables)

    @classmethod
    def has_own_chat(cls) -> bool:
        """Whether the class implements ``chat`` itself.

        A Flink Agents ``BaseChatModelSetup`` subclass does: then every model call of a chat
        goes through it (see ``achat``).

        Returns:
            ``True`` when ``chat`` is the subclass's own.
        """
        return cls.chat is not ChatModelSetup.chat

    @property
    def model_kwargs(self) -> dict[str, Any]:
        """The generation parameters sent with each call (Flink Agents' name): ``options``."""
        return dict(self.options)

    def _call_options(self, **given: Any) -> dict[str, Any]:
        """The keywords of one connection call: ``model``, ``model_kwargs``, then ``given``.

        A Flink Agents setup's ``model_kwargs`` may name the model itself (its documented
        custom setup returns ``{"model": self.model, "temperature": ...}``): it wins over
        ``self.model`` instead of being passed twice.

        Args:
            **given: this call's own keywords (``tools``, ``output_schema``...), which win.

        Returns:
            The keywords to pass to the connection's ``chat`` / ``achat``.
        """
        return {"model": self.model, **self.model_kwargs, **given}

    def chat(self, messages: Sequence[ChatMessage],
             prompt_args: dict[str, Any] | None = None, **kwargs: Any) -> ChatResponse:
        """One model call, blocking (Flink Agents' ``BaseChatModelSetup.chat``).

        The prompt filled from ``prompt_args``, then ``messages``, sent to the connection's
        ``chat`` with this setup's model, callables and ``model_kwargs`` (``kwargs`` win).
        Called from an action, it is not a durable call (``ChatRequestEvent`` and
        ``ctx.chat`` are); a subclass may override it, and the chats it serves then call it.

        Args:
            messages: the conversation (without the prompt).
            prompt_args: values for the prompt's placeholders.
            **kwargs: generation parameters for this call.

        Returns:
            The response (read as the assistant message: ``.content``, ``.tool_calls``).

        Raises:
            ProviderError: the connection's; also for an answer nested deeper than a JSON
                reader's stack (``too_deep``).
        """
        connection = self.get_resource(self.connection, ResourceType.CHAT_MODEL_CONNECTION)
        assert isinstance(connection, ChatModelConnection)
        try:
            answer = connection.chat(self.build_messages(messages, prompt_args),
                                     **self._call_options(tools=self.callables(), **kwargs))
        except RecursionError as e:
            raise ProviderError(too_deep(connection, e)) from e
        return as_chat_response(answer, connection)

    def tool_resources(self) -> list[FunctionTool]:
        """The tool resources this setup offers, in declaration order."""
        return [self.get_resource(n, ResourceType.TOOL) for n in self.tools]  # type: ignore[misc]

    def build_messages(
        self, messages: Sequence[ChatMessage], prompt_args: dict[str, Any] | None
    ) -> list[ChatMessage]:
        """Prepend the prompt (placeholders filled from ``prompt_args``) to ``messages``.

        The placeholders are filled from the messages' ``extra_args`` too, in order (a later
        message's value wins), as Apache Flink Agents' ``BaseChatModelSetup.chat`` fills
        them; ``prompt_args`` win over those. With a prompt, an empty user message of
        ``messages`` (no text, no tool calls, as ``ChatMessage(role=MessageRole.USER)``
        placeholders are written when the prompt holds the whole request) is dropped, as
        Apache Flink Agents does, instead of being sent.

        Args:
            messages: the conversation so far.
            prompt_args: values for the prompt's ``{placeholders}``.

        Returns:
            The messages to send, the prompt's first.
        """
        if not self.prompt or self.has_own_chat():  # its own chat applies the prompt
            return list(messages)
        if isinstance(self.prompt, Prompt):
            prompt: Any = self.prompt
        else:
            try:
                prompt = self.get_resource(self.prompt, ResourceType.PROMPT)
            except KeyError:
                prompt = Prompt.from_text(self.prompt)
        assert isinstance(prompt, Prompt)
        kept = [m for m in messages if not (m.role == MessageRole.USER and not m.content.strip()
                                            and not m.tool_calls)]
        values: dict[str, Any] = {}
        for m in messages:
            values.update(m.extra_args)
        values.update(prompt_args or {})
        missing = prompt.unfilled(values)
        if missing:
            warn_unfilled(self.resource_name or "?", missing, values)
        return [*prompt.format_messages(**values), *kept]

    async def achat(
        self,
        messages: Sequence[ChatMessage],
        *,
        prompt_args: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        with_prompt: bool = True,
    ) -> ChatResponse:
        """Ask the connection, with this setup's model, prompt, tools and options.

        Args:
            messages: the conversation (without the prompt).
            prompt_args: values for the prompt's placeholders.
            output_schema: JSON Schema for structured output.
            with_prompt: prepend the prompt (``False`` when ``messages`` already has it).

        Returns:
            The connection's response.

        Raises:
            ProviderError: the connection's; also for an answer nested deeper than a JSON
                reader's stack (``too_deep``).
        """
        if self.has_own_chat():  # a Flink Agents setup: its chat does the call
            extra = {} if output_schema is None else {"output_schema": output_schema}
            answer: Any = await asyncio.to_thread(
                self.chat, list(messages), prompt_args=prompt_args, **extra)
            return as_chat_response(answer, self)
        connection = self.get_resource(self.connection, ResourceType.CHAT_MODEL_CONNECTION)
        assert isinstance(connection, ChatModelConnection)
        full = self.build_messages(messages, prompt_args) if with_prompt else list(messages)
        try:
            answer = await connection.achat(
                full, **self._call_options(tools=self.callables(), output_schema=output_schema))
        except RecursionError as e:
            raise ProviderError(too_deep(connection, e)) from e
        return as_chat_response(answer, connection)



def as_chat_response(answer: Any, source: Resource) -> ChatResponse:
    """A model's answer as a ``ChatResponse``.

    A connection or setup written for Flink Agents returns the assistant ``ChatMessage``;
    that becomes the response's message.

    Args:
        answer: what ``chat`` returned.
        source: the connection or setup that returned it (named in the error).

    Returns:
        The response.

    Raises:
        TypeError: for anything but a ``ChatResponse`` or a ``ChatMessage``.
    """
    if isinstance(answer, ChatResponse):
        return answer
    if isinstance(answer, ChatMessage):
        return ChatResponse(message=answer)
    raise TypeError(f"{type(source).__name__} {source.resource_name!r} returned "
                    f"{type(answer).__name__}, not a ChatResponse or a ChatMessage")
