"""Vector stores: documents with ids, metadata and embeddings, searched by similarity.

Shaped like Apache Flink Agents' ``BaseVectorStore`` (resource type ``VECTOR_STORE``): a store
names an ``EMBEDDING_MODEL`` setup that embeds documents on ``add`` and query text on
``query``; documents that carry an ``embedding`` and queries that carry ``query_embedding``
are not embedded again. Inside an action the runtime hands out a durable view of the store:
each ``add``/``query``/``get``/``update``/``delete`` is one durable call, so a replay neither
embeds nor writes again.

**Filters** (``filters=``) use one small dialect every backend supports: ``{"field": value}``
is equality, several keys are AND-ed, values are JSON scalars. A filter on a field that no
document of the collection has is an ``UnknownFilterFieldError`` (a typo would otherwise
return nothing, silently). Backend-specific filters go through ``extra_args``/``**kwargs``
(Chroma: ``where=...``).

**Ids**: a document without an id gets one derived from its content and metadata, so adding
the same document twice (a replayed write) keeps one copy.
"""

from __future__ import annotations

import hashlib
from abc import abstractmethod
from collections.abc import Sequence
from enum import Enum
from typing import Any, ClassVar, cast

from pydantic import BaseModel, ConfigDict, Field

from ._embeddings import EmbeddingModelSetup
from ._errors import AgentsError, ResourceError
from ._event_types import BuiltinEventType
from ._events import Event
from ._resources import Resource, ResourceType
from ._secrets import MaskedStr, cut_masked

__all__ = [
    "VectorStoreError",
    "CollectionNotFoundError",
    "DimensionMismatchError",
    "UnknownFilterFieldError",
    "VectorStoreQueryMode",
    "VectorStoreQuery",
    "Document",
    "Collection",
    "VectorStoreQueryResult",
    "VectorStore",
    "document_id",
    "format_context",
    "ContextRetrievalRequestEvent",
    "ContextRetrievalResponseEvent",
]


class VectorStoreError(AgentsError):
    """A vector store request that cannot be served."""


class CollectionNotFoundError(VectorStoreError):
    """The collection does not exist (and the store does not create collections on demand)."""


class DimensionMismatchError(VectorStoreError):
    """A vector's size differs from the collection's."""


class UnknownFilterFieldError(VectorStoreError):
    """A filter names a metadata field no document of the collection has."""


class VectorStoreQueryMode(str, Enum):
    """How a query searches: ``SEMANTIC``, by embedding similarity (the only mode)."""

    SEMANTIC = "semantic"


class VectorStoreQuery(BaseModel):
    """One similarity search.

    Attributes:
        mode: the search mode (``SEMANTIC``).
        query_text: the text to search for (embedded by the store's embedding model).
        query_embedding: a vector to search with instead (``query_text`` is then ignored
            for search).
        limit: the most documents to return.
        collection_name: the collection (``None``: the store's default).
        filters: metadata equality filter (see the module docstring).
        extra_args: backend-specific arguments.

    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    mode: VectorStoreQueryMode = VectorStoreQueryMode.SEMANTIC
    query_text: str = ""
    query_embedding: list[float] | None = None
    limit: int = Field(default=10, ge=0)
    collection_name: str | None = None
    filters: dict[str, Any] | None = None
    extra_args: dict[str, Any] = Field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.mode.value} query: '{self.query_text}' (limit={self.limit})"


class Document(BaseModel):
    """A piece of text with metadata, as stored and as found.

    Attributes:
        content: the text.
        metadata: JSON scalars by field name (what filters match).
        id: the document's id (``None`` on add: derived from content and metadata).
        embedding: its vector (``None`` on add: the store embeds ``content``).
        score: on query results, the backend's distance to the query (smaller is closer;
            Chroma with cosine space: ``1 - cosine similarity``); ``None`` elsewhere.

    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    content: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None
    embedding: list[float] | None = None
    score: float | None = None

    def __str__(self) -> str:
        preview = self.content if len(self.content) <= 50 else \
            cut_masked(self.content, 50) + "..."
        return f"Document: {preview}"


