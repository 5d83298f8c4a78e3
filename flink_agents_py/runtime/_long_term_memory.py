"""Long-term memory as one action sees it: durable reads, writes applied when it completes.

Items live in the vector store the agent configures (``LongTermMemoryOptions.VECTOR_STORE``),
one document per item, in one collection; reserved metadata fields place each item:
``fa_set`` (the set's name), ``fa_scope`` (``key:<digest of the key>`` or ``shared``) and
``fa_created_at`` (ISO 8601, UTC) and ``fa_seq`` (the item's place in its write), which
order ``get`` oldest first.

- ``add``/``delete`` are logged in the action; item ids are derived from the action
  execution's id and the item's ordinal, so they are the same on a replay.
- When the action completes, the core calls ``commit_long_term_memory``: one durable call
  (``long_term_memory.commit``) embeds the added items and applies the log in order. Its
  outcome is recorded like any durable call, so a restore that finds it recorded does not
  write again; one that does not re-executes it with the same ids (an upsert, no duplicates).
- ``get``, ``search`` and ``size`` are durable calls, so a replay sees what the first
  execution saw.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ..api import (
    BaseLongTermMemory,
    ChatMessage,
    Document,
    LongTermMemoryOptions,
    MemorySet,
    MemorySetItem,
    MessageRole,
    ResourceError,
    ResourceType,
    UnknownFilterFieldError,
    VectorStore,
    VectorStoreError,
    VectorStoreQuery,
)
from ..api._embeddings import check_texts
from ._knowledge import durable_target
from ._serde import digest, to_json_value

if TYPE_CHECKING:
    from ._context import ActionContext

__all__ = ["ActionLongTermMemory", "ActionMemorySet", "commit_long_term_memory"]

_SET, _SCOPE, _CREATED, _SEQ = "fa_set", "fa_scope", "fa_created_at", "fa_seq"
_RESERVED = (_SET, _SCOPE, _CREATED, _SEQ)
_COMPACT = ("Summarize these memory items into one short note that keeps every distinct "
            "fact, one fact per line. Answer with the note only.")
_SCALARS = (str, int, float, bool)


def _item(doc: Document, set_name: str) -> MemorySetItem:
    meta = dict(doc.metadata)
    created = meta.pop(_CREATED, None)
    for k in (_SET, _SCOPE, _SEQ):
        meta.pop(k, None)
    when = datetime.fromisoformat(created) if isinstance(created, str) else None
    return MemorySetItem(memory_set_name=set_name, id=str(doc.id), value=doc.content,
                         created_at=when, updated_at=when, additional_metadata=meta or None,
                         score=doc.score)


def _placed(filters: dict[str, Any] | None, set_name: str, scope: str) -> dict[str, Any]:
    for k in filters or {}:
        if k in _RESERVED:
            raise VectorStoreError(f"memory set {set_name!r}: filter field {k!r} is reserved")
    return {**(filters or {}), _SET: set_name, _SCOPE: scope}


def _empty_on_unplaced(e: UnknownFilterFieldError) -> bool:
    """Whether the store has never held a memory item (its reserved fields are unknown)."""
    return _SET in str(e) or _SCOPE in str(e)


class _Store:
    """The raw store and collection behind the memory, with the durable targets' bodies."""

    def __init__(self, store: VectorStore, collection: str | None) -> None:
        self.store = store
        self.collection = collection

    def get(self, set_name: str, scope: str, ids: list[str] | None,
            filters: dict[str, Any] | None, limit: int | None) -> list[MemorySetItem]:
        try:
            if ids is not None:
                docs = self.store.get(ids, self.collection)
                docs = [d for d in docs if d.metadata.get(_SET) == set_name
                        and d.metadata.get(_SCOPE) == scope]
            else:
                docs = self.store.get(None, self.collection, _placed(filters, set_name, scope),
                                      limit)
                docs.sort(key=lambda d: (str(d.metadata.get(_CREATED, "")),
                                         d.metadata.get(_SEQ, 0)))  # oldest first
        except UnknownFilterFieldError as e:
            if _empty_on_unplaced(e):
                return []
            raise
        return [_item(d, set_name) for d in docs]

    def count(self, set_name: str, scope: str, ids: list[str]) -> int:
        """Stored items of the set; with ``ids``: how many of those are stored."""
        try:
            if ids:
                return len(self.get(set_name, scope, ids, None, None))
            return self.store.count(self.collection, _placed(None, set_name, scope))
        except UnknownFilterFieldError as e:
            if _empty_on_unplaced(e):
                return 0
            raise

    def search(self, set_name: str, scope: str, query: str, limit: int,
               filters: dict[str, Any] | None, kwargs: dict[str, Any]) -> list[MemorySetItem]:
        try:
            res = self.store.query(VectorStoreQuery(
                query_text=query, limit=limit, collection_name=self.collection,
                filters=_placed(filters, set_name, scope), extra_args=kwargs))
        except UnknownFilterFieldError as e:
            if _empty_on_unplaced(e):
                return []
            raise
        return [_item(d, set_name) for d in res.documents]

    def commit(self, writes: list[dict[str, Any]]) -> dict[str, int]:
        now = datetime.now(timezone.utc).isoformat()
        added = deleted = 0
        for w in writes:
            placed = {_SET: w["set"], _SCOPE: w["scope"]}
            if w["op"] == "add":
                docs = [Document(id=i, content=v, metadata={**m, **placed, _CREATED: now,
                                                             _SEQ: added + n})
                        for n, (i, v, m) in enumerate(zip(w["ids"], w["values"],
                                                          w["metadatas"], strict=True))]
                self.store.add(docs, self.collection)
                added += len(docs)
            elif w["op"] == "delete":
                self.store.delete(w["ids"], self.collection)
                deleted += len(w["ids"])
            else:  # clear
                try:
                    self.store.delete(None, self.collection, placed)
                except UnknownFilterFieldError as e:
                    if not _empty_on_unplaced(e):
                        raise
                deleted += 1
        return {"added": added, "deleted": deleted}


