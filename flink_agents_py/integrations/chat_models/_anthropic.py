"""Anthropic's Messages API (``POST /v1/messages``) through the official ``anthropic`` SDK.

Needs the ``anthropic`` extra (``pip install 'flink-agents-py[anthropic]'``). Mapping:

- system messages (wherever they are) are joined into the top-level ``system`` field (a
  conversation of system messages only goes as one user turn: the API needs one);
- user text, assistant text and tool calls become content blocks (``text``, ``tool_use``
  with the call's id, name and ``input``); tool results become ``tool_result`` blocks
  (``tool_use_id``, ``content``, ``is_error`` for a failed tool) in a user turn; adjacent
  messages of one role are merged into one turn, as the API wants turns to alternate (a
  user turn's ``tool_result`` blocks first, as it wants them); a tool call id used again in
  a later turn goes under a stand-in (the API wants ids unique in a request);
- tools as ``{"name", "description", "input_schema"}``; a name the API refuses (it takes
  ``^[a-zA-Z0-9_-]{1,64}$``: an MCP tool's ``github.create_issue``) goes under a stand-in,
  and the model's calls of it come back under the tool's own name (``_wire.WireNames``);
  so does a tool call id it refuses (``_wire.wire_call_id``);
- structured output through a forced tool: the schema becomes the input schema of an extra
  tool (``output_tool_name``, ``structured_output`` by default) and ``tool_choice`` forces it
  (``{"type": "tool", ...}``; ``{"type": "any"}`` when other tools are offered too, so the model
  may call them first; ``{"type": "auto"}`` with extended thinking on, which refuses a forced
  tool: an answer in text is then validated as JSON like any other). The answer is that
  tool's ``input``: ``ChatResponse.structured``, and
  its JSON text is the message content. A schema whose root is not an object is wrapped in
  ``{"value": ...}`` and unwrapped again;
- extended thinking (``thinking`` in the setup's options): the answer's ``thinking`` and
  ``redacted_thinking`` blocks are kept as the message's ``reasoning`` and sent back first in
  its turn, unchanged, as the API requires during tool use;
- ``max_tokens`` (required by the API) defaults to the connection's ``max_tokens``; OpenAI's
  ``stop`` and ``max_completion_tokens`` are ``stop_sequences`` and ``max_tokens``;
- usage: input tokens are ``usage.input_tokens`` plus the prompt cache's
  ``cache_read_input_tokens`` and ``cache_creation_input_tokens`` (the API counts those apart;
  each is in ``metadata`` when not 0), output tokens ``usage.output_tokens``; ``stop_reason``
  as the finish reason.
"""

from __future__ import annotations

import datetime
import inspect
import json
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson
from pydantic import Field, PrivateAttr

from ...api import (
    ChatMessage,
    ChatModelConnection,
    ChatResponse,
    FlowControl,
    MessageRole,
    ProviderError,
    RateLimitInfo,
    ToolCall,
    ToolMetadata,
    report_rate_limit,
    secret_from_env,
)
from ...api.internal import (
    refuse_empty_answer,
    refuse_truncated_calls,
    register_sdk_default_url,
    register_sdk_env_headers,
    scrub_exception,
    too_deep,
)
from ._answers import answer_body, not_finite, reported_usage, tool_arguments, valid_text
from ._common import (
    HTTP_FLOW_CONTROL,
    FreshOnUnpickle,
    LoopBoundClient,
    LoopBoundSdkConnection,
    answer_error,
    header_number,
    header_retry_after,
    header_values,
    import_sdk,
    not_found_hint,
    provider_error,
    require_api_key,
    server_now,
    unanswered_hint,
    url_path,
    with_extra_body,
)
from ._wire import UniqueCallIds, WireNames, anthropic_tool_choice, named_as, wire_call_id

__all__ = ["AnthropicChatModel", "anthropic_rate_limit", "to_anthropic_messages"]


