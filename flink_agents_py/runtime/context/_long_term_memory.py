"""Long-term memory as one action sees it: durable reads, writes applied when it completes.

Items live in the vector store the agent configures (``LongTermMemoryOptions.VECTOR_STORE``),
one document per item, in one collection; reserved metadata fields place each item:
``fa_set`` (the set's name), ``fa_scope`` (``key:<digest>`` of the agent and the key, 256
bits, or ``shared:<digest>`` of the agent), ``fa_created_at`` (ISO 8601, UTC) and ``fa_seq`` (the
item's place in its write), which order ``get`` oldest first, and ``fa_owner``, ``fa_run``,
``fa_exec``: the key scope, run and action execution that wrote it (see *replay* below).

- **Isolation.** Every read and write names the set and the scope: an item of another agent,
  key or set is never found, and a delete of its id does nothing (the ids are checked against
  the scope before anything is deleted). Item ids are a keyed hash (HMAC-SHA256) of the
  scope, the key's memory epoch, set, action execution and ordinal under a random secret
  kept in the store (in the collection ``<collection>-keys``), so they are stable on a
  replay, cannot be computed from another key, and a new job (a new epoch) never reuses an
  old job's ids.
- **Key scopes.** Items written before the key scope was a full digest have a 64-bit one
  (``key:<16 hex digits>``: two keys of one agent could share it, and a key made to collide
  with another would read its items): a key's reads find its items under both scopes, its
  deletes and clears reach both, and its writes go to the full one (``key_scopes``). A read
  names the old scope in its durable call (``MemoryStore.wider`` maps it to both), as older
  versions recorded it: a restore of their checkpoint replays its reads as recorded. The
  writer's tag (``fa_owner``, see *replay*) and the item ids keep the old scope too, so an
  action re-executed after such a restore rewrites the items its crashed attempt wrote; they
  tell a key's own writes apart within its epoch, never one key's items from another's.
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
  this action execution or one still in flight, are left out, and items that attempt
  deleted are seen (a delete is a mark, see ``_memory_items``). The key's memory epoch is
  drawn as its first run starts (``begin_lineage``), so every checkpoint holding the key
  holds it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ...api import (
    BaseLongTermMemory,
    DimensionMismatchError,
    Document,
    LongTermMemoryOptions,
    MemorySet,
    MemorySetItem,
    ResourceError,
    ResourceType,
    VectorStore,
    VectorStoreError,
)
from ...api.internal import check_texts, key_json, shown_key
from .._keys import key_text
from .._knowledge import durable_target
from .._memory_items import (
    MISSING,
    RESERVED,
    Horizon,
    MemoryStore,
    check_limit,
    exec_tag,
    id_list,
    matches,
)
from .._serde import digest, dumps, to_json_value
from ._calls import MustAwait
from ._compaction import compaction_messages, replace_by_summary, summarize
from ._nested import refuse_nested

if TYPE_CHECKING:
    from ..recorder._execution import ActionExecution

__all__ = ["ActionLongTermMemory", "ActionMemorySet", "begin_lineage", "commit_long_term_memory",
           "key_scopes", "renamed", "session_id"]

_EPOCH_PATH = "_flink_agents_py.long_term_memory_epoch"
"""Where the key's short-term memory keeps its memory epoch (see ``Horizon``)."""
SESSION_EPOCH_PATH = "_flink_agents_py.session_epoch"
"""Where the key's short-term memory keeps its session epoch (``session_id``)."""
_SCALARS = (str, int, float, bool)
_SECRET_ID = "fa-ltm-secret"


def begin_lineage(plan: Any, state: Any, lineage: str | None, key: Any) -> None:
    """Draw the key's epochs as its run starts, unless the key has them (see ``Horizon``).

    The memory epoch, for plans with a vector store; the session epoch (``session_id``),
    for plans with sub-agents run by a job with a lineage token. Kept in the key's state
    with the run from the host callback that starts it, so every checkpoint that holds the
    key holds them: a restore to a point before the key's first memory access (or first
    vector-store write) still leaves out what its crashed attempt wrote. With the job's
    ``lineage`` (``HostOptions.lineage``) an epoch is a digest of it, the agent and the key,
    so a key absent from the checkpoint (its first record came after it) draws the epoch its
    crashed attempt had; without one the memory epoch is random (the key starts anew, as in
    a new job) and no session epoch is drawn.

    Args:
        plan: the agent's plan.
        state: the key's state (``KeyState``).
        lineage: the job's lineage token, or ``None``.
        key: the key's value.
    """
    paths = [_EPOCH_PATH] if plan.resources.get(ResourceType.VECTOR_STORE) else []
    if lineage is not None and plan.resources.get(ResourceType.AGENT):
        paths.append(SESSION_EPOCH_PATH)
    if not paths:
        return
    memory = state.memory
    ns = _EPOCH_PATH.partition(".")[0]
    tree = memory.get(ns)
    tree = dict(tree) if isinstance(tree, dict) else {}
    drawn = False
    for path in paths:
        leaf = path.partition(".")[2]
        if not isinstance(tree.get(leaf), str):
            tree[leaf] = secrets.token_hex(8) if lineage is None else digest(
                [lineage, plan.agent, to_json_value(key_json(key), "the key")])[:16]
            drawn = True
    if drawn:
        state.memory = {**memory, ns: tree}


