"""Provider embeddings: OpenAI-compatible ``/v1/embeddings`` and Ollama ``/api/embed``.

Each connection reads its API key from an environment variable when the client is made: the
key is never a field, so it never enters the plan, keyed state or the event log.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from pydantic import Field, PrivateAttr

from ...api import (
    EmbeddingModelConnection,
    EmbeddingResult,
    EmbeddingTokenUsage,
    ProviderError,
    secret_from_env,
)
from ...api.internal import (
    clip,
    mask_secrets,
    register_sdk_default_url,
    register_sdk_env_headers,
    scrub_exception,
)
from ..chat_models._answers import token_count
from ..chat_models._common import (
    FreshOnUnpickle,
    import_sdk,
    provider_error,
    unanswered_hint,
)

__all__ = ["OpenAIEmbeddingModel", "OllamaEmbeddingModel"]

logger = logging.getLogger(__name__)


def _unread(named: str, answer: Any, error: BaseException) -> ProviderError:
    """The error for an answer that is not of the API's form (a stream, another API's page).

    Returns:
        A ``ProviderError`` naming the call and quoting the answer's start (secrets masked),
        not retryable (the same request gets the same kind of answer).
    """
    shown = clip(mask_secrets(str(answer)), 300)
    said = clip(mask_secrets(f"{type(error).__name__}: {error}"), 500)
    return ProviderError(f"{named}: the server's answer is not of the API's form ({said}; "
                         f"it sent {shown!r}): a streamed answer to a request for one, or a "
                         f"server of another API at this URL", retryable=False)


def _batches(texts: list[str], size: int) -> list[list[str]]:
    return [texts[i: i + size] for i in range(0, len(texts), size)]


class OpenAIEmbeddingModel(FreshOnUnpickle, EmbeddingModelConnection):
    """An OpenAI-compatible embeddings endpoint (OpenAI, vLLM, llama.cpp's server, Ollama ``/v1``).

    Attributes:
        base_url: the API base URL (``None``: the SDK's default or ``OPENAI_BASE_URL``).
        api_key_env: the environment variable holding the API key (a local server that
            needs none gets a placeholder).
        default_model: the model when the setup names none.
        dimensions: ask for vectors of this size (models that support it, e.g.
            ``text-embedding-3-*``); ``None``: the model's own.
        batch_size: texts per request.
        timeout_s: request timeout in seconds; an answer's body must also come whole
            within it of its headers.
        max_answer_bytes: the most bytes of one HTTP answer read (``None``: 64 MiB,
            ``MAX_ANSWER_BYTES``); a longer answer fails the call naming the bound and the URL.
        max_retries: the SDK's own retries (0: failures reach the caller at once).

    """

    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    default_model: str = "text-embedding-3-small"
    dimensions: int | None = Field(default=None, ge=1)
    batch_size: int = Field(default=256, ge=1, le=2048)
    timeout_s: float = Field(default=60.0, gt=0)
    max_answer_bytes: int | None = Field(default=None, ge=1)
    max_retries: int = Field(default=0, ge=0)

    _client: Any = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def _get_client(self) -> Any:
        with self._lock:
            if self._client is None:
                openai = import_sdk("openai", "openai", "the OpenAI-compatible embedding model")
                register_sdk_default_url("OPENAI_BASE_URL", self.base_url)
                register_sdk_env_headers("OPENAI_CUSTOM_HEADERS")
                self._client = openai.OpenAI(
                    base_url=self.base_url, api_key=self._api_key() or "unused",
                    timeout=self.timeout_s, max_retries=self.max_retries,
                    http_client=openai.DefaultHttpxClient(
                        event_hooks=_answer_bounds(self.timeout_s, self.max_answer_bytes)))
            return self._client

    def _api_key(self) -> str | None:
        """The API key: ``$api_key_env``'s value, registered as a secret (``None``: unset)."""
        return secret_from_env(self.api_key_env)

    def close(self) -> None:
        """Drop the client."""
        self._client = None

    def embed_texts(self, texts: list[str], *, model: str | None = None,
                    **options: Any) -> EmbeddingResult:
        """Embed ``texts`` in batches of ``batch_size``; ``options`` go into each request.

        Returns:
            One vector per text, in order, with token usage when known.

        Raises:
            ProviderError: on an HTTP error (``status_code`` set; 429/5xx retryable), a
                timeout or a connection failure (retryable), or an answer of the wrong size
                or not of the API's form (a stream's text).

        """
        openai = import_sdk("openai", "openai", "the OpenAI-compatible embedding model")
        name = model or self.default_model
        dims = options.pop("dimensions", self.dimensions)
        size = int(options.pop("batch_size", self.batch_size))
        request: dict[str, Any] = {"model": name, "encoding_format": "float", **options}
        if dims is not None:
            request["dimensions"] = dims
        vectors: list[list[float]] = []
        prompt = total = 0
        for batch in _batches(texts, size):
            try:
                resp = self._get_client().embeddings.create(input=batch, **request)
            except openai.APIStatusError as e:
                error = provider_error(
                    f"embeddings {name!r}: HTTP {e.status_code}: {e.message}", e.status_code)
                raise error from scrub_exception(e)
            except (openai.APITimeoutError, openai.APIConnectionError) as e:
                error = provider_error(f"embeddings {name!r}: {type(e).__name__}: {e}"
                                       f"{unanswered_hint(e)}{_bound_reason(e)}", None)
                raise error from scrub_exception(e)
            try:  # the SDK hands back the body's text when it is no JSON
                data = sorted(resp.data, key=lambda d: d.index)
                if len(data) != len(batch):
                    raise ProviderError(f"embeddings {name!r}: {len(data)} vectors for "
                                        f"{len(batch)} texts", retryable=False)
                vectors.extend([float(x) for x in d.embedding] for d in data)
                if resp.usage is not None:
                    prompt += _count(getattr(resp.usage, "prompt_tokens", None))
                    total += _count(getattr(resp.usage, "total_tokens", None))
            except (AttributeError, TypeError, ValueError) as e:
                error = _unread(f"embeddings {name!r}", resp, e)
                raise error from scrub_exception(e)
        return EmbeddingResult(embeddings=vectors, model=name,
                               token_usage=EmbeddingTokenUsage(prompt_tokens=prompt,
                                                               total_tokens=total))


class OllamaEmbeddingModel(FreshOnUnpickle, EmbeddingModelConnection):
    """Ollama's native embeddings (``POST /api/embed``) through the ``ollama`` client.

    Attributes:
        base_url: the server (``None``: the client's default, ``OLLAMA_HOST`` or
            ``http://127.0.0.1:11434``).
        default_model: the model when the setup names none.
        truncate: let the server cut inputs longer than the model's context (it does not say
            which it cut); ``False``: such an input fails the request.
        dimensions: ask for vectors of this size (models that support it).
        keep_alive: how long the server keeps the model loaded (``"5m"``...).
        batch_size: texts per request.
        timeout_s: request timeout in seconds; an answer's body must also come whole
            within it of its headers.
        max_answer_bytes: the most bytes of one HTTP answer read (``None``: 64 MiB,
            ``MAX_ANSWER_BYTES``); a longer answer fails the call naming the bound and the URL.

    """

    base_url: str | None = None
    default_model: str = "nomic-embed-text"
    truncate: bool = True
    dimensions: int | None = Field(default=None, ge=1)
    keep_alive: str | None = None
    batch_size: int = Field(default=64, ge=1)
    timeout_s: float = Field(default=60.0, gt=0)
    max_answer_bytes: int | None = Field(default=None, ge=1)

    _client: Any = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def _get_client(self) -> Any:
        with self._lock:
            if self._client is None:
                ollama = import_sdk("ollama", "ollama", "the Ollama embedding model")
                register_sdk_default_url("OLLAMA_HOST", self.base_url)
                secret_from_env("OLLAMA_API_KEY")  # sent by the SDK itself
                self._client = ollama.Client(host=self.base_url, timeout=self.timeout_s,
                                             event_hooks=_answer_bounds(
                                                 self.timeout_s, self.max_answer_bytes))
            return self._client

    def close(self) -> None:
        """Drop the client."""
        self._client = None

    def _embed_url(self) -> str | None:
        """Where the texts are posted, when ``base_url`` names it (+ ``/api/embed``)."""
        return f"{self.base_url.rstrip('/')}/api/embed" if self.base_url else None

    def embed_texts(self, texts: list[str], *, model: str | None = None,
                    **options: Any) -> EmbeddingResult:
        """Embed ``texts`` in batches of ``batch_size``.

        Returns:
            One vector per text, in order, with token usage when known.

        Raises:
            ProviderError: on an HTTP error (``status_code`` set) or a connection failure
                (retryable), or an answer of the wrong size or not of the API's form.

        """
        ollama = import_sdk("ollama", "ollama", "the Ollama embedding model")
        name = model or self.default_model
        size = int(options.pop("batch_size", self.batch_size))
        request: dict[str, Any] = {"model": name, "truncate": self.truncate}
        dims = options.pop("dimensions", self.dimensions)
        if dims is not None:
            request["dimensions"] = dims
        if self.keep_alive is not None:
            request["keep_alive"] = self.keep_alive
        if options:
            request["options"] = options
        vectors: list[list[float]] = []
        tokens = 0
        for batch in _batches(texts, size):
            try:
                resp = self._get_client().embed(input=batch, **request)
            except ollama.ResponseError as e:
                error = provider_error(
                    f"ollama embed {name!r}: HTTP {e.status_code}: {e.error}", e.status_code)
                raise error from scrub_exception(e)
            except ValueError as e:  # no JSON (the client's loads), or JSON of another form
                error = _unread(f"ollama embed {name!r}", getattr(e, "doc", "(see the error)"),
                                e)
                raise error from scrub_exception(e)
            except Exception as e:  # noqa: BLE001 - httpx errors surface as their own types
                if not isinstance(e, (ConnectionError, TimeoutError, OSError)) and not type(
                        e).__module__.startswith("httpx") and not _bound_reason(e):
                    raise
                error = provider_error(f"ollama embed {name!r}: {type(e).__name__}: {e}"
                                       f"{unanswered_hint(e, self._embed_url())}", None)
                raise error from scrub_exception(e)
            got = list(resp.embeddings)
            if len(got) != len(batch):
                raise ProviderError(f"ollama embed {name!r}: {len(got)} vectors for "
                                    f"{len(batch)} texts", retryable=False)
            vectors.extend([float(x) for x in v] for v in got)
            tokens += _count(getattr(resp, "prompt_eval_count", None))
        return EmbeddingResult(embeddings=vectors, model=name,
                               token_usage=EmbeddingTokenUsage(prompt_tokens=tokens,
                                                               total_tokens=tokens))


def _count(value: Any) -> int:
    """A token count an embedding answer reports, as the whole tokens it says (0 if none).

    A count that is no number (``NaN``, text, a list) is 0 and logged, not an error: before,
    it failed the request after the provider had answered (and billed) it.

    Args:
        value: the count (``None``: not given).

    Returns:
        The count, at least 0.
    """
    try:
        return max(0, token_count(value) or 0)
    except ValueError:
        logger.warning("an embedding answer's token count %s is no number of tokens: "
                       "counted as 0", clip(repr(value), 100))
        return 0


def _answer_bounds(timeout_s: float, max_bytes: int | None) -> dict[str, Any]:
    """The hooks reading a provider's answer within bounds (size, time, encoding).

    ``chat_models._bounded_http``: an endless answer kept an embedding call reading for ever
    while the process grew by it. Imported with the SDK (httpx), not before.

    Returns:
        The blocking client's ``event_hooks``.
    """
    from ..chat_models._bounded_http import blocking_answer_bounds

    return blocking_answer_bounds(timeout_s, max_bytes)


def _bound_reason(error: BaseException) -> str:
    """``chat_models._bounded_http.bound_reason`` (imported with the SDK, not before)."""
    from ..chat_models._bounded_http import bound_reason

    return bound_reason(error)