class VectorStoreQueryResult(BaseModel):
    """The documents a query found, closest first."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    documents: list[Document] = Field(default_factory=list)

    def __str__(self) -> str:
        return f"QueryResult: {len(self.documents)} documents"


def document_id(content: str, metadata: dict[str, Any] | None = None) -> str:
    """The id given to a document that has none: a digest of its content and metadata."""
    import orjson

    data = orjson.dumps([content, metadata or {}], option=orjson.OPT_SORT_KEYS)
    return "doc-" + hashlib.blake2b(data, digest_size=12).hexdigest()


def format_context(documents: Sequence[Document], *, max_chars: int | None = 4000,
                   empty: str = "(no matching documents)") -> str:
    """Number retrieved documents into one block of text for a prompt (RAG).

    Args:
        documents: the documents, closest first (a query's ``documents``).
        max_chars: stop adding documents once the block would pass this many characters
            (the first document is always kept, cut to the limit); ``None``: no limit.
        empty: the text when there are no documents.

    Returns:
        ``"1. <content>"``, a blank line, ``"2. <content>"``...

    """
    parts: list[str] = []
    size = 0
    for i, d in enumerate(documents):
        part = f"{i + 1}. {d.content.strip()}"
        if max_chars is not None and size + len(part) > max_chars:
            if not parts:
                parts.append(part[:max_chars])
            break
        parts.append(part)
        size += len(part) + 2
    return "\n\n".join(parts) if parts else empty


def _as_list(documents: Document | Sequence[Document]) -> list[Document]:
    docs = [documents] if isinstance(documents, Document) else list(documents)
    for i, d in enumerate(docs):
        if not isinstance(d, Document):
            raise VectorStoreError(f"document {i} is a {type(d).__name__}, not a Document")
    return docs


class VectorStore(Resource):
    """Base of vector stores.

    Implement ``_add_embedding``, ``_query_embedding``, ``get`` and ``delete``
    (``_update_embedding`` defaults to an upsert through ``_add_embedding``, ``size`` to
    counting what ``get`` returns); a subclass missing one cannot be instantiated (Python's
    ``TypeError`` naming what is missing). ``_add_embedding`` and ``_update_embedding`` are
    called with keywords (``documents=``, ``collection_name=``), as Apache Flink Agents
    calls them.

    Attributes:
        embedding_model: name of an ``EMBEDDING_MODEL`` setup (``None``: callers always pass
            vectors).
        collection: the default collection.

    """

    RESOURCE_TYPE: ClassVar[ResourceType] = ResourceType.VECTOR_STORE

    embedding_model: str | None = None
    collection: str | None = None

    @property
    def store_kwargs(self) -> dict[str, Any]:
        """Backend arguments merged into every call (none by default)."""
        return {}

    def get_embedding_model(self) -> EmbeddingModelSetup:
        """The embedding model setup this store names.

        Returns:
            The setup.

        Raises:
            VectorStoreError: when the store names none.
            ResourceError: when the named resource is not an ``EmbeddingModelSetup``.

        """
        if self.embedding_model is None:
            raise VectorStoreError(
                f"vector store {self.resource_name!r} has no embedding_model: name one, or "
                "pass documents with 'embedding' and queries with 'query_embedding'")
        setup = self.get_resource(self.embedding_model, ResourceType.EMBEDDING_MODEL)
        if not isinstance(setup, EmbeddingModelSetup):
            raise ResourceError(f"vector store {self.resource_name!r}: {self.embedding_model!r} "
                                "is not an EmbeddingModelSetup")
        return setup

    def _ensure_embeddings(self, docs: list[Document]) -> list[Document]:
        missing = [i for i, d in enumerate(docs) if d.embedding is None]
        if missing:
            # a list of texts gives a list of vectors
            vectors = cast("list[list[float]]", self.get_embedding_model().embed(
                [docs[i].content for i in missing]))
            for i, v in zip(missing, vectors, strict=True):
                docs[i] = docs[i].model_copy(update={"embedding": list(v)})
        return [d if d.id is not None else d.model_copy(update={"id": document_id(
            d.content, d.metadata)}) for d in docs]

    def add(self, documents: Document | Sequence[Document], collection_name: str | None = None,
            **kwargs: Any) -> list[str]:
        """Embed (where needed) and upsert documents.

        Args:
            documents: one document or several.
            collection_name: the collection (default: the store's).
            **kwargs: backend arguments.

        Returns:
            The documents' ids, in order.

        Raises:
            VectorStoreError: for a non-document, a vector of the wrong size
                (``DimensionMismatchError``), a missing collection
                (``CollectionNotFoundError``) or a backend failure.
            EmbeddingError: for an empty document text.

        """
        docs = self._ensure_embeddings(_as_list(documents))
        if not docs:
            return []
        return self._add_embedding(documents=docs, collection_name=collection_name,
                                   **{**self.store_kwargs, **kwargs})

    def update(self, documents: Document | Sequence[Document],
               collection_name: str | None = None, **kwargs: Any) -> None:
        """Replace documents by id (each must have one).

        Raises:
            VectorStoreError: for a document without an id, and as ``add``.

        """
        docs = _as_list(documents)
        if not docs:
            raise VectorStoreError("update needs at least one document")
        for i, d in enumerate(docs):
            if d.id is None:
                raise VectorStoreError(f"update: document {i} has no id")
        self._update_embedding(documents=self._ensure_embeddings(docs),
                               collection_name=collection_name,
                               **{**self.store_kwargs, **kwargs})

    def query(self, query: VectorStoreQuery) -> VectorStoreQueryResult:
        """Find the documents closest to the query's text or vector.

        Args:
            query: the text or vector, how many documents, filters and collection.

        Returns:
            The documents found, closest first.

        Raises:
            VectorStoreError: for an empty query, a wrong-size vector, a missing collection
                or an unknown filter field.
            EmbeddingError: when the query text cannot be embedded.

        """
        if query.query_embedding is not None:
            vector = list(query.query_embedding)
        else:
            if not query.query_text.strip():
                raise VectorStoreError("query: both query_text and query_embedding are empty")
            vector = self.get_embedding_model().embed(query.query_text)  # type: ignore[assignment]
        docs = self._query_embedding(vector, query.limit, query.collection_name, query.filters,
                                     **{**self.store_kwargs, **query.extra_args})
        return VectorStoreQueryResult(documents=docs)

    @abstractmethod
    def get(self, ids: str | list[str] | None = None, collection_name: str | None = None,
            filters: dict[str, Any] | None = None, limit: int | None = 100,
            **kwargs: Any) -> list[Document]:
        """Documents by id, or up to ``limit`` matching ``filters`` (all: ``limit=None``)."""

    @abstractmethod
    def delete(self, ids: str | list[str] | None = None, collection_name: str | None = None,
               filters: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Delete documents by id or filter (both ``None``: every document of the collection)."""

    def size(self, collection_name: str | None = None) -> int:
        """How many documents the collection holds (0 for a missing one).

        By default, by reading them all through ``get``: a store that can count cheaply
        overrides it (Apache Flink Agents' stores need not define it).
        """  # noqa: DOC201
        return len(self.get(None, collection_name, None, None))

    def get_or_create_collection(self, name: str,
                                 metadata: dict[str, Any] | None = None) -> Collection:
        """The collection ``name``, created (with ``metadata``) when missing.

        Flink Agents' ``CollectionManageableVectorStore`` method; a store that manages
        collections overrides it (``ChromaVectorStore`` does).

        Raises:
            NotImplementedError: for a store that does not manage collections.
        """  # noqa: DOC201
        raise NotImplementedError(f"{type(self).__name__} does not manage collections "
                                  "(get_or_create_collection)")

    def get_collection(self, name: str) -> Collection:
        """The collection ``name`` (Flink Agents' ``CollectionManageableVectorStore``).

        Raises:
            CollectionNotFoundError: when it does not exist (a store that manages
                collections).
            NotImplementedError: for a store that does not manage collections.
        """  # noqa: DOC201
        raise NotImplementedError(f"{type(self).__name__} does not manage collections "
                                  "(get_collection)")

    def count(self, collection_name: str | None = None,
              filters: dict[str, Any] | None = None) -> int:
        """How many documents match ``filters`` (all: ``size``); by default through ``get``."""
        if not filters:
            return self.size(collection_name)
        return len(self.get(None, collection_name, filters, None))

    @abstractmethod
    def _add_embedding(self, documents: list[Document], collection_name: str | None,
                       **kwargs: Any) -> list[str]:
        """Upsert documents that all carry an id and an embedding; return their ids."""

    def _update_embedding(self, documents: list[Document], collection_name: str | None,
                          **kwargs: Any) -> None:
        self._add_embedding(documents=documents, collection_name=collection_name, **kwargs)

    @abstractmethod
    def _query_embedding(self, embedding: list[float], limit: int, collection_name: str | None,
                         filters: dict[str, Any] | None, **kwargs: Any) -> list[Document]:
        """The ``limit`` documents closest to ``embedding`` that match ``filters``."""


class Collection(BaseModel):
    """A collection of a vector store, as ``get_or_create_collection`` returns it.

    Attributes:
        name: its name.
        metadata: the metadata it was created with.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    name: str
    metadata: dict[str, Any] | None = None


class ContextRetrievalRequestEvent(Event, defer_build=True):
    """Asks the built-in context retrieval action to search a vector store.

    Attributes:
        query: the text to find context for.
        vector_store: name of a ``VECTOR_STORE`` resource.
        max_results: the most documents to return.
        collection_name: the collection (``None``: the store's default).
        filters: metadata equality filter (see ``VectorStore``).

    """

    EVENT_TYPE: ClassVar[str] = BuiltinEventType("ContextRetrievalRequestEvent")
    POSITIONAL: ClassVar[tuple[str, ...]] = ("query", "vector_store", "max_results")
    query: str
    vector_store: str
    max_results: int = Field(default=3, ge=0)
    collection_name: str | None = None
    filters: dict[str, Any] | None = None


class ContextRetrievalResponseEvent(Event, defer_build=True):
    """The answer to a ``ContextRetrievalRequestEvent``.

    Attributes:
        request_id: id of the request this answers.
        query: the request's query.
        documents: the documents found, closest first (empty when the search failed).
        error: why the search failed, when it did (unknown store, missing collection...);
            known secrets masked (``api.mask_secrets``).

    """

    EVENT_TYPE: ClassVar[str] = BuiltinEventType("ContextRetrievalResponseEvent")
    POSITIONAL: ClassVar[tuple[str, ...]] = ("request_id", "query", "documents")
    request_id: str
    query: str = ""
    documents: list[Document] = Field(default_factory=list)
    error: MaskedStr | None = None