def _reset_s(headers: Any, name: str) -> float | None:
    """Seconds until an ``anthropic-ratelimit-*-reset`` time (RFC 3339), 0 when past.

    Of a header sent twice, the later reset. Counted on the provider's clock when the
    answer's ``Date`` says it is not ours (``server_now``).

    Returns:
        The seconds, or ``None`` when absent or unreadable.
    """
    now = server_now(headers)
    now = time.time() if now is None else now
    found = []
    for text in header_values(headers.get(name) if headers is not None else None):
        try:
            when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.timezone.utc)
        found.append(max(0.0, when.timestamp() - now))
    return max(found) if found else None


def anthropic_rate_limit(headers: Any) -> RateLimitInfo:
    """What Anthropic's rate-limit headers say (``anthropic-ratelimit-*``, ``retry-after``).

    Anthropic sends ``anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}`` (the
    reset an RFC 3339 time) and, on a 429, ``retry-after`` in seconds.

    Args:
        headers: the response's headers.

    Returns:
        What they say (every field ``None`` when they say nothing).
    """
    return RateLimitInfo(
        retry_after_s=header_retry_after(headers),
        limit_requests=header_number(headers, "anthropic-ratelimit-requests-limit"),
        remaining_requests=header_number(headers, "anthropic-ratelimit-requests-remaining"),
        reset_requests_s=_reset_s(headers, "anthropic-ratelimit-requests-reset"),
        limit_tokens=header_number(headers, "anthropic-ratelimit-tokens-limit"),
        remaining_tokens=header_number(headers, "anthropic-ratelimit-tokens-remaining"),
        reset_tokens_s=_reset_s(headers, "anthropic-ratelimit-tokens-reset"),
    )

_ERROR_PREFIX = "Error: "  # how the chat action words a failed tool's result