def session_id(key: Any, seq: int, key_memory: dict[str, Any]) -> str:
    """The session id of run ``seq`` of ``key``, as external sub-agents are given it.

    ``<key>/<session epoch>/r<seq>`` when the key has a session epoch (``begin_lineage``):
    a new job (not restored from a savepoint of this one) draws new epochs, so a remote
    service keeping its results by ``session_id#call_id`` never hands one job's result to
    another job's call; failover attempts and restores of one job keep the key's epoch.
    ``<key>/r<seq>`` for a key with none (a core built without a lineage token; both hosts
    give one, and runs started before session epochs existed: their calls keep their ids).

    Args:
        key: the key's value.
        seq: the run's input position.
        key_memory: the key's short-term memory.

    Returns:
        The id.
    """
    tree = key_memory.get(SESSION_EPOCH_PATH.partition(".")[0])
    epoch = tree.get(SESSION_EPOCH_PATH.partition(".")[2]) if isinstance(tree, dict) else None
    return f"{key_text(key)}/{epoch}/r{seq}" if isinstance(epoch, str) else \
        f"{key_text(key)}/r{seq}"


def key_scopes(agent: str, key: Any) -> tuple[str, str]:
    """The scope of a key's memory items, and the one items written by older versions have.

    ``key:`` and a 256-bit digest of the agent and the key's JSON form (no two keys share
    it); the older one has 64 bits of the same (``digest``), which two keys may share.

    Args:
        agent: the agent's identity (``AgentPlan.agent``).
        key: the key's value.

    Returns:
        ``(scope, legacy scope)``.
    """
    ident = [agent, to_json_value(key_json(key), "the key")]
    full = hashlib.blake2b(dumps(ident), digest_size=32).hexdigest()
    return f"key:{full}", f"key:{digest(ident)}"


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


