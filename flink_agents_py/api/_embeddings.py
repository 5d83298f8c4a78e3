"""Embedding models: a connection (how to reach a model) and a setup (which model, which options).

Shaped like chat models and like Apache Flink Agents' embedding models: an
``EmbeddingModelConnection`` (resource type ``EMBEDDING_MODEL_CONNECTION``) knows a provider
or an in-process model; an ``EmbeddingModelSetup`` (``EMBEDDING_MODEL``) names a connection
and picks the model and its options. Actions ask a setup by name::

    model = ctx.get_resource("text_embedder", ResourceType.EMBEDDING_MODEL)
    vector = model.embed("a text")            # list[float]
    vectors = model.embed(["one", "two"])     # list[list[float]]

Inside an action the runtime hands out a durable view of the setup: each ``embed`` is one
durable call, so a replay returns the recorded vectors instead of embedding again.
"""

from __future__ import annotations

import abc
import asyncio
import math
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from ._errors import AgentsError, ProviderError, ResourceError, too_deep
from ._resources import Resource, ResourceType

__all__ = [
    "EmbeddingError",
    "EmbeddingTokenUsage",
    "EmbeddingResult",
    "EmbeddingModelConnection",
    "EmbeddingModelSetup",
    "check_texts",
]


class EmbeddingError(AgentsError):
    """An embedding request that cannot be served: empty text, wrong input type, bad model."""


class EmbeddingTokenUsage(BaseModel):
    """Token usage a provider reported for one embedding request."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    prompt_tokens: int = 0
    total_tokens: int = 0


class EmbeddingResult(BaseModel):
    """The vectors of one embedding request, with what the provider said about it.

    Attributes:
        embeddings: one vector per input text, in input order (a single vector when the
            request was one string).
        token_usage: the provider's token counts, when it reports them.
        truncated: indices of the inputs that were longer than the model's limit and were
            cut to it (their vectors describe the first part only).
        model: the model that produced the vectors, when known.

    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    embeddings: list[float] | list[list[float]]
    token_usage: EmbeddingTokenUsage | None = None
    truncated: list[int] = Field(default_factory=list)
    model: str | None = None


def check_texts(text: str | Sequence[str], where: str) -> tuple[list[str], bool]:
    """Validate embedding input.

    Args:
        text: one text or a sequence of texts.
        where: what is embedding, for error messages.

    Returns:
        The texts as a list, and whether one string was given.

    Raises:
        EmbeddingError: for a non-string input, an empty list, or an empty/blank text (the
            message names its index and ``where``).

    """
    single = isinstance(text, str)
    texts: list[str] = [text] if isinstance(text, str) else list(text)
    if not texts:
        raise EmbeddingError(f"{where}: nothing to embed (an empty list of texts)")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise EmbeddingError(f"{where}: text {i} is a {type(t).__name__}, not a str")
        if not t.strip():
            raise EmbeddingError(f"{where}: text {i} is empty; an empty text has no embedding")
    return texts, single


class EmbeddingModelConnection(Resource):
    """Base of embedding connections. One method to implement: ``embed_texts``.

    A subclass without it cannot be instantiated (Python's ``TypeError`` naming it), unless
    it implements Apache Flink Agents' ``embed(text, **kwargs)`` instead, which then serves
    ``embed_texts`` (given the texts as a list, and ``model=`` when one is named).

    Implementations are shared by every key of an operator and may be called from several
    threads of the I/O executor at once: guard what is not thread-safe.
    """

    RESOURCE_TYPE: ClassVar[ResourceType] = ResourceType.EMBEDDING_MODEL_CONNECTION

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if ("embed_texts" in getattr(cls, "__abstractmethods__", ())
                and cls.embed is not EmbeddingModelConnection.embed):
            # a connection written for Apache Flink Agents implements embed(text, **kwargs)
            cls.embed_texts = _embed_texts_by_embed  # type: ignore[method-assign]
            abc.update_abstractmethods(cls)

    @abstractmethod
    def embed_texts(self, texts: list[str], *, model: str | None = None,
                    **options: Any) -> EmbeddingResult:
        """Embed non-empty texts (already checked) in one batch.

        Args:
            texts: the texts, each non-blank.
            model: the provider's model name (``None``: the connection's default).
            **options: provider options (``dimensions``, ``batch_size``...).

        Returns:
            An ``EmbeddingResult`` whose ``embeddings`` has one vector per text.

        Raises:
            ProviderError: when a remote provider fails (``retryable`` for timeouts, 5xx).

        """

    def embed_with_usage(self, text: str | Sequence[str], **kwargs: Any) -> EmbeddingResult:
        """Embed one text or a list of texts, returning usage and truncation too.

        Args:
            text: one text or a list of texts.
            **kwargs: options of the provider's embedding request.

        Returns:
            The vectors, token usage and whether any text was truncated.

        Raises:
            EmbeddingError: for empty or non-string input.
            ProviderError: the connection's; also for an answer nested deeper than a JSON
                reader's stack, or a vector holding ``NaN`` or an infinity.
        """
        texts, single = check_texts(text, f"embedding connection {self.resource_name!r}")
        try:
            result = self.embed_texts(texts, **kwargs)
        except RecursionError as e:
            raise ProviderError(too_deep(self, e)) from e
        _refuse_not_finite(self, result.embeddings)
        if single:
            vectors = result.embeddings
            result = result.model_copy(update={"embeddings": vectors[0]})
        return result

    def embed(self, text: str | Sequence[str], **kwargs: Any) -> list[float] | list[list[float]]:
        """Embed one text (a vector) or a list of texts (a list of vectors).

        Args:
            text: one text or a list of texts.
            **kwargs: options of the embedding request.

        Returns:
            One vector for a string, a list of vectors for a list.

        Raises:
            EmbeddingError: for empty or non-string input.
        """
        return self.embed_with_usage(text, **kwargs).embeddings