def _thinking_blocks(reasoning: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The blocks of a message's reasoning that Anthropic made, to send back unchanged.

    Returns:
        Its ``thinking`` (signed) and ``redacted_thinking`` blocks; other providers' are left.
    """
    out: list[dict[str, Any]] = []
    for r in reasoning:
        if r.get("type") == "thinking" and isinstance(r.get("signature"), str) \
                and r["signature"]:
            out.append({"type": "thinking", "thinking": str(r.get("thinking") or ""),
                        "signature": r["signature"]})
        elif r.get("type") == "redacted_thinking" and isinstance(r.get("data"), str):
            out.append({"type": "redacted_thinking", "data": r["data"]})
    return out


def to_anthropic_messages(
    messages: Sequence[ChatMessage], tool_name: Callable[[str], str] | None = None,
) -> tuple[str | None, list[dict[str, Any]]]:
    """Map our messages to ``(system, messages)`` of the Messages API.

    A tool call id the API would refuse (not ``^[a-zA-Z0-9_-]+$``: the chat action's
    synthetic ids, another provider's) goes as a stable stand-in, the same in the
    ``tool_use`` block and in its ``tool_result`` (``wire_call_id``). An assistant
    message's thinking blocks go back first in its turn, unchanged (with extended thinking
    on, the API refuses a tool round whose assistant turn lost them). Text of whitespace
    only (a model's blank lines before its tool calls) is left out, and a final assistant
    turn (a prefill) ends without trailing whitespace: the API refuses both; so is the
    text of a tool's empty result (its ``tool_result`` goes without ``content``). A conversation
    of system messages only (a setup's prompt holding the whole request, its user message
    left empty) goes as one user turn: the API refuses a request without turns.

    Args:
        messages: the conversation.
        tool_name: the name a called tool goes under (``WireNames.wire``; ``None``: its own).

    Returns:
        The system text (``None``: none) and the turns.
    """
    system: list[str] = []
    out: list[dict[str, Any]] = []
    ids = UniqueCallIds()
    for m in messages:
        if m.role == MessageRole.SYSTEM:
            if m.content.strip():
                system.append(m.content)
            continue
        blocks: list[dict[str, Any]] = []
        if m.role == MessageRole.TOOL:
            role = "user"
            block: dict[str, Any] = {"type": "tool_result",
                                     "tool_use_id": ids.result(wire_call_id(m.tool_call_id))}
            if m.content.strip():  # the API refuses an empty result's text: it goes without
                block["content"] = m.content
            if m.content.startswith(_ERROR_PREFIX):  # a tool's own text never starts so
                # (``runtime``'s ``tool_message`` sends such a text as its JSON string)
                block["is_error"] = True
            blocks.append(block)
        else:
            role = "assistant" if m.role == MessageRole.ASSISTANT else "user"
            if role == "assistant":
                blocks.extend(_thinking_blocks(m.reasoning))
                if not out or out[-1]["role"] != "assistant":
                    ids.next_turn()
            if m.content.strip():  # the API refuses a text block of whitespace only
                blocks.append({"type": "text", "text": m.content})
            for c in m.tool_calls:
                blocks.append({"type": "tool_use", "id": ids.call(wire_call_id(c.id)),
                               "name": tool_name(c.name) if tool_name else c.name,
                               "input": dict(c.arguments)})
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    for turn in out:  # "tool_result blocks must come FIRST": any text after them
        if turn["role"] == "user":
            turn["content"].sort(key=lambda b: b["type"] != "tool_result")
    last = out[-1]["content"][-1] if out and out[-1]["role"] == "assistant" else None
    if last is not None and last["type"] == "text":  # "cannot end with trailing whitespace"
        last["text"] = last["text"].rstrip()
    if not out and system:  # the API needs a turn: the prompt is the request
        return None, [{"role": "user", "content": [{"type": "text",
                                                    "text": "\n\n".join(system)}]}]
    return ("\n\n".join(system) or None), out


_SAMPLING = ("top_p", "top_k", "temperature")


def _refused_sampling(error: Any, request: dict[str, Any]) -> str | None:
    """The sampling parameter a 400 says the model does not take with the others, if so.

    Claude Opus 4.1, Sonnet and Haiku 4.5 on refuse ``temperature`` with ``top_p`` ("cannot
    both be specified for this model. Please use only one."): ``top_p`` is left out (a
    setup written for other models keeps its ``temperature``). Extended thinking refuses a
    ``temperature`` other than 1 and ``top_k`` ("may only be set to 1 when thinking is
    enabled"): the one named is left out.

    Returns:
        The parameter to leave out (``None``: the refusal is of something else).
    """
    if getattr(error, "status_code", None) != 400:
        return None
    text = f"{getattr(error, 'message', '')} {getattr(error, 'body', '')}"
    if "cannot both be specified" in text and {"temperature", "top_p"} <= set(request):
        return "top_p"
    if "thinking" not in text:
        return None
    named = [p for p in _SAMPLING if p in request and re.search(rf"`?\b{p}\b`?", text)]
    return named[0] if len(named) == 1 else None


async def _send(create: Any, request: dict[str, Any], refused: set[str],
                omitted: list[str]) -> Any:
    """Send the request; again without a sampling parameter the model refuses with others.

    Args:
        create: the SDK's ``messages.with_raw_response.create``.
        request: the request's fields (a refused parameter is taken out).
        refused: the parameters the model refused (one refused here is added).
        omitted: the parameters left out of this request (one refused here is added).

    Returns:
        The SDK's raw response.

    Raises:
        anthropic.APIStatusError: for an HTTP error (other than a refusal handled here).
    """
    import anthropic

    while True:  # each refusal handled leaves one parameter out: finitely many sends
        try:
            return await create(**with_extra_body(create, request))
        except anthropic.APIStatusError as e:
            name = _refused_sampling(e, request)
            if name is None:
                raise
            refused.add(name)  # remembered for the model
            omitted.append(name)
            del request[name]


def _thinking(options: dict[str, Any]) -> bool:
    """Whether the request's options turn extended thinking on (``enabled``, ``adaptive``)."""
    thinking = options.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") not in (None, "disabled")


def _output_tool(name: str, schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The forced tool for ``schema``; ``True`` when the schema was wrapped in ``value``."""
    if schema.get("type") == "object":
        return {"name": name, "description": "Give your final answer with this tool.",
                "input_schema": schema}, False
    inner = {k: v for k, v in schema.items() if k not in ("$defs", "definitions")}
    wrapped: dict[str, Any] = {"type": "object", "properties": {"value": inner},
                               "required": ["value"]}
    for k in ("$defs", "definitions"):
        if k in schema:
            wrapped[k] = schema[k]
    return {"name": name, "description": "Give your final answer with this tool, as 'value'.",
            "input_schema": wrapped}, True



class AnthropicChatModel(FreshOnUnpickle, LoopBoundSdkConnection, ChatModelConnection):
    """Anthropic's Messages API.

    Attributes:
        base_url: the API base URL (``None``: the SDK's default, or ``ANTHROPIC_BASE_URL``).
        api_key_env: the environment variable holding the API key (read when the client is
            made; never part of the plan).
        default_model: the model when the setup names none.
        max_tokens: the ``max_tokens`` sent when the setup's options give none.
        timeout_s: request timeout in seconds (a timeout is a retryable ``ProviderError``);
            an answer's body must also come whole within it of its headers.
        max_answer_bytes: the most bytes of one HTTP answer read (``None``: 64 MiB,
            ``MAX_ANSWER_BYTES``); a longer answer fails the call naming the bound and the URL.
        max_retries: the SDK's own silent retries; 0 by default so the setup's
            ``error_policy="retry"`` is the one place retries happen (and are counted).
        flow_control: how the operator paces calls (``FlowControl``); here a slow start
            from 8 calls in flight (``HTTP_FLOW_CONTROL``).
        output_tool_name: the name of the forced tool used for structured output.
        api_key_required: whether a missing key is an error, checked when the operator opens
            (``MissingApiKeyError`` naming the variable and the resource); ``False`` for a
            proxy that needs none.
    """

    base_url: str | None = None
    api_key_env: str = "ANTHROPIC_API_KEY"
    default_model: str = "claude-sonnet-4-6"
    max_tokens: int = Field(default=1024, ge=1)
    timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=0, ge=0)
    max_answer_bytes: int | None = Field(default=None, ge=1)
    flow_control: FlowControl = HTTP_FLOW_CONTROL
    output_tool_name: str = "structured_output"
    api_key_required: bool = True

    _clients: LoopBoundClient | None = PrivateAttr(default=None)
    _refused_options: dict[str, set[str]] = PrivateAttr(default_factory=dict)

    def check(self) -> None:
        """Check that the API key is in ``$api_key_env`` (when ``api_key_required``).

        Raises:
            MissingApiKeyError: naming the variable and this resource.
        """
        if self.api_key_required and not self._api_key():
            require_api_key(self, self.api_key_env, "Anthropic")

    def _api_key(self) -> str | None:
        """The API key: ``$api_key_env``'s value, registered as a secret (``None``: unset)."""
        return secret_from_env(self.api_key_env)

    def _client_factory(self) -> Callable[[], Any]:
        anthropic = import_sdk("anthropic", "anthropic", "the Anthropic chat model")
        self.check()
        key = self._api_key() or "unused"
        register_sdk_env_headers("ANTHROPIC_CUSTOM_HEADERS")  # the SDK adds them itself
        register_sdk_default_url("ANTHROPIC_BASE_URL", self.base_url)
        return lambda: anthropic.AsyncAnthropic(
            api_key=key, base_url=self.base_url, timeout=self.timeout_s,
            max_retries=self.max_retries, http_client=anthropic.DefaultAsyncHttpxClient(
                event_hooks=_bounds(self.timeout_s, self.max_answer_bytes)))

    async def achat(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str | None = None,
        tools: Sequence[ToolMetadata] = (),
        output_schema: dict[str, Any] | None = None,
        **options: Any,
    ) -> ChatResponse:
        """Send one Messages API request; see ``ChatModelConnection.chat``.

        ``options`` go into the request as they are (``temperature``, ``top_p``,
        ``stop_sequences``...); the ones the installed SDK does not list as parameters are
        sent in the body all the same (``extra_body``). ``tool_choice`` and
        ``parallel_tool_calls`` in OpenAI's form are sent in Anthropic's
        (``_wire.anthropic_tool_choice``).

        Returns:
            The model's answer.

        Raises:
            ProviderError: with the HTTP status, ``retryable`` for timeouts, connection
                failures, 408/429 and 5xx (529 "overloaded" included).
            ImportError: naming the ``anthropic`` extra when the SDK is not installed.
        """
        client = self._client()
        import anthropic

        options = named_as("anthropic", options)  # OpenAI's stop, max_completion_tokens...
        output_name = self.output_tool_name
        names = WireNames([*(t.name for t in tools), output_name])  # the API's rule for names
        system, wire = to_anthropic_messages(messages, names.wire)
        request: dict[str, Any] = {"model": model or self.default_model, "messages": wire,
                                   "max_tokens": options.pop("max_tokens", self.max_tokens)}
        if system is not None:
            request["system"] = system
        wire_tools = [{"name": names.wire(t.name), "description": t.description,
                       "input_schema": t.parameters} for t in tools]
        wrapped = False
        if output_schema is not None:
            out_tool, wrapped = _output_tool(names.wire(output_name), output_schema)
            wire_tools.append(out_tool)
            # extended thinking refuses a forced tool ("Thinking may not be enabled when
            # tool_choice forces tool use"): then the model is asked, not forced, to use it
            request["tool_choice"] = ({"type": "auto"} if _thinking(options) else
                                      {"type": "any"} if tools else
                                      {"type": "tool", "name": output_name})
        if wire_tools:
            request["tools"] = wire_tools
        request.update(options)
        anthropic_tool_choice(request, names)
        create = client.messages.with_raw_response.create
        refused = self._refused_options.setdefault(str(request["model"]), set())
        omitted = [k for k in request if k in refused]
        for name in omitted:
            del request[name]
        try:
            raw = await _send(create, request, refused, omitted)
        except anthropic.APIStatusError as e:
            headers = getattr(getattr(e, "response", None), "headers", None)
            url = getattr(getattr(e, "request", None), "url", None)
            hint = not_found_hint(e.status_code, url, "base_url is the server's root, without "
                                  "/v1: the client adds /v1/messages"
                                  if "/v1/v1/" in url_path(url) else "")
            error = provider_error(
                f"anthropic messages call failed ({type(self).__name__}, model "
                f"{request['model']!r}): {e.message}{hint}",
                e.status_code, rate_limit=anthropic_rate_limit(headers))
            raise error from scrub_exception(e)
        except (anthropic.APITimeoutError, anthropic.APIConnectionError) as e:
            error = provider_error(
                f"anthropic messages call failed ({type(self).__name__}, model "
                f"{request['model']!r}): {type(e).__name__}: {e}"
                f"{unanswered_hint(e, self.base_url)}{_bound_reason(e)}", None)
            raise error from scrub_exception(e)
        report_rate_limit(anthropic_rate_limit(raw.headers))  # paces the next calls
        try:
            message = raw.parse()
            if inspect.isawaitable(message):  # the SDK's async raw response
                message = await message
        except RecursionError as e:  # a body nested deeper than the SDK's JSON reader goes
            raise ProviderError(too_deep(self, e)) from e
        # (a block type the SDK does not know: no warning)
        body = valid_text(answer_body(
            message, f"anthropic messages call ({type(self).__name__}, model "
                     f"{request['model']!r})"))
        failed = None if body.get("content") else answer_error(
            body, "anthropic messages call failed", anthropic_rate_limit(raw.headers))
        if failed is not None:  # a 200 whose body is an error (a gateway's, a proxy's)
            raise failed
        try:
            response = names.restore(self._from_anthropic(
                body, names.wire(output_name) if output_schema is not None else None, wrapped))
        except ProviderError:
            raise
        except Exception as e:  # noqa: BLE001 - a body of an unexpected shape (a gateway's)
            raise ProviderError(f"unexpected anthropic messages body: {type(e).__name__}: "
                                f"{e}") from scrub_exception(e)
        if omitted:  # said with the answer: the setup asked for them
            response = response.model_copy(update={"metadata": {
                **response.metadata, "omitted_options": omitted}})
        return response

    def _from_anthropic(self, body: dict[str, Any], output_name: str | None,
                        wrapped: bool) -> ChatResponse:
        texts: list[str] = []
        reasoning: list[dict[str, Any]] = []
        calls: list[ToolCall] = []
        structured: Any = None
        answered = False
        blocks = body.get("content") or []
        refuse_truncated_calls(body.get("stop_reason"), [
            b.get("name") for b in blocks if b.get("type") == "tool_use"])
        for block in blocks:
            kind = block.get("type")
            if kind == "text":
                texts.append(block.get("text") or "")
            elif kind == "thinking":
                reasoning.append({"type": "thinking", "thinking": block.get("thinking") or "",
                                  "signature": block.get("signature")})
            elif kind == "redacted_thinking":
                reasoning.append({"type": "redacted_thinking", "data": block.get("data")})
            elif kind == "tool_use":
                args = block.get("input") or {}
                if output_name is not None and block.get("name") == output_name:
                    structured = args.get("value") if wrapped and isinstance(args, dict) else args
                    answered = True
                    continue
                calls.append(ToolCall(id=block.get("id") or "", name=block.get("name") or "",
                                      arguments=tool_arguments(args, len(calls),
                                                               block.get("name"))))
        content = "".join(texts)
        refuse_empty_answer(body.get("stop_reason"), bool(content.strip() or calls or answered))
        if answered and not calls and not_finite(structured):
            # NaN or Infinity (the SDK's reader takes them) has no JSON form: no structured
            # value, and a text that is no JSON, so the model is asked again
            content, structured = json.dumps(structured), None
        elif answered and not calls:
            content = orjson.dumps(structured).decode()
        else:
            structured = None
        usage: dict[str, Any] = body["usage"] if isinstance(body.get("usage"), dict) else {}
        # input_tokens counts only what was neither read from nor written to the prompt cache
        cache = {k: usage[k] for k in ("cache_read_input_tokens", "cache_creation_input_tokens")
                 if isinstance(usage.get(k), int) and usage[k] > 0}
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content=content, tool_calls=calls,
                                reasoning=reasoning),
            structured=structured,
            model=body.get("model"),
            response_id=body.get("id"),
            usage=reported_usage(usage.get("input_tokens"), usage.get("output_tokens"),
                                 cached_input=sum(cache.values())),
            finish_reason="tool_calls" if calls else body.get("stop_reason"),
            metadata={**cache, **({"cached_tokens": cache["cache_read_input_tokens"]}
                                   if "cache_read_input_tokens" in cache else {})},
        )


def _bounds(timeout_s: float, max_bytes: int | None) -> dict[str, Any]:
    """``_bounded_http.answer_bounds`` (httpx imported with the SDK, not before)."""
    from ._bounded_http import answer_bounds

    return answer_bounds(timeout_s, max_bytes)


def _bound_reason(error: BaseException) -> str:
    """``_bounded_http.bound_reason`` (httpx imported with the SDK, not before)."""
    from ._bounded_http import bound_reason

    return bound_reason(error)