class ActionMemorySet(MemorySet):
    """One memory set of one action (see the module docstring)."""

    def __init__(self, ltm: ActionLongTermMemory, name: str, shared: bool) -> None:
        self._ltm = ltm
        self.name = name
        self.shared = shared
        self.scope = ltm.shared_scope if shared else ltm.key_scope
        # where reads find the set's items: the key's old 64-bit scope too (``key_scopes``)
        self.scopes = [self.scope] if shared or ltm.legacy_scope == self.scope else \
            [self.scope, ltm.legacy_scope]
        # what a read names: the scope older versions named, so a read they recorded
        # replays with the same arguments (``MemoryStore.wider`` reads both scopes)
        self.read_as = self.scopes[-1]

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
                if k in RESERVED or not isinstance(v, _SCALARS):
                    raise VectorStoreError(
                        f"memory set {self.name!r}: item {i} metadata {k!r} must be a JSON "
                        f"scalar under a non-reserved name (reserved: {list(RESERVED)})")
        ids = [self._ltm.next_id(self.name, self.read_as) for _ in texts]
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
            limit: int | None = 100) -> list[MemorySetItem]:
        """Items by id, or up to ``limit`` matching ``filters`` (one durable call)."""
        wanted = id_list(ids) if ids is not None else None
        if wanted is None and limit is not None:
            check_limit(limit, f"memory set {self.name!r} get",
                         " (get(limit=None) reads every item)")
        added, deleted, cleared = self._pending()
        fetch = None if wanted is not None or limit is None else limit + len(deleted)
        stored = self._ltm.read(self._label("get"), self._ltm.backend().get, self.name,
                                self.read_as, wanted, filters, fetch)
        keep = [] if cleared else [s for s in stored if s.id not in deleted]
        if wanted is not None:
            by_id = {s.id: s for s in keep}
            by_id.update({a.id: a for a in added})
            return [by_id[i] for i in wanted if i in by_id]
        mine = [a for a in added if all(matches((a.additional_metadata or {}).get(k, MISSING), v)
                                        for k, v in (filters or {}).items())]
        seen = {a.id for a in mine}
        return ([s for s in keep if s.id not in seen] + mine)[:limit]

    def search(self, query: str, limit: int, filters: dict[str, Any] | None = None,
               **kwargs: Any) -> list[MemorySetItem]:
        """The ``limit`` stored items closest to ``query`` (two durable calls: embed, search)."""
        check_limit(limit, f"memory set {self.name!r} search")
        vector = self._ltm.call(self._label("embed"), self._embed(), query)
        return self._search(vector, limit, filters, kwargs)

    async def asearch(self, query: str, limit: int, filters: dict[str, Any] | None = None,
                      **kwargs: Any) -> list[MemorySetItem]:
        """Async ``search``: the query is embedded on the I/O executor, then searched."""
        check_limit(limit, f"memory set {self.name!r} search")
        vector = await self._ltm.acall(self._label("embed"), self._embed(), query)
        return self._search(vector, limit, filters, kwargs)

    def _embed(self) -> Callable[..., Any]:
        return self._ltm._named(f"set {self.name!r}", self._ltm.backend().embed)

    def _search(self, vector: list[float], limit: int, filters: dict[str, Any] | None,
                kwargs: dict[str, Any]) -> list[MemorySetItem]:
        _, deleted, cleared = self._pending()
        # the closest ``limit`` the action has not deleted: as many more as it deleted
        found = self._ltm.read(self._label("search"), self._ltm.backend().search, self.name,
                               self.read_as, vector, limit + len(deleted), filters, kwargs)
        return [] if cleared else [f for f in found if f.id not in deleted][:limit]

    def delete(self, ids: str | list[str] | None = None) -> None:
        """Log a delete of ``ids`` (``None``: the whole set), applied when the action completes."""
        also = {"legacy": self.scopes[1]} if len(self.scopes) > 1 else {}
        if ids is None:
            self._ltm.log({"op": "clear", "set": self.name, "scope": self.scope, **also,
                           **self._ltm.tags()})
        else:
            self._ltm.log({"op": "delete", "set": self.name, "scope": self.scope, **also,
                           "ids": id_list(ids), **self._ltm.tags()})

    def acompact(self, chat_model: str, *, instructions: str | None = None,
                 max_items: int = 200) -> Awaitable[str | None]:
        """Summarize up to ``max_items`` items into one (see ``MemorySet.acompact``)."""
        check_limit(max_items, f"memory set {self.name!r} compaction's max_items")
        return MustAwait(self._acompact(chat_model, instructions, max_items),
                         f"memory set {self.name!r}.acompact({chat_model!r})",
                         "so the set was never compacted",
                         "write 'await memory_set.acompact(...)' (in an async action)")

    async def _acompact(self, chat_model: str, instructions: str | None, max_items: int
                        ) -> str | None:
        items = self.get(limit=max_items)  # oldest first, then this action's own adds
        if len(items) < 2:
            return None
        response = await self._ltm._ctx.chat(chat_model, compaction_messages(items, instructions))
        return replace_by_summary(self, chat_model, items, response)

    def count_items(self) -> int:
        """Items in the set as this action sees it (durable counts; no item is read)."""
        added, deleted, cleared = self._pending()
        if cleared:
            return len(added)
        label, count = self._label("count"), self._ltm.backend().count
        stored = self._ltm.read(label, count, self.name, self.read_as, [])
        gone = (self._ltm.read(label, count, self.name, self.read_as, sorted(deleted))
                if deleted else 0)
        return int(stored) - int(gone) + len(added)


