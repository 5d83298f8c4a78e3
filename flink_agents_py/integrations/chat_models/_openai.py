"""OpenAI-compatible chat models through the official ``openai`` SDK.

Covers OpenAI and any server speaking its chat-completions API (vLLM, LM Studio, llama.cpp's
servers, Ollama's ``/v1``). Needs the ``openai`` extra (``pip install 'flink-agents-py[openai]'``).

Tools go as ``{"type": "function", "function": {...}}``; a name OpenAI refuses (it takes
``^[a-zA-Z0-9_-]{1,64}$``: an MCP tool's ``github.create_issue``) goes under a stand-in, and
the model's calls of it come back under the tool's own name (``_wire.WireNames``); so does a
tool call id longer than OpenAI takes (``_wire.wire_call_id``).

Structured output uses ``response_format={"type": "json_schema", ...}`` as OpenAI documents it.
Servers that only know the older JSON mode with a schema (llama-cpp-python's server:
``{"type": "json_object", "schema": ...}``) are handled by ``structured_output="json_object"``;
the default ``"auto"`` tries ``json_schema`` and, when the server rejects that request naming
``json_schema``/``response_format``, switches this connection to ``json_object`` for good.
"""

from __future__ import annotations

import inspect
import math
import os
import re
from collections.abc import Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, PrivateAttr

from ...api import (
    ChatMessage,
    ChatModelConnection,
    ChatResponse,
    FlowControl,
    ProviderError,
    RateLimitInfo,
    ToolMetadata,
    report_rate_limit,
    secret_from_env,
)
from ...api.internal import (
    register_sdk_default_url,
    register_sdk_env_headers,
    scrub_exception,
)
from ._answers import answer_body
from ._common import (
    HTTP_FLOW_CONTROL,
    FreshOnUnpickle,
    LoopBoundClient,
    answer_error,
    header_number,
    header_retry_after,
    header_values,
    import_sdk,
    is_local_url,
    not_found_hint,
    provider_error,
    require_api_key,
    run_sync,
    secret_env_values,
    server_now,
    unanswered_hint,
    url_path,
    with_extra_body,
)
from ._llama import from_openai_choice, to_openai_messages
from ._openai_refusals import (
    REASONING_UNSUPPORTED,
    call_ids_refused,
    calls_content_refused,
    is_reasoning_model,
    later_systems_refused,
    refused_option,
    refuses_system,
    system_refused,
    thinking_refused,
    tool_names_refused,
    with_empty_calls_content,
    with_nine_char_ids,
    with_one_system,
    with_system_as_user,
    with_tool_names,
    without_options,
)
from ._text_calls import calls_from_text
from ._wire import WireNames, named_as, openai_tool_choice

__all__ = ["OpenAIChatModel", "openai_rate_limit"]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|us|\u00b5s|\u03bcs|ns|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "\u00b5s": 1e-6,
           "\u03bcs": 1e-6, "ns": 1e-9}


def _duration_s(value: str | None) -> float | None:
    """Read an OpenAI reset duration.

    Go's form (``1s``, ``6m0s``, ``120ms``, ``1h2m3.5s``, and below a millisecond
    ``853\u00b5s`` or ``12ns``), or bare seconds; of a header sent twice, the later reset.

    Returns:
        The seconds, or ``None`` when absent or unreadable.
    """
    found = [_one_duration_s(text) for text in header_values(value)]
    return None if not found or None in found else max(s for s in found if s is not None)


