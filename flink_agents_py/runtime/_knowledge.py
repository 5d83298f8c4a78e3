"""Durable views of embedding models and vector stores, and the context retrieval action.

Inside an action, ``ctx.get_resource(name, EMBEDDING_MODEL | EMBEDDING_MODEL_CONNECTION |
VECTOR_STORE)`` returns a view whose every call is one durable call of the action: ``embed``,
``add``, ``query``, ``get``, ``update``, ``delete``, ``size`` and ``count``, most also as an
``a``-prefixed awaitable (run on the I/O executor; other keys keep running). The durable call
is named after the resource (``embedding_model[text_embedder].embed``), so it reads well in
the event log and metrics, and its result is recorded as a pydantic model or plain JSON, so
a replay returns the same type without calling the model or the store again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..api import (
    ContextRetrievalRequestEvent,
    ContextRetrievalResponseEvent,
    Document,
    EmbeddingModelConnection,
    EmbeddingModelSetup,
    EmbeddingResult,
    LongTermMemoryOptions,
    Resource,
    ResourceType,
    VectorStore,
    VectorStoreError,
    VectorStoreQuery,
    VectorStoreQueryResult,
)
from ..api.internal import described
from ._memory_items import WRITER_TAGS, memory_collections

if TYPE_CHECKING:
    from .recorder._execution import ActionExecution

__all__ = ["DurableEmbeddingModel", "DurableVectorStore", "durable_view", "durable_target",
           "context_retrieval_action"]

_MODULE = "flink_agents_py.knowledge"


def durable_target(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``fn`` so its durable call is named ``flink_agents_py.knowledge:<label>``."""

    def target(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    target.__module__ = _MODULE
    target.__qualname__ = target.__name__ = label
    return target


def _write_digest(label: str, args: tuple[Any, ...], ordinal: int) -> str | None:
    """The digest the durable call of a store write gets (``DurableCall.digest``).

    Returns:
        The digest, or ``None`` when the arguments have no JSON form (the call fails so).
    """
    from .recorder._outcomes import call_digest

    try:
        return call_digest(f"{_MODULE}:{label}", args, {}, f"c{ordinal}")
    except Exception:  # noqa: BLE001 - the durable call reports it
        return None


class _View:
    """Common part of the durable views: the action context, the name, the resource."""

    _kind = ""

    def __init__(self, ctx: ActionExecution, name: str, resource: Resource) -> None:
        self._ctx = ctx
        self._name = name
        self._resource = resource

    def _target(self, op: str) -> Callable[..., Any]:
        return durable_target(f"{self._kind}[{self._name}].{op}", getattr(self, f"_run_{op}"))

    def _call(self, op: str, *args: Any) -> Any:
        return self._ctx.durable_execute(self._target(op), *args)

    def _acall(self, op: str, *args: Any) -> Any:
        return self._ctx.durable_execute_async(self._target(op), *args)

    @property
    def resource(self) -> Resource:
        """The resource itself (calls on it are not durable)."""
        return self._resource

    def __getattr__(self, attr: str) -> Any:  # fields (collection, model...) read through
        return getattr(self._resource, attr)

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # noqa: PLE0307 - deliberate, as unittest.mock does
        """The resource's class, so that ``isinstance(store, VectorStore)`` holds.

        Flink Agents' programs check ``BaseVectorStore`` / ``CollectionManageableVectorStore``
        on what ``get_resource`` returns; ``type(view)`` is still the view's class.
        """
        return type(self._resource)


class DurableEmbeddingModel(_View):
    """An embedding model setup (or connection) whose calls are durable calls of the action."""

    _kind = "embedding_model"
    _resource: EmbeddingModelSetup | EmbeddingModelConnection

    def _run_embed(self, text: str | list[str], kwargs: dict[str, Any]) -> EmbeddingResult:
        return self._resource.embed_with_usage(text, **kwargs)

    @staticmethod
    def _arg(text: str | Sequence[str]) -> str | list[str]:
        return text if isinstance(text, str) else list(text)

    def embed_with_usage(self, text: str | Sequence[str], **kwargs: Any) -> EmbeddingResult:
        """Embed (one durable call).

        Args:
            text: one text or a list of texts.
            **kwargs: options overriding the setup's.

        Returns:
            The vectors, token usage and truncated indices.

        Raises:
            EmbeddingError: for empty input (recorded, so a replay raises it again).
        """
        result: EmbeddingResult = self._call("embed", self._arg(text), kwargs)
        return result

    def embed(self, text: str | Sequence[str], **kwargs: Any) -> list[float] | list[list[float]]:
        """Embed one text (a vector) or a list of texts (a list of vectors); durable."""
        return self.embed_with_usage(text, **kwargs).embeddings

    async def aembed_with_usage(self, text: str | Sequence[str], **kwargs: Any
                                ) -> EmbeddingResult:
        """Async ``embed_with_usage`` (runs on the I/O executor)."""
        result: EmbeddingResult = await self._acall("embed", self._arg(text), kwargs)
        return result

    async def aembed(self, text: str | Sequence[str], **kwargs: Any
                     ) -> list[float] | list[list[float]]:
        """Async ``embed`` (runs on the I/O executor)."""
        return (await self.aembed_with_usage(text, **kwargs)).embeddings


def _docs(documents: Document | Sequence[Document]) -> list[Document]:
    return [documents] if isinstance(documents, Document) else list(documents)


def _kept_by_memory(ctx: ActionExecution) -> frozenset[str]:
    """The collections long-term memory keeps for any agent of ``ctx``'s agent tree, folded.

    The agent's own, its ancestors' and every sub-agent's (``memory_collections``): an
    internal sub-agent uses its ancestors' stores, so one naming its parent's memory
    collection would otherwise read every key's memory items (and the parent naming a
    sub-agent's likewise).

    Returns:
        The names, ``casefold``-ed.
    """
    env = ctx.resources
    while env.parent is not None:
        env = env.parent
    root = env._plan  # noqa: SLF001 - the root environment's plan: the whole tree
    hit = _KEPT.get(id(root))
    if hit is not None and hit[0] is root:
        return hit[1]
    names = set(memory_collections(None))
    plans = [root]
    while plans:
        plan = plans.pop()
        names |= memory_collections(plan.config.get(LongTermMemoryOptions.COLLECTION) or None)
        plans.extend(plan.subagents.values())
    kept = frozenset(n.casefold() for n in names)
    if len(_KEPT) >= 64:
        _KEPT.clear()
    _KEPT[id(root)] = (root, kept)
    return kept


_KEPT: dict[int, tuple[Any, frozenset[str]]] = {}
"""``_kept_by_memory`` of each root plan (by identity; the plan is kept with it)."""


class DurableVectorStore(_View):
    """A ``VectorStore`` whose calls are durable calls of the current action.

    Writes (``add``, ``update``, ``delete``) and the awaitable ``aadd`` run as any durable
    call (``aadd`` on the I/O executor), tagged with their writer; ``update`` and ``delete``
    first keep the documents they change (``_store_priors``). Reads (``query``, ``get``,
    ``size`` and their awaitable forms ``aquery``, ``aget``) run on the operator thread,
    query embedding included, so their outcome is in keyed state from the callback that made
    them: a checkpoint never finds a read in flight, and a restore replays what the first
    execution read instead of reading what a crashed attempt wrote after the checkpoint.
    """

    _kind = "vector_store"
    _resource: VectorStore

    def _checked(self, collection: str | None) -> None:
        """Refuse a collection long-term memory keeps (before the store is called).

        They hold every key's memory items, its id secret and deletion marks (see
        ``_memory_items.memory_collections``); an action that takes the collection from its
        record would otherwise let the record read or delete any key's memory. The key's own
        memory is ``ctx.long_term_memory``.

        Raises:
            VectorStoreError: naming the collection (the action sees it at the call; a
                context retrieval reports it in the response's ``error``).
        """
        name = collection or getattr(self._resource, "collection", None)
        if not isinstance(name, str):
            return
        if name.strip().casefold() in _kept_by_memory(self._ctx):
            raise VectorStoreError(
                f"vector store {self._name!r}: collection {name!r} is kept by long-term "
                "memory (every key's items, ids and deletion marks), and an action's store "
                "calls may not name it: a key reads and writes its own memory through "
                "ctx.long_term_memory (name the store's other collections, or give long-term "
                "memory its own with LongTermMemoryOptions.COLLECTION)")

    def _unreserved(self, docs: Sequence[Document] = (),
                    filters: dict[str, Any] | None = None) -> None:
        """Refuse a document's metadata field or a filter field that tags writers.

        A write through this view tags its documents with their writer (``WRITER_TAGS``)
        and a read removes those fields: a user's own field of such a name was overwritten
        on write and dropped on read (lost without a word), and a filter on one matched the
        tags, not the user's value.

        Raises:
            VectorStoreError: naming the field (and the document), before the store is called.
        """
        why = (f"is reserved: documents written through an action's store calls carry their "
               f"writer in the fields {', '.join(WRITER_TAGS)}, which reads remove; rename it")
        for doc in docs:
            for k in doc.metadata:
                if k in WRITER_TAGS:
                    raise VectorStoreError(f"vector store {self._name!r}: metadata field "
                                           f"{k!r} of document {doc.id!r} {why}")
        for k in filters or {}:
            if k in WRITER_TAGS:
                raise VectorStoreError(f"vector store {self._name!r}: filter field {k!r} {why}")

    def _bounded(self, op: str, fn: Callable[..., Any], *args: Any) -> Any:
        """The durable target of ``op`` running ``fn(*args, context)``, and ``args``.

        ``context`` is taken now: the writer's tags for a write, the reader's horizon for
        a read (see ``runtime._long_term_memory.Horizon``).

        Returns:
            ``(target, args)`` for ``durable_execute``.
        """
        ltm: Any = self._ctx.long_term_memory  # the action's (``ActionLongTermMemory``)
        label = f"{self._kind}[{self._name}].{op}"
        extra: Any
        if op in ("add", "update", "delete"):
            # an add's documents carry its call ordinal and digest: a later read of the
            # execution sees them where this attempt made (or replayed) that very call
            extra = {**ltm.tags(), "call": self._ctx._next_ordinal,
                     "digest": _write_digest(label, args, self._ctx._next_ordinal)}
        else:
            extra = ltm.horizon(f"{_MODULE}:{self._kind}[{self._name}].")

        def bounded(*a: Any) -> Any:
            return fn(*a, extra)

        return durable_target(label, bounded), args

    def _run_add(self, docs: list[Document], collection: str | None,
                 kwargs: dict[str, Any], tags: dict[str, Any]) -> list[str]:
        from ._memory_items import tagged

        return self._resource.add(tagged(docs, tags), collection, **kwargs)

    def _run_update(self, docs: list[Document], collection: str | None,
                    kwargs: dict[str, Any], tags: dict[str, Any]) -> None:
        from ._memory_items import tagged
        from ._store_priors import current, save_priors

        store = self._resource
        ids = [str(d.id) for d in docs if d.id is not None]
        save_priors(store, collection, current(lambda: store.get(ids, collection)), tags)
        store.update(tagged(docs, tags), collection, **kwargs)

    def _run_query(self, query: VectorStoreQuery, horizon: Any) -> VectorStoreQueryResult:
        from ._memory_items import visible
        from ._store_priors import ranked_with_priors

        if query.query_embedding is None:  # embedded once, whatever is fetched again
            vector = self._resource.get_embedding_model().embed(query.query_text)
            query = query.model_copy(update={"query_embedding": list(vector)})
        return VectorStoreQueryResult(documents=ranked_with_priors(
            self._resource, query, horizon, lambda limit: visible(
                lambda n: self._resource.query(query.model_copy(update={"limit": n})).documents,
                limit, horizon)))

    def _run_get(self, ids: Any, collection: str | None, filters: dict[str, Any] | None,
                 limit: int | None, kwargs: dict[str, Any], horizon: Any) -> list[Document]:
        from ._memory_items import visible
        from ._store_priors import with_priors

        return with_priors(self._resource, collection, ids, filters, limit, horizon,
                           lambda lim: visible(lambda n: self._resource.get(
                               ids, collection, filters, n, **kwargs), lim, horizon))

    def _run_delete(self, ids: Any, collection: str | None, filters: dict[str, Any] | None,
                    kwargs: dict[str, Any], tags: dict[str, Any]) -> None:
        from ._store_priors import current, save_priors

        store = self._resource
        save_priors(store, collection, current(lambda: store.get(ids, collection, filters, None)),
                    tags)
        store.delete(ids, collection, filters, **kwargs)

    def _run_size(self, collection: str | None, horizon: Any) -> int:
        from ._memory_items import hidden_count
        from ._store_priors import restored_count

        store = self._resource
        return (store.size(collection) - hidden_count(store, collection, horizon)
                + restored_count(store, collection, horizon))

    def add(self, documents: Document | Sequence[Document], collection_name: str | None = None,
            **kwargs: Any) -> list[str]:
        """Embed and upsert documents (one durable call); returns their ids."""
        self._checked(collection_name)
        docs = _docs(documents)
        self._unreserved(docs)
        target, args = self._bounded("add", self._run_add, docs, collection_name, kwargs)
        result: list[str] = self._ctx.durable_execute(target, *args)
        return result

    async def aadd(self, documents: Document | Sequence[Document],
                   collection_name: str | None = None, **kwargs: Any) -> list[str]:
        """Async ``add``."""
        self._checked(collection_name)
        docs = _docs(documents)
        self._unreserved(docs)
        target, args = self._bounded("add", self._run_add, docs, collection_name, kwargs)
        result: list[str] = await self._ctx.durable_execute_async(target, *args)
        return result

    def update(self, documents: Document | Sequence[Document],
               collection_name: str | None = None, **kwargs: Any) -> None:
        """Replace documents by id (one durable call; their old versions are kept a while)."""
        self._checked(collection_name)
        docs = _docs(documents)
        self._unreserved(docs)
        target, args = self._bounded("update", self._run_update, docs, collection_name, kwargs)
        self._ctx.durable_execute(target, *args)

    def query(self, query: VectorStoreQuery) -> VectorStoreQueryResult:
        """Similarity search (one durable call)."""
        self._checked(query.collection_name)
        self._unreserved(filters=query.filters)
        target, args = self._bounded("query", self._run_query, query)
        result: VectorStoreQueryResult = self._ctx.durable_execute(target, *args)
        return result

    async def aquery(self, query: VectorStoreQuery) -> VectorStoreQueryResult:
        """Awaitable ``query`` (a read: it runs on the operator thread, see the class)."""
        return self.query(query)

    def get(self, ids: str | list[str] | None = None, collection_name: str | None = None,
            filters: dict[str, Any] | None = None, limit: int | None = 100,
            **kwargs: Any) -> list[Document]:
        """Documents by id or filter (one durable call)."""
        self._checked(collection_name)
        self._unreserved(filters=filters)
        target, args = self._bounded("get", self._run_get, ids, collection_name, filters, limit,
                                     kwargs)
        result: list[Document] = self._ctx.durable_execute(target, *args)
        return result

    async def aget(self, ids: str | list[str] | None = None, collection_name: str | None = None,
                   filters: dict[str, Any] | None = None, limit: int | None = 100,
                   **kwargs: Any) -> list[Document]:
        """Awaitable ``get`` (a read: it runs on the operator thread, see the class)."""
        return self.get(ids, collection_name, filters, limit, **kwargs)

    def delete(self, ids: str | list[str] | None = None, collection_name: str | None = None,
               filters: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Delete by ids or filter (one durable call; the documents are kept a while)."""
        self._checked(collection_name)
        self._unreserved(filters=filters)
        target, args = self._bounded("delete", self._run_delete, ids, collection_name, filters,
                                     kwargs)
        self._ctx.durable_execute(target, *args)

    def size(self, collection_name: str | None = None) -> int:
        """The collection's document count (one durable call)."""
        self._checked(collection_name)
        target, args = self._bounded("size", self._run_size, collection_name)
        result: int = self._ctx.durable_execute(target, *args)
        return result

    def get_embedding_model(self) -> Any:
        """The store's embedding model setup, as its durable view (``DurableEmbeddingModel``).

        The same view ``ctx.get_resource(store.embedding_model, EMBEDDING_MODEL)`` gives: its
        ``embed`` is a durable call of the action (a replay returns the recorded vectors),
        where the setup itself, read through the store, was called again by a replay.

        Returns:
            The view (``isinstance(view, EmbeddingModelSetup)`` holds).

        Raises:
            VectorStoreError: when the store names no embedding model.
            ResourceError: when the named resource is not an ``EmbeddingModelSetup``.
        """
        setup = self._resource.get_embedding_model()
        return DurableEmbeddingModel(self._ctx, str(self._resource.embedding_model), setup)

    def count(self, collection_name: str | None = None,
              filters: dict[str, Any] | None = None) -> int:
        """How many documents match ``filters`` (all: ``size``); one durable call, as ``size``.

        A read like the others: recorded, and bounded by the reader's horizon when made
        again after a restore (it was the store's own count, read anew by a replay: it
        counted what the crashed attempt added after the checkpoint, and not what it
        deleted). Where the record at the call's place holds another call (a checkpoint of a
        version whose count was not a durable call), the count is read as then: bounded,
        not recorded, so the calls after it keep their places.

        Returns:
            The count (the recorded one, on a replay).
        """
        self._checked(collection_name)
        self._unreserved(filters=filters)
        target, args = self._bounded("count", self._run_count, collection_name, filters)
        if self._recorded_otherwise("count"):
            return int(target(*args))
        result: int = self._ctx.durable_execute(target, *args)
        return result

    def _recorded_otherwise(self, op: str) -> bool:
        """Whether the record of the next call (in keyed state or the journal) is not ``op``'s.

        A checkpoint of a version whose ``op`` was the store's own call (not recorded) holds
        the calls after it at the places ``op`` now takes: there ``op`` is made as then.

        Returns:
            Whether a record is there and is of another call.
        """
        ctx = self._ctx
        at = ctx._next_ordinal
        rec = ctx._record.calls.get(str(at)) or ctx.ledger.lookup(
            ctx.key, f"{ctx.execution_id}/c{at}")
        return rec is not None and rec.target != f"{_MODULE}:{self._kind}[{self._name}].{op}"

    def _run_count(self, collection: str | None, filters: dict[str, Any] | None,
                   horizon: Any) -> int:
        from ._memory_items import hidden_count
        from ._store_priors import restored_count

        if not filters:
            return self._run_size(collection, horizon)
        store = self._resource
        if not hidden_count(store, collection, horizon) \
                and not restored_count(store, collection, horizon):
            return store.count(collection, filters)  # the reader sees the store as it is
        return len(self._run_get(None, collection, filters, None, {}, horizon))

    # the collection calls: durable calls too, so a replay neither deletes nor creates again

    def get_or_create_collection(self, name: str, metadata: dict[str, Any] | None = None
                                 ) -> Any:
        """The store's ``get_or_create_collection`` (one durable call)."""
        self._checked(name or None)
        return self._collection_call("get_or_create_collection", name, metadata)

    def get_collection(self, name: str) -> Any:
        """The store's ``get_collection`` (one durable call: a replay gets what it got)."""
        self._checked(name or None)
        return self._collection_call("get_collection", name)

    def delete_collection(self, collection_name: str | None = None) -> Any:
        """The store's ``delete_collection`` (one durable call: a replay deletes nothing)."""
        self._checked(collection_name)
        return self._collection_call("delete_collection", collection_name, as_then=False)

    def _collection_call(self, op: str, *args: Any, as_then: bool = True) -> Any:
        """The store's collection call ``op``, as a durable call of the action.

        They were the store's own calls: an action re-entered after a restore deleted its
        collection again (with what other keys had written to it since), and read a
        collection its crashed attempt had made after the checkpoint. ``as_then``: where
        the record at the call's place is another call's (a checkpoint of the version
        before), make it as then, unrecorded; a delete is not (it diverges there, before
        it deletes anything).

        Returns:
            What the store's call returned (the recorded outcome, on a replay).
        """
        run = getattr(self._resource, op)
        if as_then and self._recorded_otherwise(op):  # a checkpoint of the version before
            return run(*args)
        return self._ctx.durable_execute(
            durable_target(f"{self._kind}[{self._name}].{op}", run), *args)


def durable_view(ctx: ActionExecution, name: str, resource: Resource) -> Any:
    """The durable view of an embedding model or vector store; other resources as they are."""
    if isinstance(resource, EmbeddingModelSetup):
        return DurableEmbeddingModel(ctx, name, resource)
    if isinstance(resource, EmbeddingModelConnection):
        view = DurableEmbeddingModel(ctx, name, resource)
        view._kind = "embedding_model_connection"
        return view
    if isinstance(resource, VectorStore):
        return DurableVectorStore(ctx, name, resource)
    return resource


async def context_retrieval_action(event: ContextRetrievalRequestEvent,
                                   ctx: ActionExecution) -> None:
    """Built-in action: answer a ``ContextRetrievalRequestEvent`` with the documents found.

    The search is one durable call on the I/O executor. Any failure (an unknown store, a
    missing collection, an unknown filter field, an embedding error) is reported in the
    response's ``error``; the run goes on.
    """
    docs: list[Document] = []
    error: str | None = None
    try:
        store = ctx.get_resource(event.vector_store, ResourceType.VECTOR_STORE)
        if isinstance(store, DurableVectorStore):
            result = await store.aquery(VectorStoreQuery(
                query_text=event.query, limit=event.max_results,
                collection_name=event.collection_name, filters=event.filters))
            docs = result.documents
        else:
            error = f"TypeError: resource {event.vector_store!r} is not a VectorStore"
    except Exception as e:  # noqa: BLE001 - reported to the requester
        docs, error = [], described(e)
    ctx.send_event(ContextRetrievalResponseEvent(request_id=event.id, query=event.query,
                                                 documents=docs, error=error))
