"""Chroma as the vector store: embedded (persisting to a local path) or a Chroma server.

Needs the ``knowledge`` extra (``chromadb``). Three modes, by the fields set:

- ``persist_directory="..."``: ``chromadb.PersistentClient``, in-process, persisting there
  (the embedded default);
- ``host=...`` (and ``port``): ``chromadb.HttpClient`` against ``chroma run --path DIR --port N``,
  its answers read within bounds (``timeout_s``, ``max_answer_bytes``: ``_chroma_http``);
- neither: ``chromadb.EphemeralClient``, in memory (tests).

Chroma never embeds here: every collection is created without an embedding function and
every call passes vectors, so Chroma never fetches its default model. In-process clients
join the process's Chroma instance of their path (or the in-memory one) with the settings it
was opened with, so chromadb's own client and this store see the same collections (chromadb
1.x sends no product telemetry; a server client turns it off).
Collections use cosine distance (``Document.score`` is ``1 - cosine similarity``).
The metadata field names seen in a collection are kept in its metadata (``fa:fields``), so a
filter on a field no document has is refused (``UnknownFilterFieldError``).
"""

from __future__ import annotations

import os
import threading
from typing import Any

from pydantic import Field, PrivateAttr

from ...api import (
    Collection,
    CollectionNotFoundError,
    DimensionMismatchError,
    Document,
    UnknownFilterFieldError,
    VectorStore,
    VectorStoreError,
    secret_from_env,
)
from ...api.internal import register_header_secret, scrub_exception
from ..chat_models._common import FreshOnUnpickle, import_sdk
from ._chroma_http import bounded_http_client

__all__ = ["ChromaVectorStore", "chroma_where"]

_FIELDS_KEY = "fa:fields"
_DIM_KEY = "fa:dimension"
_SCALARS = (str, int, float, bool)


def chroma_where(filters: dict[str, Any] | None) -> dict[str, Any] | None:
    """Translate the equality dialect (``{"a": 1, "b": "x"}``) to a Chroma ``where``.

    Args:
        filters: field values the documents must have, or ``None``.

    Returns:
        The Chroma ``where`` clause, or ``None`` for no filter.

    Raises:
        VectorStoreError: for an operator key (``$...``) or a non-scalar value.

    """
    if not filters:
        return None
    clauses = []
    for k, v in filters.items():
        if not isinstance(k, str) or k.startswith("$"):
            raise VectorStoreError(f"filter key {k!r}: the filter dialect is field equality "
                                   "only; pass backend operators as where=...")
        if not isinstance(v, _SCALARS):
            raise VectorStoreError(f"filter on {k!r}: {type(v).__name__} is not a JSON scalar")
        clauses.append({k: v})
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def _in_process_settings(chromadb: Any, path: str | None) -> Any:
    """The settings of the in-process Chroma instance a client of ``path`` joins.

    chromadb keeps one instance per persist directory (and one in-memory instance) per
    process, and refuses a second client whose settings differ. A program that opened one
    with chromadb's own client (as Flink Agents' RAG example fills its knowledge base) is
    joined with its settings, so the store sees the same collections; otherwise chromadb's
    defaults are used, so a chromadb client made later with defaults joins ours.

    Args:
        chromadb: the imported ``chromadb`` module.
        path: the persist directory, or ``None`` for the in-memory instance.

    Returns:
        The ``Settings`` to open the client with.
    """
    try:
        from chromadb.api.shared_system_client import SharedSystemClient

        key = "ephemeral" if path is None else path
        system = SharedSystemClient._identifier_to_system.get(key)
    except Exception:  # noqa: BLE001 - a chromadb without that registry: use the defaults
        system = None
    return chromadb.Settings() if system is None else system.settings


def _distinct(ids: str | list[str] | None) -> list[str] | None:
    """The ids asked for, each once, in the order first asked (Chroma refuses repeats).

    Returns:
        The list, or ``None`` when no ids were given.
    """
    if ids is None:
        return None
    return [ids] if isinstance(ids, str) else list(dict.fromkeys(ids))