def _one_duration_s(text: str) -> float | None:
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None  # NaN, infinities
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def openai_rate_limit(headers: Any) -> RateLimitInfo:
    """What OpenAI's rate-limit headers say (``x-ratelimit-*``, ``retry-after(-ms)``).

    OpenAI sends ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``; the resets are
    durations (``1s``, ``6m0s``, ``20ms``). Other OpenAI-compatible servers send none, or
    some of them.

    Args:
        headers: the response's headers.

    Returns:
        What they say (every field ``None`` when they say nothing).
    """
    return RateLimitInfo(
        retry_after_s=header_retry_after(headers),
        limit_requests=header_number(headers, "x-ratelimit-limit-requests"),
        remaining_requests=header_number(headers, "x-ratelimit-remaining-requests"),
        reset_requests_s=_reset_s(headers, "x-ratelimit-reset-requests"),
        limit_tokens=header_number(headers, "x-ratelimit-limit-tokens"),
        remaining_tokens=header_number(headers, "x-ratelimit-remaining-tokens"),
        reset_tokens_s=_reset_s(headers, "x-ratelimit-reset-tokens"),
    )


def _reset_s(headers: Any, name: str) -> float | None:
    """A reset header's seconds; a Unix time (some gateways') on the provider's clock.

    A reset in the Unix-time range is left for flow control to read on our clock
    (``runtime._flow.sane_rate_limit``), unless the answer's ``Date`` says the provider's
    clock is not ours (``server_now``): then it is the seconds from that ``Date``.

    Returns:
        The seconds (or the Unix time), or ``None`` when absent or unreadable.
    """
    reset = _duration_s(headers.get(name) if headers is not None else None)
    if reset is not None and _EPOCH_FROM <= reset < _EPOCH_TO:
        now = server_now(headers)
        if now is not None:
            return max(0.0, reset - now)
    return reset


_EPOCH_FROM, _EPOCH_TO = 1e9, 1e10
"""A reset in this range is a Unix time (2001 to 2286), as flow control reads it."""


_QUOTA = ("; the account's quota is used up (insufficient_quota: its plan and billing), "
          "which waiting does not change: not retried")


def _status_message(error: Any) -> str:
    """The SDK's message of an HTTP error, with the server's words when it missed them.

    Gemini's OpenAI-compatible API answers errors as a list, ``[{"error": {"message":
    ...}}]``, which the SDK does not read: its message was ``Error code: 400`` alone.

    Returns:
        The message.
    """
    message = str(getattr(error, "message", "") or error)
    body = getattr(error, "body", None)
    first = body[0] if isinstance(body, list) and body and isinstance(body[0], dict) else None
    detail = first.get("error") if first is not None else None
    said = detail.get("message") if isinstance(detail, dict) else None
    if isinstance(said, str) and said.strip() and said.strip() not in message:
        return f"{message} - {said.strip()}"
    return message