class ActionMemorySet(MemorySet):
    """One memory set of one action (see the module docstring)."""

    def __init__(self, ltm: ActionLongTermMemory, name: str, shared: bool) -> None:
        self._ltm = ltm
        self.name = name
        self.shared = shared
        self.scope = "shared" if shared else ltm.key_scope

    def __repr__(self) -> str:
        return f"MemorySet({self.name!r}, shared={self.shared})"

    def _label(self, op: str) -> str:
        return f"long_term_memory[{self.name}].{op}"

    def add(self, items: str | list[str],
            metadatas: dict[str, Any] | list[dict[str, Any]] | None = None) -> list[str]:
        """Log an add (applied when the action completes); returns the items' ids."""
        texts, _ = check_texts(items, f"memory set {self.name!r}")
        if metadatas is None or isinstance(metadatas, dict):
            metas = [dict(metadatas or {}) for _ in texts]
        else:
            metas = [dict(m or {}) for m in metadatas]
            if len(metas) != len(texts):
                raise VectorStoreError(f"memory set {self.name!r}: {len(metas)} metadatas for "
                                       f"{len(texts)} items")
        for i, m in enumerate(metas):
            for k, v in m.items():
                if k in _RESERVED or not isinstance(v, _SCALARS):
                    raise VectorStoreError(
                        f"memory set {self.name!r}: item {i} metadata {k!r} must be a JSON "
                        f"scalar under a non-reserved name (reserved: {list(_RESERVED)})")
        ids = [self._ltm.next_id(self.name, self.scope) for _ in texts]
        self._ltm.log({"op": "add", "set": self.name, "scope": self.scope, "ids": ids,
                       "values": texts, "metadatas": metas})
        return ids

    def _pending(self) -> tuple[list[MemorySetItem], set[str], bool]:
        """Items this action added (still live), ids it deleted, whether it cleared the set."""
        added: dict[str, MemorySetItem] = {}
        deleted: set[str] = set()
        cleared = False
        for w in self._ltm.writes:
            if w["set"] != self.name or w["scope"] != self.scope:
                continue
            if w["op"] == "add":
                for i, v, m in zip(w["ids"], w["values"], w["metadatas"], strict=True):
                    added[i] = MemorySetItem(memory_set_name=self.name, id=i, value=v,
                                             additional_metadata=m or None)
                    deleted.discard(i)
            elif w["op"] == "delete":
                for i in w["ids"]:
                    added.pop(i, None)
                    deleted.add(i)
            else:
                added.clear()
                cleared = True
        return list(added.values()), deleted, cleared

    def get(self, ids: str | list[str] | None = None, filters: dict[str, Any] | None = None,
            limit: int = 100) -> list[MemorySetItem]:
        """Items by id, or up to ``limit`` matching ``filters`` (one durable call)."""
        id_list = [ids] if isinstance(ids, str) else (list(ids) if ids is not None else None)
        added, deleted, cleared = self._pending()
        fetch = None if id_list is not None else limit + len(deleted)
        stored = self._ltm.call(self._label("get"), self._ltm.backend().get, self.name,
                                self.scope, id_list, filters, fetch)
        keep = [] if cleared else [s for s in stored if s.id not in deleted]
        if id_list is not None:
            by_id = {s.id: s for s in keep}
            by_id.update({a.id: a for a in added})
            return [by_id[i] for i in id_list if i in by_id]
        mine = [a for a in added if all((a.additional_metadata or {}).get(k) == v
                                        for k, v in (filters or {}).items())]
        seen = {a.id for a in mine}
        return ([s for s in keep if s.id not in seen] + mine)[:limit]

    def search(self, query: str, limit: int, filters: dict[str, Any] | None = None,
               **kwargs: Any) -> list[MemorySetItem]:
        """The ``limit`` stored items closest to ``query`` (one durable call)."""
        found = self._ltm.call(self._label("search"), self._ltm.backend().search, self.name,
                               self.scope, query, limit, filters, kwargs)
        return self._without_deleted(found)

    async def asearch(self, query: str, limit: int, filters: dict[str, Any] | None = None,
                      **kwargs: Any) -> list[MemorySetItem]:
        """Async ``search`` (on the I/O executor)."""
        found = await self._ltm.acall(self._label("search"), self._ltm.backend().search,
                                      self.name, self.scope, query, limit, filters, kwargs)
        return self._without_deleted(found)

    def _without_deleted(self, found: list[MemorySetItem]) -> list[MemorySetItem]:
        _, deleted, cleared = self._pending()
        return [] if cleared else [f for f in found if f.id not in deleted]

    def delete(self, ids: str | list[str] | None = None) -> None:
        """Log a delete of ``ids`` (``None``: the whole set), applied when the action completes."""
        if ids is None:
            self._ltm.log({"op": "clear", "set": self.name, "scope": self.scope})
        else:
            id_list = [ids] if isinstance(ids, str) else [str(i) for i in ids]
            self._ltm.log({"op": "delete", "set": self.name, "scope": self.scope,
                           "ids": id_list})

    async def acompact(self, chat_model: str, *, instructions: str | None = None,
                       max_items: int = 200) -> str | None:
        """Summarize up to ``max_items`` items into one (see ``MemorySet.acompact``)."""
        items = self.get(limit=max_items)  # oldest first, then this action's own adds
        if len(items) < 2:
            return None
        messages = [ChatMessage(role=MessageRole.SYSTEM, content=instructions or _COMPACT),
                    ChatMessage(role=MessageRole.USER,
                                content="\n".join(f"- {i.value}" for i in items))]
        response = await self._ltm.ctx.chat(chat_model, messages)
        summary = (response.message.content or "").strip()
        if not summary:
            raise VectorStoreError(f"memory set {self.name!r}: chat model {chat_model!r} "
                                   "answered the compaction with an empty summary")
        self.delete([i.id for i in items])
        return self.add(summary, {"compacted_from": len(items)})[0]

    def size(self) -> int:
        """Items in the set as this action sees it (durable counts; no item is read)."""
        added, deleted, cleared = self._pending()
        if cleared:
            return len(added)
        label, count = self._label("count"), self._ltm.backend().count
        stored = self._ltm.call(label, count, self.name, self.scope, [])
        gone = (self._ltm.call(label, count, self.name, self.scope, sorted(deleted))
                if deleted else 0)
        return int(stored) - int(gone) + len(added)


