"""Long-term memory as one action sees it: durable reads, writes applied when it completes.

Items live in the vector store the agent configures (``LongTermMemoryOptions.VECTOR_STORE``),
one document per item, in one collection; reserved metadata fields place each item:
``fa_set`` (the set's name), ``fa_scope`` (``key:<digest>`` of the agent and the key, or
``shared:<digest>`` of the agent), ``fa_created_at`` (ISO 8601, UTC) and ``fa_seq`` (the
item's place in its write), which order ``get`` oldest first, and ``fa_owner``, ``fa_run``,
``fa_exec``: the key scope, run and action execution that wrote it (see *replay* below).

- **Isolation.** Every read and write names the set and the scope: an item of another agent,
  key or set is never found, and a delete of its id does nothing (the ids are checked against
  the scope before anything is deleted). Item ids are a keyed hash (HMAC-SHA256) of the
  scope, the key's memory epoch, set, action execution and ordinal under a random secret
  kept in the store (in the collection ``<collection>-keys``), so they are stable on a
  replay, cannot be computed from another key, and a new job (a new epoch) never reuses an
  old job's ids.
- ``add``/``delete`` are logged in the action. When the action completes, the core calls
  ``commit_long_term_memory``: one durable call (``long_term_memory.commit``) embeds the
  added items and applies the log in order. Its outcome is recorded like any durable call,
  so a restore that finds it recorded does not write again; one that does not re-executes it
  with the same ids (an upsert, no duplicates).
- **Replay.** ``get``, ``search`` and ``size`` are durable calls run on the operator thread
  (``asearch`` embeds the query on the I/O executor first), so their outcome is in keyed
  state from the callback that made them: a checkpoint never finds one in flight, and a
  restore replays what the first execution saw. A read made again after a restore (the
  checkpoint was older than the read) does not see what the crashed attempt of this key
  wrote after that checkpoint: items written by this key in a later run, or in this run by
  this action execution or one still in flight, are left out.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ...api import (
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
from ...api.internal import check_texts
from .._knowledge import durable_target
from .._serde import digest, to_json_value

if TYPE_CHECKING:
    from ..recorder._execution import ActionExecution

__all__ = ["ActionLongTermMemory", "ActionMemorySet", "commit_long_term_memory"]

_SET, _SCOPE, _CREATED, _SEQ = "fa_set", "fa_scope", "fa_created_at", "fa_seq"
_OWNER, _EPOCH, _RUN, _EXEC = "fa_owner", "fa_epoch", "fa_run", "fa_exec"
_RESERVED = (_SET, _SCOPE, _CREATED, _SEQ, _OWNER, _EPOCH, _RUN, _EXEC)
_EPOCH_PATH = "_flink_agents_py.long_term_memory_epoch"
"""Where the key's short-term memory keeps its memory epoch (see ``Horizon``)."""
_COMPACT = ("Summarize these memory items into one short note that keeps every distinct "
            "fact, one fact per line. Answer with the note only.")
_SCALARS = (str, int, float, bool)
_SECRET_ID = "fa-ltm-secret"


def _item(doc: Document, set_name: str) -> MemorySetItem:
    meta = dict(doc.metadata)
    created = meta.pop(_CREATED, None)
    for k in _RESERVED:
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
    return _SET in str(e) or _SCOPE in str(e) or _OWNER in str(e)


def exec_tag(execution_id: str) -> str:
    """The ``fa_exec`` of items an action execution writes (a digest of its id)."""
    return digest(execution_id)


@dataclass(frozen=True)
class Horizon:
    """What a read of one action execution may see of its own key's writes.

    Items this key (``owner``) wrote in its current state's lineage (``epoch``: a random
    token its short-term memory keeps from its first memory read or write on, so a new job without
    that state starts a new one) in a later run than ``run``, or in run ``run`` by one of the
    ``hidden`` executions (the reader and those still in flight), were written by an attempt
    that crashed after the checkpoint this run was restored from: left out.
    """

    owner: str
    epoch: str | None
    run: int
    hidden: frozenset[str]

    def shows(self, doc: Document) -> bool:
        """Whether the reading execution may see ``doc``."""
        meta = doc.metadata
        if self.epoch is None or meta.get(_OWNER) != self.owner \
                or meta.get(_EPOCH) != self.epoch:
            return True
        run = meta.get(_RUN)
        if not isinstance(run, int) or run < self.run:
            return True
        return run == self.run and meta.get(_EXEC) not in self.hidden