def _is_not_found(e: Exception) -> bool:
    return "NotFound" in type(e).__name__ or "does not exist" in str(e)


class ChromaVectorStore(FreshOnUnpickle, VectorStore):
    """A Chroma collection store (see the module docstring for the modes).

    Attributes:
        persist_directory: where the embedded client persists.
        host: a Chroma server's host (server mode).
        port: its port.
        ssl: talk HTTPS to the server.
        api_key_env: environment variable holding the server's token (sent as
            ``x-chroma-token``); the token itself never enters the plan.
        timeout_s: server mode: each wait for the server, and the longest an answer's body
            may take once its headers came, in seconds (chromadb's own client waits for
            ever); past it the call fails with a ``VectorStoreError``.
        max_answer_bytes: server mode: the most bytes of one answer read (``None``: 64 MiB,
            ``MAX_ANSWER_BYTES``); a longer answer fails the call naming the bound and the URL.
        tenant: the Chroma tenant.
        database: the Chroma database.
        collection: the default collection. Left out, the plan names it after the agent and
            the resource (``<AgentClass>_<resource>_<digest>``), so two agents never share
            documents by accident; a named collection is shared with every client of it.
        collection_metadata: metadata given to collections this store creates.
        create_collection_if_not_exists: create a missing collection on write (reads of a
            missing collection then find nothing); ``False``: any use of a missing collection
            is a ``CollectionNotFoundError``.
        batch_size: documents per Chroma write.

    """

    persist_directory: str | None = None
    host: str | None = None
    port: int = Field(default=8000, ge=1, le=65535)
    ssl: bool = False
    api_key_env: str | None = None
    timeout_s: float = Field(default=60.0, gt=0)
    max_answer_bytes: int | None = Field(default=None, ge=1)
    tenant: str = "default_tenant"
    database: str = "default_database"
    collection: str | None = None
    collection_metadata: dict[str, Any] = Field(default_factory=dict)
    create_collection_if_not_exists: bool = True
    batch_size: int = Field(default=1000, ge=1)

    _client: Any = PrivateAttr(default=None)
    _collections: dict[str, Any] = PrivateAttr(default_factory=dict)
    _fields: dict[str, set[str]] = PrivateAttr(default_factory=dict)
    _lock: threading.RLock = PrivateAttr(default_factory=threading.RLock)

    # -- connection ----------------------------------------------------------------------
    def client(self) -> Any:
        """The Chroma client (made on first use)."""
        with self._lock:
            if self._client is None:
                chromadb = import_sdk("chromadb", "knowledge", "the Chroma vector store")
                common = {"tenant": self.tenant, "database": self.database}
                if self.host is not None:
                    headers = {}
                    # registered as a secret, as a connection's key is: a server quoting the
                    # token back (a 401 body) reached errors, tracebacks and logs in clear
                    token = secret_from_env(self.api_key_env) if self.api_key_env else None
                    if token:
                        headers["x-chroma-token"] = token
                    try:
                        settings = chromadb.Settings(anonymized_telemetry=False)
                        # chromadb's own credentials (its Settings read the environment:
                        # CHROMA_CLIENT_AUTH_CREDENTIALS), sent whatever the store is given
                        register_header_secret(getattr(
                            settings, "chroma_client_auth_credentials", None) or None,
                            "chromadb's client credentials")
                        self._client = bounded_http_client(
                            chromadb, self.timeout_s, self.max_answer_bytes, host=self.host,
                            port=self.port, ssl=self.ssl, headers=headers,
                            settings=settings, **common)
                    except Exception as e:  # noqa: BLE001 - chromadb's, httpx's, a bound's
                        raise VectorStoreError(
                            f"vector store {self.resource_name!r}: cannot open the Chroma "
                            f"server {self.host}:{self.port}: {e}") from scrub_exception(e)
                elif self.persist_directory is not None:
                    os.makedirs(self.persist_directory, exist_ok=True)
                    self._client = chromadb.PersistentClient(
                        path=self.persist_directory,
                        settings=_in_process_settings(chromadb, self.persist_directory),
                        **common)
                else:
                    self._client = chromadb.EphemeralClient(
                        settings=_in_process_settings(chromadb, None), **common)
            return self._client

    def close(self) -> None:
        """Forget the client and cached collections."""
        with self._lock:
            self._client = None
            self._collections = {}
            self._fields = {}

    def _name(self, collection_name: str | None) -> str:
        name = collection_name or self.collection
        if not name:
            raise VectorStoreError(
                f"vector store {self.resource_name!r}: no collection named and no default "
                "collection: pass collection_name=..., or collection=... to the store (an "
                "agent's plan names one after the agent and the resource when it has none)")
        return name

    def _collection(self, name: str, create: bool,
                    metadata: dict[str, Any] | None = None) -> Any | None:
        # The collection; None when missing and reads may find nothing. ``metadata`` given
        # (get_or_create_collection): a missing collection is created with it, whatever
        # create_collection_if_not_exists says.
        with self._lock:
            col = self._collections.get(name)
            if col is not None:
                return col
            client = self.client()
            try:
                col = client.get_collection(name, embedding_function=None)
            except Exception as e:  # noqa: BLE001 - chromadb's NotFoundError across versions
                if not _is_not_found(e):
                    raise VectorStoreError(
                        f"chroma collection {name!r}: {e}") from scrub_exception(e)
                if not self.create_collection_if_not_exists and metadata is None:
                    raise CollectionNotFoundError(
                        f"vector store {self.resource_name!r}: collection {name!r} does not "
                        "exist (create_collection_if_not_exists is off)") from None
                if not create:
                    return None
                try:
                    col = client.get_or_create_collection(
                        name, embedding_function=None,
                        configuration={"hnsw": {"space": "cosine"}},
                        metadata={**self.collection_metadata, **(metadata or {}),
                                  _FIELDS_KEY: ""})
                except Exception as e:  # noqa: BLE001 - e.g. an invalid collection name
                    raise VectorStoreError(f"cannot create chroma collection {name!r}: "
                                           f"{e}") from scrub_exception(e)
            self._collections[name] = col
            meta = col.metadata or {}
            self._fields[name] = {f for f in str(meta.get(_FIELDS_KEY, "")).split(",") if f}
            return col

    def _check_dim(self, col: Any, name: str, vectors: list[list[float]]) -> None:
        meta = col.metadata or {}
        dim = meta.get(_DIM_KEY)
        for i, v in enumerate(vectors):
            if dim is not None and len(v) != dim:
                raise DimensionMismatchError(
                    f"collection {name!r} holds {dim}-dimensional vectors; vector {i} has "
                    f"{len(v)}")
            if len(v) != len(vectors[0]):
                raise DimensionMismatchError(
                    f"vectors of one call differ in size ({len(vectors[0])} and {len(v)})")

    def _remember(self, col: Any, name: str, docs: list[Document]) -> None:
        fields = set().union(*(d.metadata.keys() for d in docs))
        known = self._fields.setdefault(name, set())
        meta = dict(col.metadata or {})
        if fields <= known and _DIM_KEY in meta:
            return
        known |= fields
        meta[_FIELDS_KEY] = ",".join(sorted(known))
        meta.setdefault(_DIM_KEY, len(docs[0].embedding or []))
        meta.pop("hnsw:space", None)
        col.modify(metadata=meta)
        self._collections.pop(name, None)  # re-read with the new metadata

    def _check_filters(self, name: str, filters: dict[str, Any] | None) -> None:
        chroma_where(filters)  # the dialect first: an operator is not a field
        unknown = sorted(set(filters or {}) - self._fields.get(name, set()))
        if unknown:  # another writer (process, operator instance) may have added the field
            with self._lock:
                self._collections.pop(name, None)
                self._collection(name, create=False)
            unknown = sorted(set(filters or {}) - self._fields.get(name, set()))
        if unknown:
            known = ", ".join(sorted(self._fields.get(name, set()))) or "none"
            raise UnknownFilterFieldError(
                f"collection {name!r} has no documents with metadata field(s) {unknown} "
                f"(fields: {known})")

    # -- VectorStore -----------------------------------------------------------------------
    def _add_embedding(self, documents: list[Document], collection_name: str | None,
                       **kwargs: Any) -> list[str]:
        name = self._name(collection_name)
        with self._lock:
            col = self._collection(name, create=True)
            assert col is not None
            vectors = [list(d.embedding or []) for d in documents]
            self._check_dim(col, name, vectors)
            for d in documents:
                for k, v in d.metadata.items():
                    if not isinstance(v, _SCALARS):
                        raise VectorStoreError(f"document {d.id!r}: metadata {k!r} is a "
                                               f"{type(v).__name__}, not a JSON scalar")
            ids = [str(d.id) for d in documents]
            # an id given twice (the same text and metadata, so the same derived id): the
            # last one is stored, as upserting one after the other would (Chroma refuses
            # duplicates within one upsert)
            last = {doc_id: i for i, doc_id in enumerate(ids)}
            kept = [i for i, doc_id in enumerate(ids) if last[doc_id] == i]
            for s in range(0, len(kept), self.batch_size):
                part = [documents[i] for i in kept[s: s + self.batch_size]]
                try:
                    col.upsert(ids=[str(d.id) for d in part],
                               embeddings=[vectors[i] for i in kept[s: s + self.batch_size]],
                               documents=[d.content for d in part],
                               metadatas=[d.metadata or None for d in part], **kwargs)
                except Exception as e:  # noqa: BLE001
                    raise VectorStoreError(
                        f"chroma upsert into {name!r}: {e}") from scrub_exception(e)
            self._remember(col, name, documents)
            return ids

    def _query_embedding(self, embedding: list[float], limit: int, collection_name: str | None,
                         filters: dict[str, Any] | None, **kwargs: Any) -> list[Document]:
        name = self._name(collection_name)
        col = self._collection(name, create=False)
        if col is None or limit == 0:
            return []
        self._check_dim(col, name, [list(embedding)])
        self._check_filters(name, filters)
        where = chroma_where(filters)
        if "where" in kwargs:
            extra = kwargs.pop("where")
            where = extra if where is None else {"$and": [where, extra]}
        try:
            res = col.query(query_embeddings=[list(embedding)], n_results=limit, where=where,
                            include=["documents", "metadatas", "distances"], **kwargs)
        except Exception as e:  # noqa: BLE001
            raise VectorStoreError(f"chroma query of {name!r}: {e}") from scrub_exception(e)
        return [Document(id=i, content=c or "", metadata=dict(m or {}), score=float(s))
                for i, c, m, s in zip(res["ids"][0], res["documents"][0],
                                      res["metadatas"][0], res["distances"][0], strict=True)]

    def get(self, ids: str | list[str] | None = None, collection_name: str | None = None,
            filters: dict[str, Any] | None = None, limit: int | None = 100,
            **kwargs: Any) -> list[Document]:
        """Documents by id, or up to ``limit`` documents matching ``filters``.

        Args:
            ids: one id or a list (the order asked is kept, missing ids are skipped, an id
                asked twice is found once); when given, ``filters`` and ``limit`` are
                ignored.
            collection_name: the collection (default: the store's).
            filters: field values the documents must have.
            limit: the most documents to return (``None``: all).
            **kwargs: backend arguments.

        Returns:
            The documents found.

        Raises:
            VectorStoreError: for a missing collection (when not created on demand), an
                unknown filter field or a backend failure.

        """
        name = self._name(collection_name)
        col = self._collection(name, create=False)
        if col is None:
            return []
        id_list = _distinct(ids)
        if id_list is None:
            self._check_filters(name, filters)
        try:
            res = col.get(ids=id_list, where=chroma_where(filters) if id_list is None else None,
                          limit=None if id_list is not None else limit,
                          include=["documents", "metadatas"], **kwargs)
        except Exception as e:  # noqa: BLE001
            raise VectorStoreError(f"chroma get from {name!r}: {e}") from scrub_exception(e)
        found = {i: Document(id=i, content=c or "", metadata=dict(m or {}))
                 for i, c, m in zip(res["ids"], res["documents"], res["metadatas"], strict=True)}
        if id_list is not None:
            return [found[i] for i in id_list if i in found]
        return list(found.values())

    def delete(self, ids: str | list[str] | None = None, collection_name: str | None = None,
               filters: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Delete by ids, or by filter, or (neither) every document of the collection.

        An id given twice is deleted once.

        Raises:
            VectorStoreError: as ``get``.

        """
        name = self._name(collection_name)
        col = self._collection(name, create=False)
        if col is None:
            return
        id_list = _distinct(ids)
        try:
            if id_list is not None:
                if id_list:
                    col.delete(ids=id_list)
            elif filters:
                self._check_filters(name, filters)
                col.delete(where=chroma_where(filters))
            else:
                all_ids = col.get(include=[])["ids"]
                for s in range(0, len(all_ids), self.batch_size):
                    col.delete(ids=all_ids[s: s + self.batch_size])
        except VectorStoreError:
            raise
        except Exception as e:  # noqa: BLE001
            raise VectorStoreError(f"chroma delete from {name!r}: {e}") from scrub_exception(e)

    def size(self, collection_name: str | None = None) -> int:
        """How many documents the collection holds (0 for a missing one)."""
        col = self._collection(self._name(collection_name), create=False)
        return 0 if col is None else int(col.count())

    def count(self, collection_name: str | None = None,
              filters: dict[str, Any] | None = None) -> int:
        """How many documents match ``filters`` (ids only are read).

        Args:
            collection_name: the collection (default: the store's).
            filters: field values the documents must have.

        Returns:
            The number of documents.

        Raises:
            VectorStoreError: as ``get``.

        """
        name = self._name(collection_name)
        col = self._collection(name, create=False)
        if col is None:
            return 0
        if not filters:
            return int(col.count())
        self._check_filters(name, filters)
        try:
            return len(col.get(where=chroma_where(filters), include=[])["ids"])
        except Exception as e:  # noqa: BLE001
            raise VectorStoreError(f"chroma count in {name!r}: {e}") from scrub_exception(e)

    def get_or_create_collection(self, name: str,
                                 metadata: dict[str, Any] | None = None) -> Collection:
        """The collection ``name``, created with ``metadata`` when missing."""
        col = self._collection(name, create=True, metadata=dict(metadata or {}))
        return _described(name, col)

    def get_collection(self, name: str) -> Collection:
        """The collection ``name``.

        Raises:
            CollectionNotFoundError: when it does not exist.
        """  # noqa: DOC201
        col = self._collection(name, create=False)
        if col is None:
            raise CollectionNotFoundError(
                f"vector store {self.resource_name!r}: collection {name!r} does not exist")
        return _described(name, col)

    def delete_collection(self, collection_name: str | None = None) -> bool:
        """Drop a collection; returns whether it existed."""
        name = self._name(collection_name)
        with self._lock:
            self._collections.pop(name, None)
            self._fields.pop(name, None)
            try:
                self.client().delete_collection(name)
            except Exception as e:  # noqa: BLE001
                if _is_not_found(e):
                    return False
                raise VectorStoreError(
                    f"chroma delete_collection {name!r}: {e}") from scrub_exception(e)
            return True


def _described(name: str, col: Any) -> Collection:
    """A Chroma collection as a ``Collection`` (its metadata without this store's own keys)."""
    meta = {k: v for k, v in (col.metadata or {}).items() if k not in (_FIELDS_KEY, _DIM_KEY)}
    return Collection(name=name, metadata=meta or None)