class ActionLongTermMemory(BaseLongTermMemory):
    """``ctx.long_term_memory`` of one action execution."""

    def __init__(self, ctx: ActionExecution) -> None:
        self._ctx = ctx  # the execution: not a user-facing attribute
        self.writes: list[dict[str, Any]] = []
        self._n = 0
        self._backend: MemoryStore | None = None
        agent = ctx.plan.agent
        self.key_scope, self.legacy_scope = key_scopes(agent, ctx.key)
        self.shared_scope = "shared:" + digest(agent)

    def backend(self) -> MemoryStore:
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
            self._backend = MemoryStore(store, config.get(LongTermMemoryOptions.COLLECTION,
                                                    "long_term_memory"))
            if self.legacy_scope != self.key_scope:
                self._backend.wider[self.legacy_scope] = [self.key_scope, self.legacy_scope]
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

    summarize_set = summarize  # Flink Agents 0.2's compaction on add (``_compaction``)

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
        # add to what an old job wrote, never overwrite it. The old 64-bit scopes, as older
        # versions made ids: an action re-executed after a restore of their checkpoint adds
        # the items its crashed attempt added (two keys sharing one differ by their epochs)
        raw = (f"{self.legacy_scope}|{self._epoch()}|{scope}|{set_name}|"
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
            self._ctx.short_term._set_reserved(_EPOCH_PATH, epoch)
        return epoch

    def tags(self) -> dict[str, Any]:
        """Who writes: this key's scope and epoch, the run and the action execution.

        Returns:
            The tags of the write-log entry.
        """
        return {"owner": self.legacy_scope, "epoch": self._epoch(), "run": self._ctx.run.seq,
                "exec": exec_tag(self._ctx.execution_id)}

    def horizon(self, store_writes: str | None = None) -> Horizon:
        """What a read made now may see of this key's own writes (see ``Horizon``).

        Args:
            store_writes: the target prefix of the read store's writes (``<module>:
                vector_store[<name>].``): the reader's own documents show only where this
                attempt made such a write at their call ordinal.

        Returns:
            The horizon.
        """
        run = self._ctx.run
        hidden = {exec_tag(e) for e in run.inflight}
        own = exec_tag(self._ctx.execution_id)
        hidden.add(own)
        done = frozenset(run.ltm_done) if run.ltm_done is not None else None
        writes = None if store_writes is None else frozenset(
            (n, c.digest) for n, c in self._ctx.calls.items()
            if c.target.startswith(store_writes)
            and c.target.rsplit(".", 1)[-1] in ("add", "update", "delete"))
        return Horizon(self.legacy_scope, self._epoch(), run.seq, frozenset(hidden), own,
                       self._ctx._next_ordinal, done, writes)

    def read(self, label: str, fn: Callable[..., Any], *args: Any) -> Any:
        """One durable read named ``label``, run now on this thread, bounded by ``horizon``.

        Its outcome is in keyed state before the host callback ends, so no checkpoint finds
        it in flight.

        Returns:
            What ``fn(*args, horizon)`` returned (or the recorded outcome, on a replay).
        """
        horizon = self.horizon()
        named = self._named(f"set {args[0]!r}", fn)

        def bounded(*a: Any) -> Any:
            return named(*a, horizon)

        return self._ctx.durable_execute(durable_target(label, bounded), *args)

    def _named(self, what: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn``, its store errors naming the memory ``what`` and the key (``renamed``)."""
        where = f"long-term memory {what} of key {shown_key(self._ctx.key)}"

        def run(*a: Any) -> Any:
            try:
                return fn(*a)
            except VectorStoreError as e:
                raise renamed(e, where) from e

        return run

    def log(self, write: dict[str, Any]) -> None:
        """Log a write (checked for a JSON form now; refused in a durable call's function)."""
        self._ctx.check_live("long-term memory")
        refuse_nested(f"long-term memory {write['op']}")  # a replay would not log it again
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
            sets = sorted({w["set"] for w in writes})
            what = f"commit of set{'s' if len(sets) > 1 else ''} {', '.join(map(repr, sets))}"
            self.call("long_term_memory.commit", self._named(what, self.backend().commit),
                      writes)


def renamed(error: VectorStoreError, where: str) -> VectorStoreError:
    """``error`` (of the same type) with its message naming ``where``.

    For vectors of another size it names the likely cause too: the embedding model changed
    since the items were written.

    Returns:
        The new error.
    """
    message = f"{where}: {error}"
    if isinstance(error, DimensionMismatchError):
        message += ("; the embedding model's vectors changed size since these items were "
                    "written: keep that model, or give long-term memory a new collection "
                    "(LongTermMemoryOptions.COLLECTION) and add the items again")
    try:
        return type(error)(message)
    except Exception:  # noqa: BLE001 - a subclass with another constructor
        return VectorStoreError(message)


def commit_long_term_memory(ctx: ActionExecution, error: BaseException | None
                            ) -> BaseException | None:
    """Apply an action's long-term memory writes as it completes (called by the core).

    Without ``error`` (and no divergence) its buffered writes are applied. Either way the
    run keeps the execution as finished (``RunState.ltm_done``): from now on the run's
    reads may see what it wrote (directly through a vector-store view too), and after a
    restore a read does not see what an execution that had not finished at the checkpoint
    wrote in the crashed attempt.

    Args:
        ctx: the finishing execution (it used long-term memory).
        error: what the action raised (``None``: it returned).

    Returns:
        ``error``, or the exception that made the commit fail (the action then fails, and
        none of its writes, memory or events apply).
    """
    ltm = ctx.ltm
    if error is None and ctx.diverged is None and ltm is not None and ltm.writes:
        try:
            ltm.commit()
        except Exception as e:  # noqa: BLE001 - the action's outcome
            error = e
    done = ctx.run.ltm_done
    if done is not None:
        done.append(exec_tag(ctx.execution_id))
    return error