def _refuse_not_finite(connection: EmbeddingModelConnection, vectors: Any) -> None:
    """Refuse vectors holding ``NaN`` or an infinity (the SDKs' JSON readers take them).

    Such a vector has no JSON form (a durable call's result could not be recorded) and no
    distance a vector store can order: stored, it made every search of its collection
    compare against ``NaN``. A local model can produce one too (a half-precision overflow).

    Raises:
        ProviderError: (not retryable) naming the connection and the vector.
    """
    rows = vectors if vectors and isinstance(vectors[0], list) else [vectors]
    for i, row in enumerate(rows):
        try:
            if math.isfinite(math.fsum(row)):  # one C loop; NaN and infinities carry through
                continue
        except OverflowError:  # (finite values summing past the float range: look closer)
            pass
        except TypeError:
            continue  # not numbers: the connection's own business
        if not all(math.isfinite(x) for x in row):
            raise ProviderError(
                f"{type(connection).__name__} {connection.resource_name!r}: the server "
                f"answered with a vector holding NaN or an infinity (vector {i}), which has "
                f"no JSON form and no distance a vector store can order", retryable=False)


def _embed_texts_by_embed(self: EmbeddingModelConnection, texts: list[str], *,
                          model: str | None = None, **options: Any) -> EmbeddingResult:
    """``embed_texts`` of a connection that implements Flink Agents' ``embed`` instead."""
    if model is not None:
        options["model"] = model
    return EmbeddingResult(embeddings=self.embed(list(texts), **options))


class EmbeddingModelSetup(Resource):
    """Which model of a connection, with which options.

    Attributes:
        connection: name of an ``EMBEDDING_MODEL_CONNECTION`` resource.
        model: the provider's model name (``None``: the connection's default).
        options: provider options passed with every request (e.g. ``dimensions``).

    """

    RESOURCE_TYPE: ClassVar[ResourceType] = ResourceType.EMBEDDING_MODEL

    connection: str
    model: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)

    @property
    def model_kwargs(self) -> dict[str, Any]:
        """The options sent with each request (Flink Agents' name for them)."""
        return {**self.options, "model": self.model}

    def get_connection(self) -> EmbeddingModelConnection:
        """The connection this setup names.

        Returns:
            The embedding model connection.

        Raises:
            ResourceNotFoundError: when it is not declared.
            ResourceError: when the resource of that name is not an embedding connection.
        """
        conn = self.get_resource(self.connection, ResourceType.EMBEDDING_MODEL_CONNECTION)
        if not isinstance(conn, EmbeddingModelConnection):
            raise ResourceError(f"embedding model {self.resource_name!r}: {self.connection!r} "
                                "is not an EmbeddingModelConnection")
        return conn

    def embed_with_usage(self, text: str | Sequence[str], **kwargs: Any) -> EmbeddingResult:
        """Embed with this setup's model and options (``kwargs`` override the options).

        Args:
            text: one text or a list of texts.
            **kwargs: options overriding this setup's.

        Returns:
            The vectors, token usage and whether any text was truncated.

        Raises:
            EmbeddingError: for empty or non-string input.
        """
        return self.get_connection().embed_with_usage(text, **{**self.model_kwargs, **kwargs})

    def embed(self, text: str | Sequence[str], **kwargs: Any) -> list[float] | list[list[float]]:
        """Embed one text (a vector) or a list of texts (a list of vectors).

        Args:
            text: one text or a list of texts.
            **kwargs: options of the embedding request.

        Returns:
            One vector for a string, a list of vectors for a list.

        Raises:
            EmbeddingError: for empty or non-string input.
        """
        return self.embed_with_usage(text, **kwargs).embeddings

    async def aembed(self, text: str | Sequence[str], **kwargs: Any
                     ) -> list[float] | list[list[float]]:
        """Async form of ``embed`` (runs it in a worker thread)."""
        return await asyncio.to_thread(self.embed, text, **kwargs)