_SECRETS: dict[tuple[int, str], tuple[weakref.ref[VectorStore], bytes]] = {}
_SECRETS_LOCK = threading.Lock()


def _secret(store: VectorStore, collection: str | None) -> bytes:
    """The random id secret of a memory collection, kept in the store (made on first use).

    Read back after it is written, so concurrent first writers agree on what is stored.

    Returns:
        The secret's bytes.

    Raises:
        VectorStoreError: when the store does not keep it.
    """
    k = (id(store), str(collection))
    with _SECRETS_LOCK:
        hit = _SECRETS.get(k)
        if hit is not None and hit[0]() is store:
            return hit[1]
    keys = f"{collection or 'long_term_memory'}-keys"
    found = store.get([_SECRET_ID], keys)
    if not found:
        store.add([Document(id=_SECRET_ID, content=secrets.token_hex(32), embedding=[1.0])],
                  keys)
        found = store.get([_SECRET_ID], keys)
    if not found:
        raise VectorStoreError(f"long-term memory: the store keeps no id secret in {keys!r}")
    secret = bytes.fromhex(found[0].content)
    with _SECRETS_LOCK:
        _SECRETS[k] = (weakref.ref(store), secret)
    return secret


class _Store:
    """The raw store and collection behind the memory, with the durable targets' bodies."""

    def __init__(self, store: VectorStore, collection: str | None) -> None:
        self.store = store
        self.collection = collection

    def _visible(self, fetch: Callable[[int | None], list[Document]], limit: int | None,
                 horizon: Horizon) -> list[Document]:
        """Up to ``limit`` documents ``fetch(n)`` finds that ``horizon`` shows."""
        n = limit
        while True:
            docs = fetch(n)
            shown = [d for d in docs if horizon.shows(d)]
            if n is None or len(docs) < n or len(shown) >= (limit or 0):
                return shown[:limit] if limit is not None else shown
            n += len(docs) - len(shown)

    def get(self, set_name: str, scope: str, ids: list[str] | None,
            filters: dict[str, Any] | None, limit: int | None,
            horizon: Horizon) -> list[MemorySetItem]:
        try:
            if ids is not None:
                docs = [d for d in self.store.get(ids, self.collection)
                        if d.metadata.get(_SET) == set_name and d.metadata.get(_SCOPE) == scope
                        and horizon.shows(d)]
            else:
                placed = _placed(filters, set_name, scope)
                # every match, then the oldest ``limit``: a store returns a limited get in
                # its own order (a re-executed commit's upsert can move an item to its end)
                docs = self._visible(
                    lambda n: self.store.get(None, self.collection, placed, n), None, horizon)
                docs.sort(key=lambda d: (str(d.metadata.get(_CREATED, "")),
                                         d.metadata.get(_SEQ, 0)))  # oldest first
                docs = docs if limit is None else docs[:limit]
        except UnknownFilterFieldError as e:
            if _empty_on_unplaced(e):
                return []
            raise
        return [_item(d, set_name) for d in docs]

    def count(self, set_name: str, scope: str, ids: list[str], horizon: Horizon) -> int:
        """Stored items of the set the reader may see; with ``ids``: how many of those."""
        try:
            if ids:
                return len(self.get(set_name, scope, ids, None, None, horizon))
            placed = _placed(None, set_name, scope)
            total = self.store.count(self.collection, placed)
            if not total:
                return 0
            if horizon.epoch is None:
                return total
            try:
                mine = self.store.get(None, self.collection,
                                      {**placed, _OWNER: horizon.owner}, None)
            except UnknownFilterFieldError:  # no item carries an owner: none is left out
                return total
            return total - sum(1 for d in mine if not horizon.shows(d))
        except UnknownFilterFieldError as e:
            if _empty_on_unplaced(e):
                return 0
            raise

    def search(self, set_name: str, scope: str, vector: list[float], limit: int,
               filters: dict[str, Any] | None, kwargs: dict[str, Any],
               horizon: Horizon) -> list[MemorySetItem]:
        placed = _placed(filters, set_name, scope)

        def fetch(n: int | None) -> list[Document]:
            return self.store.query(VectorStoreQuery(
                query_embedding=vector, limit=n or 0, collection_name=self.collection,
                filters=placed, extra_args=kwargs)).documents

        try:
            docs = self._visible(fetch, limit, horizon)
        except UnknownFilterFieldError as e:
            if _empty_on_unplaced(e):
                return []
            raise
        return [_item(d, set_name) for d in docs]

    def embed(self, query: str) -> list[float]:
        """The query's vector (by the store's embedding model)."""
        if not isinstance(query, str) or not query.strip():
            raise VectorStoreError("long-term memory search: the query is empty")
        vector: list[float] = self.store.get_embedding_model().embed(query)  # type: ignore[assignment]
        return list(vector)

    def commit(self, writes: list[dict[str, Any]]) -> dict[str, int]:
        now = datetime.now(timezone.utc).isoformat()
        added = deleted = 0
        for w in writes:
            placed = {_SET: w["set"], _SCOPE: w["scope"]}
            if w["op"] == "add":
                tags = {_OWNER: w["owner"], _EPOCH: w["epoch"], _RUN: w["run"],
                        _EXEC: w["exec"]}
                docs = [Document(id=i, content=v, metadata={**m, **placed, **tags,
                                                             _CREATED: now, _SEQ: added + n})
                        for n, (i, v, m) in enumerate(zip(w["ids"], w["values"],
                                                          w["metadatas"], strict=True))]
                self.store.add(docs, self.collection)
                added += len(docs)
            elif w["op"] == "delete":
                # only ids of this set and scope: another key's ids delete nothing
                ids = [d.id for d in self.store.get(w["ids"], self.collection)
                       if d.id is not None and d.metadata.get(_SET) == w["set"]
                       and d.metadata.get(_SCOPE) == w["scope"]]
                if ids:
                    self.store.delete(ids, self.collection)
                deleted += len(ids)
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
        self.scope = ltm.shared_scope if shared else ltm.key_scope

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
                       "values": texts, "metadatas": metas, **self._ltm.tags()})
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
        stored = self._ltm.read(self._label("get"), self._ltm.backend().get, self.name,
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
        """The ``limit`` stored items closest to ``query`` (two durable calls: embed, search)."""
        vector = self._ltm.call(self._label("embed"), self._ltm.backend().embed, query)
        return self._search(vector, limit, filters, kwargs)

    async def asearch(self, query: str, limit: int, filters: dict[str, Any] | None = None,
                      **kwargs: Any) -> list[MemorySetItem]:
        """Async ``search``: the query is embedded on the I/O executor, then searched."""
        vector = await self._ltm.acall(self._label("embed"), self._ltm.backend().embed, query)
        return self._search(vector, limit, filters, kwargs)

    def _search(self, vector: list[float], limit: int, filters: dict[str, Any] | None,
                kwargs: dict[str, Any]) -> list[MemorySetItem]:
        found = self._ltm.read(self._label("search"), self._ltm.backend().search, self.name,
                               self.scope, vector, limit, filters, kwargs)
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
        response = await self._ltm._ctx.chat(chat_model, messages)
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
        stored = self._ltm.read(label, count, self.name, self.scope, [])
        gone = (self._ltm.read(label, count, self.name, self.scope, sorted(deleted))
                if deleted else 0)
        return int(stored) - int(gone) + len(added)


class ActionLongTermMemory(BaseLongTermMemory):
    """``ctx.long_term_memory`` of one action execution."""

    def __init__(self, ctx: ActionExecution) -> None:
        self._ctx = ctx  # the execution: not a user-facing attribute
        self.writes: list[dict[str, Any]] = []
        self._n = 0
        self._backend: _Store | None = None
        agent = ctx.plan.agent
        self.key_scope = "key:" + digest([agent, to_json_value(ctx.key, "the key")])
        self.shared_scope = "shared:" + digest(agent)

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
        """The next item id: stable for this action execution and item ordinal.

        A keyed hash under the collection's secret (see the module docstring): another key
        cannot compute it. The key's memory epoch is part of it, so a new job's items never
        take an old job's ids.

        Returns:
            The id.
        """
        n, self._n = self._n, self._n + 1
        backend = self.backend()
        # the key's scope too: execution ids are per key, a shared set is not; its epoch
        # too: a new job (no state) numbers its executions from the start again, and must
        # add to what an old job wrote, never overwrite it
        raw = (f"{self.key_scope}|{self._epoch()}|{scope}|{set_name}|"
               f"{self._ctx.execution_id}|{n}").encode()
        mac = hmac.new(_secret(backend.store, backend.collection), raw, hashlib.sha256)
        return "ltm-" + mac.hexdigest()[:32]

    def _epoch(self) -> str:
        """The key's memory epoch; the first read or write of its lineage draws it.

        Drawn in a durable call (``long_term_memory.epoch``), so a restore to any point after
        that call (even within the same action execution, before any write) replays the same
        epoch and its reads leave out what the crashed attempt wrote; kept in the key's
        short-term memory, applied with the action's other writes (see ``Horizon``).

        Returns:
            The epoch.
        """
        epoch = self._ctx.short_term_memory.get(_EPOCH_PATH)
        if not isinstance(epoch, str):  # drawn in a durable call: the same on a replay
            epoch = str(self.call("long_term_memory.epoch", secrets.token_hex, 8))
            self._ctx.short_term_memory.set(_EPOCH_PATH, epoch)
        return epoch

    def tags(self) -> dict[str, Any]:
        """Who writes: this key's scope and epoch, the run and the action execution.

        Returns:
            The tags of the write-log entry.
        """
        return {"owner": self.key_scope, "epoch": self._epoch(), "run": self._ctx.run.seq,
                "exec": exec_tag(self._ctx.execution_id)}

    def horizon(self) -> Horizon:
        """What a read made now may see of this key's own writes (see ``Horizon``).

        Returns:
            The horizon.
        """
        run = self._ctx.run
        hidden = {exec_tag(e) for e in run.inflight}
        hidden.add(exec_tag(self._ctx.execution_id))
        return Horizon(self.key_scope, self._epoch(), run.seq, frozenset(hidden))

    def read(self, label: str, fn: Callable[..., Any], *args: Any) -> Any:
        """One durable read named ``label``, run now on this thread, bounded by ``horizon``.

        Its outcome is in keyed state before the host callback ends, so no checkpoint finds
        it in flight.

        Returns:
            What ``fn(*args, horizon)`` returned (or the recorded outcome, on a replay).
        """
        horizon = self.horizon()

        def bounded(*a: Any) -> Any:
            return fn(*a, horizon)

        return self._ctx.durable_execute(durable_target(label, bounded), *args)

    def log(self, write: dict[str, Any]) -> None:
        """Log a write (checked for a JSON form now)."""
        self._ctx.check_live("long-term memory")
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


def commit_long_term_memory(ctx: ActionExecution) -> BaseException | None:
    """Apply an action's long-term memory writes as it completes (called by the core).

    Returns:
        ``None``, or the exception that made the commit fail (the action then fails, and
        none of its writes, memory or events apply).

    """
    ltm = ctx.ltm
    if ltm is None or not ltm.writes:
        return None
    try:
        ltm.commit()
    except Exception as e:  # noqa: BLE001 - the action's outcome
        return e
    return None
