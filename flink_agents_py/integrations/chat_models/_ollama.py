"""Ollama's native chat API (``POST /api/chat``) through the official ``ollama`` client.

Needs the ``ollama`` extra (``pip install 'flink-agents-py[ollama]'``). Mapping:

- messages keep their roles; an assistant message's tool calls go as
  ``tool_calls: [{"function": {"name", "arguments": {...}}}]`` and a tool result as
  ``{"role": "tool", "content": ..., "tool_name": ...}``. Ollama gives tool calls no ids: the
  chat action gives each a unique synthetic id, and results go back in call order, each with
  its tool's name. An answer's ``thinking`` (``think`` on) is kept as the message's
  ``reasoning`` and goes back with it.
- tools as ``{"type": "function", "function": {"name", "description", "parameters"}}``. The
  ``ollama`` client re-validates tools into its own model, which keeps ``type``,
  ``description``, ``enum``, ``items`` and ``required`` of each property and drops other
  JSON Schema keywords (``anyOf``, ``default``...).
- structured output: the JSON Schema as ``format``.
- options: ``keep_alive``, ``think``, ``logprobs``, ``top_logprobs`` and ``format``
  (``"json"``: JSON mode; an ``output_schema`` is the format instead) are request fields;
  anything else (``temperature``, ``seed``, ``num_ctx``...) goes into ``options``, with
  ``max_tokens`` (and OpenAI's ``max_completion_tokens``) renamed ``num_predict``,
  Anthropic's ``stop_sequences`` ``stop``; ``tool_choice`` and ``parallel_tool_calls``, which
  Ollama does not take, are left out and named in ``metadata["omitted_options"]``.
- usage from ``prompt_eval_count`` / ``eval_count``; ``done_reason`` as the finish reason.
- tool call ``arguments`` sent as JSON text (servers imitating Ollama's API, proxies
  translating OpenAI's form) are read as OpenAI's are (``_answers.tool_arguments``) before
  the ``ollama`` client, which takes only an object there, reads the answer
  (``_ollama_transport.ArgumentsAsObjects``, the client's HTTP transport).
- tool calls the model wrote as text (a template Ollama cannot parse, a parse that failed:
  ``<tool_call>...</tool_call>``, ``[TOOL_CALLS]``, a bare JSON object naming an offered
  tool) are read as its calls (``_text_calls``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import Field, PrivateAttr

from ...api import (
    ChatMessage,
    ChatModelConnection,
    ChatResponse,
    MessageRole,
    ProviderError,
    ToolCall,
    ToolMetadata,
    secret_from_env,
)
from ...api.internal import (
    clip,
    mask_secrets,
    refuse_empty_answer,
    refuse_truncated_calls,
    register_sdk_default_url,
    scrub_exception,
    too_deep,
)
from ._answers import answer_body, reported_usage, tool_arguments, valid_text
from ._common import (
    FreshOnUnpickle,
    LoopBoundClient,
    LoopBoundSdkConnection,
    import_sdk,
    not_found_hint,
    provider_error,
    unanswered_hint,
    url_path,
)
from ._text_calls import calls_from_text
from ._wire import named_as, reasoning_of, reasoning_text

__all__ = ["OllamaChatModel", "to_ollama_messages"]

_REQUEST_FIELDS = ("keep_alive", "think", "logprobs", "top_logprobs", "format")
_NOT_TAKEN = ("tool_choice", "parallel_tool_calls")
"""Options of other providers that ``/api/chat`` has no field for: left out, and said so
(``metadata["omitted_options"]``); a setup's ``tool_choice: "required"`` went into the model
options, which Ollama ignores, so the model was not made to call a tool and nothing said so."""


def to_ollama_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """Map our messages to Ollama ``/api/chat`` message dicts."""
    out: list[dict[str, Any]] = []
    for m in messages:
        d: dict[str, Any] = {"role": m.role.value, "content": m.content}
        if m.tool_calls:
            d["tool_calls"] = [{"function": {"name": c.name, "arguments": dict(c.arguments)}}
                               for c in m.tool_calls]
        if m.role == MessageRole.TOOL and m.name:
            d["tool_name"] = m.name
        thought = reasoning_text(m.reasoning) if m.role == MessageRole.ASSISTANT else None
        if thought is not None:
            d["thinking"] = thought
        out.append(d)
    return out


class OllamaChatModel(FreshOnUnpickle, LoopBoundSdkConnection, ChatModelConnection):
    """An Ollama server.

    Attributes:
        host: the server, e.g. ``http://127.0.0.1:11434`` (``None``: ``OLLAMA_HOST``, else
            Ollama's default).
        default_model: the model when the setup names none.
        timeout_s: request timeout in seconds (a timeout is a retryable ``ProviderError``);
            an answer's body must also come whole within it of its headers.
        max_answer_bytes: the most bytes of one HTTP answer read (``None``: 64 MiB,
            ``MAX_ANSWER_BYTES``); a longer answer fails the call naming the bound and the URL.
        keep_alive: how long the server keeps the model loaded (Ollama's ``keep_alive``).
    """

    host: str | None = None
    default_model: str = "llama3.2"
    timeout_s: float = Field(default=120.0, gt=0)
    max_answer_bytes: int | None = Field(default=None, ge=1)
    keep_alive: str | float | None = None

    _clients: LoopBoundClient | None = PrivateAttr(default=None)
    _no_thinking: set[str] = PrivateAttr(default_factory=set)

    def _client_factory(self) -> Callable[[], Any]:
        ollama = import_sdk("ollama", "ollama", "the Ollama chat model")
        from ._ollama_transport import ArgumentsAsObjects  # httpx: with the client

        register_sdk_default_url("OLLAMA_HOST", self.host)  # read by the SDK then
        secret_from_env("OLLAMA_API_KEY")  # the SDK sends it as a bearer token itself
        return lambda: ollama.AsyncClient(host=self.host, timeout=self.timeout_s,
                                          transport=ArgumentsAsObjects(
                                              self.host, self.timeout_s, self.max_answer_bytes))

    async def achat(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str | None = None,
        tools: Sequence[ToolMetadata] = (),
        output_schema: dict[str, Any] | None = None,
        **options: Any,
    ) -> ChatResponse:
        """Send one ``/api/chat`` request (not streamed); see ``ChatModelConnection.chat``.

        A model that does not think refuses ``think`` ("does not support thinking"): the
        request goes again without it, and so from then on for that model (the answer's
        ``metadata["omitted_options"]`` says so).

        Returns:
            The model's answer.

        Raises:
            ProviderError: with the HTTP status, ``retryable`` for timeouts, connection
                failures, 408/429 and 5xx.
            ImportError: naming the ``ollama`` extra when the client is not installed.
        """
        client = self._client()
        import httpx
        import ollama
        import pydantic

        options = named_as("ollama", options)  # max_tokens is num_predict...
        request: dict[str, Any] = {k: options.pop(k) for k in _REQUEST_FIELDS if k in options}
        if self.keep_alive is not None:
            request.setdefault("keep_alive", self.keep_alive)
        if tools:
            request["tools"] = [{"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters}}
                for t in tools]
        if output_schema is not None:
            request["format"] = output_schema
        model = model or self.default_model
        omitted = ["think"] if model in self._no_thinking and request.pop("think", None) else []
        for name in _NOT_TAKEN:  # Ollama has no such field: as a model option, ignored
            if options.pop(name, None) is not None:
                omitted.append(name)
        try:
            resp = await self._send(client, model, to_ollama_messages(messages), options,
                                    request, omitted)
        except ollama.ResponseError as e:
            if e.status_code is None or e.status_code <= 0:  # an error in a 200 body
                raise ProviderError(f"ollama chat failed: {e.error}") from scrub_exception(e)
            error = provider_error(f"ollama chat failed (model {model!r}): {e.error}"
                                   f"{self._not_found(e)}", e.status_code)
            raise error from scrub_exception(e)
        except ollama.RequestError as e:
            raise ProviderError(
                f"ollama chat request is invalid: {e.error}") from scrub_exception(e)
        except (httpx.TimeoutException, ConnectionError, httpx.TransportError) as e:
            error = provider_error(f"ollama chat failed (model {model!r}): {type(e).__name__}: "
                                   f"{e}{unanswered_hint(e, self._chat_url())}", None)
            raise error from scrub_exception(e)
        except RecursionError as e:  # a body nested deeper than the client's JSON reader goes
            raise ProviderError(too_deep(self, e)) from e
        except pydantic.ValidationError as e:  # a body the client's models refuse
            sent = e.errors()[0].get("input")
            raise ProviderError(
                f"ollama chat failed: the server's answer is not of Ollama's form: "
                f"{e.error_count()} problem(s), first at {_where(e)}: {e.errors()[0]['msg']} "
                f"(it sent {_kind(sent)}); a server speaking OpenAI's API: OpenAIChatModel "
                f"with its /v1 URL as base_url") from scrub_exception(e)
        except json.JSONDecodeError as e:  # a body that is no JSON (the client's json.loads)
            raise ProviderError(
                f"ollama chat failed (model {model!r}): the server's answer is no JSON "
                f"({type(e).__name__}: {e}; it sent {clip(mask_secrets(e.doc), 300)!r}): a "
                f"streamed "
                f"answer to a request for one, or a server of another API at this URL",
                retryable=False) from scrub_exception(e)
        response = _from_ollama(resp)
        if tools:  # written as text: a model whose template Ollama cannot parse
            response = calls_from_text(response, {t.name: t.parameters for t in tools},
                                       bare="format" not in request)  # JSON asked for
        if omitted:  # said with the answer: the setup asked for it
            response = response.model_copy(update={"metadata": {
                **response.metadata, "omitted_options": omitted}})
        return response

    def _chat_url(self) -> str | None:
        """Where the chat is posted, when ``host`` names it (the client adds ``/api/chat``)."""
        return f"{self.host.rstrip('/')}/api/chat" if self.host else None

    async def _send(self, client: Any, model: str, messages: list[dict[str, Any]],
                    options: dict[str, Any], request: dict[str, Any], omitted: list[str]) -> Any:
        """Send the request; again without ``think`` when the model does not think.

        Args:
            client: the ``ollama.AsyncClient``.
            model: the model.
            messages: the messages, in Ollama's form.
            options: the model options.
            request: the request's other fields (``think`` is taken out on a refusal).
            omitted: the fields left out (``think`` is added on a refusal).

        Returns:
            The client's answer.

        Raises:
            ollama.ResponseError: for an HTTP error (other than the refusal handled here).
        """
        import ollama

        while True:  # a model that does not think is asked again without think, once
            try:
                return await client.chat(model=model, messages=messages,
                                         options=options or None, stream=False, **request)
            except ollama.ResponseError as e:
                if e.status_code != 400 or "does not support thinking" not in str(e.error) \
                        or not request.pop("think", None):
                    raise
                self._no_thinking.add(model)  # remembered for the model
                omitted.append("think")

    def _not_found(self, error: Any) -> str:
        """Where a 404's request went, and whether ``host`` names a path the client adds."""
        base = getattr(getattr(self._client(), "_client", None), "base_url", None)  # httpx's
        if base is None:
            return ""
        url = f"{str(base).rstrip('/')}/api/chat"
        deep = url_path(url).rstrip("/").endswith(("/api/api/chat", "/v1/api/chat"))
        return not_found_hint(error.status_code, url, (
            "host is the server's root, without /api or /v1: the client adds /api/chat (a "
            "/v1 URL is Ollama's OpenAI-compatible API: OpenAIChatModel's base_url)")
            if deep else "")


def _kind(value: Any) -> str:
    """What kind of JSON value ``value`` is, for a message (never the value: it may be long)."""
    kinds = {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
             int: "a number", float: "a number"}
    return "null" if value is None else kinds.get(type(value), type(value).__name__)


def _where(error: Any) -> str:
    """Where the first problem of a pydantic ``ValidationError`` is (``message.tool_calls.0``)."""
    return ".".join(str(p) for p in error.errors()[0]["loc"]) or "the top"


def _from_ollama(resp: Any) -> ChatResponse:
    body = valid_text(answer_body(resp, "ollama chat"))
    msg = body.get("message") or {}
    raw_calls = msg.get("tool_calls") or []
    refuse_truncated_calls(body.get("done_reason"),
                           [(c.get("function") or {}).get("name") for c in raw_calls])
    calls = []
    for i, c in enumerate(raw_calls):
        fn = c.get("function") or {}
        calls.append(ToolCall(id=str(c.get("id") or ""), name=fn.get("name") or "",
                              arguments=tool_arguments(fn.get("arguments") or {}, i,
                                                       fn.get("name"))))
    finish = body.get("done_reason")
    refuse_empty_answer(finish, bool(msg.get("content") or calls))
    return ChatResponse(
        message=ChatMessage(role=MessageRole.ASSISTANT, content=msg.get("content") or "",
                            tool_calls=calls, reasoning=reasoning_of(msg.get("thinking"))),
        model=body.get("model"),
        usage=reported_usage(body.get("prompt_eval_count"), body.get("eval_count")),
        finish_reason="tool_calls" if calls else finish,
        metadata={k: body[k] for k in ("created_at", "total_duration") if body.get(k)},
    )