class OpenAIChatModel(FreshOnUnpickle, ChatModelConnection):
    """A chat-completions endpoint.

    Attributes:
        base_url: the API base URL, e.g. ``http://127.0.0.1:8080/v1`` (``None``: the SDK's
            default, or ``OPENAI_BASE_URL``).
        api_key_env: the environment variable holding the API key, read when the client is
            made (a local server that needs no key gets a placeholder). The key itself is
            never part of the plan; its value is masked in errors, logs and the event log
            (``api.secret_from_env``).
        api_key_required: whether a missing key is an error, checked when the operator opens
            (``MissingApiKeyError`` naming the variable and the resource). ``None`` (default):
            required unless ``base_url`` (or ``OPENAI_BASE_URL``) is local (``localhost``,
            a loopback or private address, a single-label host name: see ``is_local_url``).
        default_model: the model when the setup names none.
        timeout_s: request timeout in seconds (a timeout is a retryable ``ProviderError``);
            an answer's body must also come whole within it of its headers.
        max_answer_bytes: the most bytes of one HTTP answer read (``None``: 64 MiB,
            ``MAX_ANSWER_BYTES``); a longer answer fails the call naming the bound and the URL.
        max_retries: the SDK's own silent retries; 0 by default so the setup's
            ``error_policy="retry"`` is the one place retries happen (and are counted).
        headers: extra HTTP headers sent with every request (part of the plan: put secrets in
            ``secret_headers``; the value of one whose name carries a credential, e.g.
            ``Authorization`` or ``x-api-key``, is masked like a secret header all the same).
        secret_headers: HTTP headers whose values are secrets, ``{header: environment
            variable}`` (e.g. ``{"x-gateway-key": "GATEWAY_KEY"}`` for a gateway in front of
            the model): read when the client is made (a missing one is a
            ``MissingApiKeyError`` when the operator opens), never part of the plan, masked
            wherever text leaves the process like the API key.
        flow_control: how the operator paces calls (``FlowControl``); here a slow start
            from 8 calls in flight (``HTTP_FLOW_CONTROL``).
        structured_output: how an ``output_schema`` is sent (see the module docstring).
        schema_name: the ``json_schema.name`` sent with a schema.
        calls_only_content: the ``content`` of an assistant message holding tool calls and
            no text: ``"null"`` (OpenAI's documented form), ``"empty"`` (``""``), or
            ``"auto"`` (default): ``null``, and ``""`` from the first time the server
            refuses ``null`` there (``_openai_refusals``).
        text_tool_calls: whether tool calls the model wrote as text in its answer
            (``<tool_call>...</tool_call>``, ``[TOOL_CALLS]``, ``<|python_tag|>``, a bare
            JSON object naming an offered tool) are read as its calls (``_text_calls``): a
            server whose tool parser is off (vLLM, llama.cpp, LM Studio, Ollama's ``/v1``)
            answers so. ``None`` (default): read, unless the server is OpenAI's own API
            (``api.openai.com``, ``*.openai.azure.com``), whose models answer calls only
            as structured ``tool_calls`` (text there is the model's text).
    """

    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    api_key_required: bool | None = None
    default_model: str = "default"
    timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=0, ge=0)
    max_answer_bytes: int | None = Field(default=None, ge=1)
    headers: dict[str, str] | None = None
    secret_headers: dict[str, str] | None = None
    flow_control: FlowControl = HTTP_FLOW_CONTROL
    structured_output: Literal["auto", "json_schema", "json_object"] = "auto"
    schema_name: str = "output"
    calls_only_content: Literal["auto", "null", "empty"] = "auto"
    text_tool_calls: bool | None = None

    _clients: LoopBoundClient | None = PrivateAttr(default=None)
    _json_object_fallback: bool = PrivateAttr(default=False)
    _empty_calls_content: bool = PrivateAttr(default=False)
    _refused_options: dict[str, set[str]] = PrivateAttr(default_factory=dict)
    _streamed_thinking: set[str] = PrivateAttr(default_factory=set)
    _system_as_user: set[str] = PrivateAttr(default_factory=set)
    _nine_char_ids: set[str] = PrivateAttr(default_factory=set)
    _one_system: set[str] = PrivateAttr(default_factory=set)
    _tool_names: set[str] = PrivateAttr(default_factory=set)

    def _key_required(self) -> bool:
        if self.api_key_required is not None:
            return self.api_key_required
        return not is_local_url(self._server_url())

    def _server_url(self) -> str | None:
        """The server the requests go to (whether it is local decides if a key is needed)."""
        return self.base_url or os.environ.get("OPENAI_BASE_URL")

    def check(self) -> None:
        """Check the API key (when one is required) and the ``secret_headers`` variables.

        The key must be in ``$api_key_env``, and every variable ``secret_headers`` names set.

        Raises:
            MissingApiKeyError: naming the variable and this resource.
        """
        secret_env_values(self, self.secret_headers, "header")
        if self._key_required() and not self._api_key():
            require_api_key(self, self.api_key_env, "OpenAI-compatible", hint=(
                "; a server that needs no key: a local base_url, or api_key_required=False"))

    def _api_key(self) -> str | None:
        """The API key: ``$api_key_env``'s value, registered as a secret (``None``: unset)."""
        return secret_from_env(self.api_key_env)

    def _client(self) -> Any:
        if self._clients is None:
            openai = import_sdk("openai", "openai", "the OpenAI-compatible chat model")
            self.check()
            headers = {**(self.headers or {}),
                       **secret_env_values(self, self.secret_headers, "header")}
            self._clients = LoopBoundClient(lambda: self._sdk_client(openai, headers or None))
        return self._clients.get()

    def _sdk_client(self, openai: Any, headers: dict[str, str] | None) -> Any:
        """One SDK client (``openai.AsyncOpenAI``; a subclass may make another kind).

        Args:
            openai: the ``openai`` module.
            headers: the extra headers of every request (``None``: none).

        Returns:
            The client.
        """
        register_sdk_default_url("OPENAI_BASE_URL", self.base_url)  # read by the SDK then
        register_sdk_env_headers("OPENAI_CUSTOM_HEADERS")  # added by the SDK itself
        return openai.AsyncOpenAI(base_url=self.base_url, api_key=self._api_key() or "unused",
                                  timeout=self.timeout_s, max_retries=self.max_retries,
                                  default_headers=headers,
                                  http_client=openai.DefaultAsyncHttpxClient(
                                      event_hooks=_bounds(self.timeout_s,
                                                          self.max_answer_bytes)))

    def close(self) -> None:
        """Drop the clients."""
        if self._clients is not None:
            self._clients.clear()

    def _response_format(self, schema: dict[str, Any]) -> dict[str, Any]:
        if self.structured_output == "json_object" or self._json_object_fallback:
            return {"type": "json_object", "schema": schema}
        return {"type": "json_schema", "json_schema": {"name": self.schema_name, "schema": schema}}

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """Blocking form of ``achat`` (not from inside a running event loop)."""
        return run_sync(self.achat(messages, **kwargs))

    async def achat(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str | None = None,
        tools: Sequence[ToolMetadata] = (),
        output_schema: dict[str, Any] | None = None,
        **options: Any,
    ) -> ChatResponse:
        """Send one chat-completions request; see ``ChatModelConnection.chat``.

        ``options`` go into the request as they are (``temperature``, ``max_tokens``,
        ``seed``...); the ones the installed SDK does not list as parameters are sent in the
        body all the same (``extra_body``). ``tool_choice`` in Anthropic's form is sent in
        OpenAI's; it and ``parallel_tool_calls`` are left out without tools
        (``_wire.openai_tool_choice``).

        Returns:
            The model's answer.

        Raises:
            ProviderError: with the HTTP status, ``retryable`` for timeouts, connection
                failures, 408/429 and 5xx (a 400 that rejects a JSON Schema
                ``response_format`` is retried once with a JSON object format first, one
                that rejects ``max_tokens`` with ``max_completion_tokens``, one naming an
                unsupported parameter without it, one refusing a ``null`` content with
                ``""``, one refusing the ``system`` role with ``user`` messages, one
                refusing tool call ids not of 9 letters and digits with such ids, one
                refusing system messages after the first with them joined into one, one
                wanting tool messages named with their tools' names). The
                message names the connection, the server's host, the model and the status.
            ImportError: naming the ``openai`` extra when the SDK is not installed.
        """
        client = self._client()
        import openai

        names = WireNames(t.name for t in tools)  # OpenAI's rule for tool names
        empty = self.calls_only_content == "empty" or (
            self.calls_only_content == "auto" and self._empty_calls_content)
        kwargs: dict[str, Any] = {"model": model or self.default_model,
                                  "messages": to_openai_messages(messages, names.wire,
                                                                 "" if empty else None),
                                  **named_as("openai", options)}  # Anthropic's stop_sequences
        if tools:
            kwargs["tools"] = [{"type": "function", "function": {
                "name": names.wire(t.name), "description": t.description,
                "parameters": t.parameters}} for t in tools]
        openai_tool_choice(kwargs, names)
        if output_schema is not None:
            kwargs["response_format"] = self._response_format(output_schema)
        try:
            completion, headers, omitted = await self._create(client, kwargs, output_schema)
        except openai.APIStatusError as e:
            headers = getattr(getattr(e, "response", None), "headers", None)
            url = getattr(getattr(e, "request", None), "url", None)
            hint = not_found_hint(e.status_code, url, "" if "/v1/" in url_path(url) else
                                  "an OpenAI-compatible server's base_url usually ends in /v1")
            quota = e.status_code == 429 and "insufficient_quota" in (
                str(getattr(e, "code", "")), str(getattr(e, "type", "")))
            error = provider_error(
                f"chat completion failed ({self._provider()}, model {kwargs['model']!r}): "
                f"{_status_message(e)}{hint}{_QUOTA if quota else ''}", e.status_code,
                rate_limit=openai_rate_limit(headers), quota_exhausted=quota)
            raise error from scrub_exception(e)
        except (openai.APITimeoutError, openai.APIConnectionError) as e:
            error = provider_error(
                f"chat completion failed ({self._provider()}, model {kwargs['model']!r}): "
                f"{type(e).__name__}: {e}{unanswered_hint(e, self.base_url)}"
                f"{_bound_reason(e)}", None)
            raise error from scrub_exception(e)
        named = f"({self._provider()}, model {kwargs['model']!r})"
        # (a server's content as parts is no str: no warning)
        body = answer_body(completion, f"chat completion {named}")
        failed = None if body.get("choices") else answer_error(
            body, "chat completion failed", openai_rate_limit(headers))
        if failed is not None:  # a 200 whose body is an error (a gateway's, a proxy's)
            raise failed
        try:
            response = from_openai_choice(body)
            if self._reads_text_calls() and kwargs.get("tool_choice") != "none":
                response = calls_from_text(response, {
                    t["function"]["name"]: t["function"].get("parameters")
                    for t in kwargs.get("tools") or ()}, bare=output_schema is None)
            response = names.restore(response)
        except ProviderError as e:  # the answer's own fault: named as the HTTP errors are
            raise ProviderError(f"chat completion {named}: {e}", retryable=e.retryable
                                ) from scrub_exception(e)
        except Exception as e:  # noqa: BLE001 - a body of an unexpected shape
            raise ProviderError(f"unexpected chat completion body {named}: "
                                f"{type(e).__name__}: {e}") from scrub_exception(e)
        if omitted:  # said with the answer: the setup asked for them
            response = response.model_copy(update={"metadata": {
                **response.metadata, "omitted_options": omitted}})
        return response

    def _reads_text_calls(self) -> bool:
        """Whether tool calls written as text are read (``text_tool_calls``)."""
        if self.text_tool_calls is not None:
            return self.text_tool_calls
        host = self._host()
        return host != "api.openai.com" and not host.endswith(".openai.azure.com")

    def _provider(self) -> str:
        """The provider's name for messages: the connection's class and its server's host."""
        return f"{type(self).__name__} at {self._host() or 'an unreadable base_url'}"

    def _host(self) -> str:
        """The host of the server the requests go to (``""``: unreadable)."""
        try:
            return urlsplit(self._server_url() or "https://api.openai.com").hostname or ""
        except ValueError:
            return ""

    async def _create(
        self, client: Any, kwargs: dict[str, Any], output_schema: dict[str, Any] | None
    ) -> tuple[Any, Any, list[str]]:
        """Send the request; again when the server refuses a field it has another form of.

        A JSON Schema ``response_format`` the server refuses is sent as a JSON object
        format; ``max_tokens``, which OpenAI's reasoning models (o-series, GPT-5) refuse
        (``Use 'max_completion_tokens' instead``), as ``max_completion_tokens``, and a
        parameter such a model refuses (``temperature``...) is left out, and so from then on
        for that model (a model named as one of them: from the first request); a ``null``
        content refused goes as ``""``, a refused ``system`` role as ``user``, tool call ids
        refused as Mistral refuses them as 9-character stand-ins (``_openai_refusals``).

        Args:
            client: the SDK's async client.
            kwargs: the request's fields (``response_format`` is replaced on a retry).
            output_schema: the JSON Schema the answer must follow, if any.

        The answer's rate-limit headers go to ``report_rate_limit`` (the operator's flow
        control paces the next calls by them).

        Returns:
            The SDK's completion object, the answer's headers, and the options left out.

        Raises:
            openai.APIStatusError: for an HTTP error (other than a refused JSON Schema).
        """
        import openai

        create = client.chat.completions.with_raw_response.create
        model = str(kwargs.get("model"))
        refused = self._refused_options.setdefault(model, set())
        if is_reasoning_model(model):
            refused.update(("max_tokens", *REASONING_UNSUPPORTED))
        omitted = without_options(kwargs, refused)
        if model in self._streamed_thinking:  # said as left out: its thinking is off
            kwargs["enable_thinking"] = False
            omitted.append("enable_thinking")
        if model in self._system_as_user or refuses_system(model):
            with_system_as_user(kwargs)
        if model in self._nine_char_ids or self._host().endswith("mistral.ai"):
            with_nine_char_ids(kwargs)
        if model in self._one_system:
            with_one_system(kwargs)
        if model in self._tool_names or self._host().endswith("googleapis.com"):
            with_tool_names(kwargs)
        while True:  # each refusal handled here changes the request: finitely many sends
            try:
                raw = await create(**with_extra_body(create, kwargs))
                break
            except openai.APIStatusError as e:
                option = refused_option(e, kwargs)
                if option is not None:  # remembered for the model
                    refused.add(option)
                    omitted += without_options(kwargs, {option})
                elif thinking_refused(e, kwargs):  # remembered for the model
                    self._streamed_thinking.add(model)
                    kwargs["enable_thinking"] = False
                    omitted.append("enable_thinking")
                elif system_refused(e, kwargs):  # remembered for the model
                    self._system_as_user.add(model)
                    with_system_as_user(kwargs)
                elif later_systems_refused(e, kwargs):  # remembered for the model
                    self._one_system.add(model)
                    with_one_system(kwargs)
                elif tool_names_refused(e, kwargs):  # remembered for the model
                    self._tool_names.add(model)
                    with_tool_names(kwargs)
                elif call_ids_refused(e, kwargs):
                    self._nine_char_ids.add(model)  # remembered for the model
                    with_nine_char_ids(kwargs)
                elif self.calls_only_content == "auto" and calls_content_refused(e, kwargs):
                    self._empty_calls_content = True
                    with_empty_calls_content(kwargs)
                elif self._rejects_json_schema(e, kwargs):
                    self._json_object_fallback = True
                    kwargs["response_format"] = self._response_format(output_schema or {})
                else:
                    raise
        report_rate_limit(openai_rate_limit(raw.headers))  # paces the next calls
        parsed = raw.parse()
        return (await parsed if inspect.isawaitable(parsed) else parsed), raw.headers, omitted

    def _rejects_json_schema(self, error: Any, kwargs: dict[str, Any]) -> bool:
        """Whether ``error`` is a server refusing ``response_format.type = json_schema``."""
        if self.structured_output != "auto":  # (concurrent requests may all get here)
            return False
        fmt = kwargs.get("response_format") or {}
        if fmt.get("type") != "json_schema" or error.status_code not in (400, 422, 500):
            return False
        text = f"{error.message} {getattr(error, 'body', '')}"
        return "json_schema" in text or "response_format" in text


def _bounds(timeout_s: float, max_bytes: int | None) -> dict[str, Any]:
    """``_bounded_http.answer_bounds`` (httpx imported with the SDK, not before)."""
    from ._bounded_http import answer_bounds

    return answer_bounds(timeout_s, max_bytes)


def _bound_reason(error: BaseException) -> str:
    """``_bounded_http.bound_reason`` (httpx imported with the SDK, not before)."""
    from ._bounded_http import bound_reason

    return bound_reason(error)