class ActionLongTermMemory(BaseLongTermMemory):
    """``ctx.long_term_memory`` of one action execution."""

    def __init__(self, ctx: ActionContext) -> None:
        self._ctx = ctx
        self.ctx = ctx
        self.writes: list[dict[str, Any]] = []
        self._n = 0
        self._backend: _Store | None = None
        self.key_scope = "key:" + digest(to_json_value(ctx.key, "the key"))

    def backend(self) -> _Store:
        """The configured store (raw: the durable calls wrap it).

        Returns:
            The store.

        Raises:
            ResourceError: when no store is configured or it is not a ``VectorStore``.

        """
        if self._backend is None:
            ctx = self._ctx
            config = ctx.plan.config
            name = config.get(LongTermMemoryOptions.VECTOR_STORE)
            if not name:
                raise ResourceError(
                    "long-term memory needs a vector store: agent.set_config(**{"
                    f"{LongTermMemoryOptions.VECTOR_STORE!r}: '<VECTOR_STORE resource>'}})")
            store = ctx.resources.get(name, ResourceType.VECTOR_STORE)
            if not isinstance(store, VectorStore):
                raise ResourceError(f"long-term memory store {name!r} is not a VectorStore")
            self._backend = _Store(store, config.get(LongTermMemoryOptions.COLLECTION,
                                                    "long_term_memory"))
        return self._backend

    def get_memory_set(self, name: str, shared: bool = False) -> ActionMemorySet:
        """The memory set ``name`` of this key (``shared``: of every key)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a memory set name must be a non-empty string, got {name!r}")
        self.backend()
        return ActionMemorySet(self, name, shared)

    def delete_memory_set(self, name: str, shared: bool = False) -> bool:
        """Clear the set when the action completes; returns whether it held items."""
        mset = self.get_memory_set(name, shared)
        had = bool(mset.get(limit=1))
        mset.delete()
        return had

    def next_id(self, set_name: str, scope: str) -> str:
        """The next item id: stable for this action execution and item ordinal."""
        n, self._n = self._n, self._n + 1
        # the key's scope too: execution ids are per key, a shared set is not
        raw = f"{self.key_scope}|{scope}|{set_name}|{self._ctx.execution_id}|{n}".encode()
        return "ltm-" + hashlib.blake2b(raw, digest_size=12).hexdigest()

    def log(self, write: dict[str, Any]) -> None:
        """Log a write (checked for a JSON form now)."""
        self._ctx._check_live("long-term memory")
        self.writes.append(to_json_value(write, "a long-term memory write"))

    def call(self, label: str, fn: Any, *args: Any) -> Any:
        """One durable call named ``label``."""
        return self._ctx.durable_execute(durable_target(label, fn), *args)

    def acall(self, label: str, fn: Any, *args: Any) -> Any:
        """One durable call named ``label``, on the I/O executor (awaitable)."""
        return self._ctx.durable_execute_async(durable_target(label, fn), *args)

    def commit(self) -> None:
        """Apply the logged writes in one durable call (``long_term_memory.commit``)."""
        if self.writes:
            writes, self.writes = self.writes, []
            self.call("long_term_memory.commit", self.backend().commit, writes)


def commit_long_term_memory(ctx: Any) -> BaseException | None:
    """Apply an action's long-term memory writes as it completes (called by the core).

    Returns:
        ``None``, or the exception that made the commit fail (the action then fails, and
        none of its writes, memory or events apply).

    """
    ltm = getattr(ctx, "__dict__", {}).get("_ltm")
    if ltm is None or not ltm.writes:
        return None
    try:
        ltm.commit()
    except Exception as e:  # noqa: BLE001 - the action's outcome
        return e
    return None
