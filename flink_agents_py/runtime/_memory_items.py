"""Memory items in their vector store: placement, writers' tags, and what a reader sees.

Long-term memory (``_long_term_memory``) keeps one document per item in one collection of
the configured store; the reserved metadata fields here place each item and tag its writer
(the key, its memory epoch, the run, the action execution). ``Horizon`` says which of its own
key's writes a reader may see after a restore, ``visible`` reads through it, and deletes are
marks kept for ``DELETED_RETENTION_S`` (so a read made again after a restore sees an item the
crashed attempt deleted). The durable vector-store view (``_knowledge``) tags its adds and
reads through ``Horizon`` the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..api import (
    CollectionNotFoundError,
    Document,
    MemorySetItem,
    UnknownFilterFieldError,
    VectorStore,
    VectorStoreError,
    VectorStoreQuery,
)
from ._serde import digest

__all__ = ["DELETED_RETENTION_S", "Horizon", "MemoryStore", "exec_tag", "hidden_count",
           "tagged", "visible", "RESERVED", "WRITER_TAGS", "DEFAULT_COLLECTION",
           "memory_collections", "MISSING", "matches", "check_limit", "id_list"]

_SET, _SCOPE, _CREATED, _SEQ = "fa_set", "fa_scope", "fa_created_at", "fa_seq"
_OWNER, _EPOCH, _RUN, _EXEC = "fa_owner", "fa_epoch", "fa_run", "fa_exec"
_CALL = "fa_call"
"""The call ordinal of the vector-store add that wrote a document (see ``Horizon``)."""
_DIGEST = "fa_digest"
"""The digest of that call (its arguments): which write of the ordinal it was."""
# every field a read removes (``_untagged``): an item's own metadata of such a name was lost
_RESERVED = (_SET, _SCOPE, _CREATED, _SEQ, _OWNER, _EPOCH, _RUN, _EXEC, _CALL, _DIGEST)

DELETED_RETENTION_S = 7 * 24 * 3600
"""How long a deleted memory item is kept (marked deleted) before a later delete or clear
of its set removes it: a restore from a checkpoint taken up to this long before a delete
sees the item again in a read it makes again."""


MISSING = object()
"""What a pending item's metadata holds for a field it has not (``matches``)."""


def matches(value: Any, wanted: Any) -> bool:
    """Whether a pending item's metadata ``value`` matches a filter's, as the store matches.

    A stored item is matched by the vector store, where ``True`` is no number: ``1``
    (or ``1.0``) does not find it, nor ``True`` a ``1``. An action's own adds are matched
    the same way, so a filter finds them before and after they are stored.

    Returns:
        Whether it matches.
    """
    return value is not MISSING and isinstance(value, bool) == isinstance(wanted, bool) \
        and value == wanted


def check_limit(limit: Any, what: str, hint: str = "") -> None:
    """Refuse a count that is not a whole number >= 0 (``True`` is not one either).

    Raises:
        ValueError: naming ``what`` and the value (before anything is read).
    """
    if type(limit) is not int or limit < 0:
        raise ValueError(f"{what}: limit must be a whole number >= 0, got {limit!r}{hint}")


def id_list(ids: Any) -> list[str]:
    """A memory set's ``ids`` argument as the store's list of text ids.

    An item's id is text (``MemorySetItem.id``; Chroma refuses other ids with "Expected ID to
    be a str"): one id, or an iterable of them, each given as text or as a value whose text
    it is (``get(ids=[1])`` finds the item ``"1"``, as ``delete(ids=[1])`` deletes it).

    Returns:
        The ids, as text, in the order given.
    """
    if isinstance(ids, (str, int)):
        return [str(ids)]
    return [i if isinstance(i, str) else str(i) for i in ids]


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


def _by_score(docs: list[Document]) -> list[Document]:
    """``docs`` closest first (a smaller score is closer; unscored last, in their order)."""
    return sorted(docs, key=lambda d: (d.score is None, d.score or 0.0))


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
    that state starts a new one) in a later run than ``run``, or in run ``run`` by an
    execution that had not finished when the read was made (one of the ``hidden`` ones, the
    reader and those in flight, or one not in ``done``, the run's finished executions, such
    as an action that had not started at the checkpoint), were written by an attempt that
    crashed after the checkpoint this run was restored from: left out. ``done`` is ``None``
    for a run stored by an earlier version: then only the ``hidden`` ones are left out.
    ``writes``: the reader's own store writes made (or replayed) in this attempt, as
    ``(call ordinal, call digest)`` pairs (``None``: not known, ``before`` alone decides).
    """

    owner: str
    epoch: str | None
    run: int
    hidden: frozenset[str]
    own: str = ""
    before: int = -1
    done: frozenset[str] | None = None
    writes: frozenset[tuple[int, str]] | None = None

    def shows(self, doc: Document) -> bool:
        """Whether the reading execution may see ``doc``.

        A document the reading execution itself wrote in a durable call (``fa_call``, a
        vector-store add) before the read (``before``, the read's call ordinal) is shown
        when this attempt made that call again, or replayed it, before the read: its call
        at that ordinal is the same write of the store (``writes``; its digest, ``fa_digest``,
        when the document has one). New code restored from a checkpoint may make another
        call there (one inserted before the add, or another add first): the crashed
        attempt's document is then one the reader has not written yet.

        Returns:
            Whether it is shown.
        """
        meta = doc.metadata
        if self.epoch is None or meta.get(_OWNER) != self.owner \
                or meta.get(_EPOCH) != self.epoch:
            return True
        run = meta.get(_RUN)
        if not isinstance(run, int) or run < self.run:
            return True
        if run != self.run:
            return False
        exe = meta.get(_EXEC)
        if exe not in self.hidden:
            return self.done is None or exe in self.done
        call = meta.get(_CALL)
        if exe != self.own or not isinstance(call, int) or call >= self.before:
            return False
        if self.writes is None:
            return True
        made = meta.get(_DIGEST)
        return any(n == call and (made is None or made == d) for n, d in self.writes)


_TAGS = (_OWNER, _EPOCH, _RUN, _EXEC, _CALL, _DIGEST)


def tagged(docs: list[Document], tags: dict[str, Any]) -> list[Document]:
    """``docs`` with the writer's tags (``ActionLongTermMemory.tags``) in their metadata."""
    marks = {_OWNER: tags["owner"], _EPOCH: tags["epoch"], _RUN: tags["run"],
             _EXEC: tags["exec"], _CALL: tags["call"]}
    if tags.get("digest"):
        marks[_DIGEST] = tags["digest"]
    return [d.model_copy(update={"metadata": {**d.metadata, **marks}}) for d in docs]


def _untagged(doc: Document) -> Document:
    if not any(k in doc.metadata for k in _TAGS):
        return doc
    return doc.model_copy(update={"metadata": {k: v for k, v in doc.metadata.items()
                                               if k not in _TAGS}})


def visible(fetch: Callable[[int | None], list[Document]], limit: int | None,
            horizon: Horizon,
            deleted: Callable[[list[Document]], set[str]] | None = None) -> list[Document]:
    """Up to ``limit`` documents ``fetch(n)`` finds that ``horizon`` shows, tags removed.

    Documents a crashed attempt of this key wrote after the checkpoint are left out, and
    as many more fetched (the order of ``fetch`` kept).

    Returns:
        The documents.
    """
    n = limit
    while True:
        docs = fetch(n)
        gone = deleted(docs) if deleted is not None else set()
        shown = [d for d in docs if horizon.shows(d) and d.id not in gone]
        if n is None or len(docs) < n or len(shown) >= (limit or 0):
            out = shown if limit is None else shown[:limit]
            return [_untagged(d) for d in out]
        n += len(docs) - len(shown)


def hidden_count(store: VectorStore, collection: str | None, horizon: Horizon) -> int:
    """How many documents of ``collection`` a reader with ``horizon`` does not see.

    Returns:
        The count (0 when no document carries an owner).
    """
    if horizon.epoch is None:
        return 0
    try:
        mine = store.get(None, collection, {_OWNER: horizon.owner}, None)
    except (UnknownFilterFieldError, CollectionNotFoundError):  # no document carries one
        return 0
    return sum(1 for d in mine if not horizon.shows(d))


class MemoryStore:
    """The raw store and collection behind the memory, with the durable targets' bodies."""

    def __init__(self, store: VectorStore, collection: str | None) -> None:
        self.store = store
        self.collection = collection
        self.wider: dict[str, list[str]] = {}
        """The scopes a read naming a key's old scope looks in: the key's scope, then it."""

    def _scopes(self, scope: str | list[str]) -> list[str]:
        """The scopes a read of ``scope`` looks in (``wider``)."""
        return self.wider.get(scope, [scope]) if isinstance(scope, str) else list(scope)

    @property
    def _graves(self) -> str:
        """The collection of deletion marks (see ``deleted``)."""
        return f"{self.collection or DEFAULT_COLLECTION}-deleted"

    def deleted(self, docs: list[Document], horizon: Horizon) -> set[str]:
        """The ids of ``docs`` deleted as the reader sees it.

        A delete is applied as a mark (in ``<collection>-deleted``, tagged as an add is)
        and the item kept for ``DELETED_RETENTION_S``: a read made again after a restore
        sees an item the crashed attempt deleted after the checkpoint (its mark is left
        out like that attempt's adds).

        Returns:
            The ids whose deletion ``horizon`` shows.
        """
        ids = [str(d.id) for d in docs if d.id is not None]
        if not ids:
            return set()
        try:
            marks = self.store.get(ids, self._graves)
        except (CollectionNotFoundError, UnknownFilterFieldError):
            return set()
        return {str(m.id) for m in marks if horizon.shows(m)}

    def _visible(self, fetch: Callable[[int | None], list[Document]], limit: int | None,
                 horizon: Horizon) -> list[Document]:
        """Up to ``limit`` documents ``fetch(n)`` finds that ``horizon`` shows."""
        return visible(fetch, limit, horizon, lambda docs: self.deleted(docs, horizon))

    def _getter(self, placed: dict[str, Any]) -> Callable[[int | None], list[Document]]:
        def fetch(n: int | None) -> list[Document]:
            return self.store.get(None, self.collection, placed, n)
        return fetch

    def get(self, set_name: str, scope: str | list[str], ids: list[str] | None,
            filters: dict[str, Any] | None, limit: int | None,
            horizon: Horizon) -> list[MemorySetItem]:
        scopes = self._scopes(scope)
        try:
            if ids is not None:
                docs = [d for d in (self.store.get(ids, self.collection) if ids else [])
                        if d.metadata.get(_SET) == set_name and d.metadata.get(_SCOPE) in scopes
                        and horizon.shows(d)]
                gone = self.deleted(docs, horizon)
                docs = [d for d in docs if d.id not in gone]
            else:
                # every match, then the oldest ``limit``: a store returns a limited get in
                # its own order (a re-executed commit's upsert can move an item to its end)
                docs = []
                for placed in (_placed(filters, set_name, s) for s in scopes):
                    docs += self._visible(self._getter(placed), None, horizon)
                docs.sort(key=lambda d: (str(d.metadata.get(_CREATED, "")),
                                         d.metadata.get(_SEQ, 0)))  # oldest first
                docs = docs if limit is None else docs[:limit]
        except UnknownFilterFieldError as e:
            if _empty_on_unplaced(e):
                return []
            raise
        return [_item(d, set_name) for d in docs]

    def count(self, set_name: str, scope: str | list[str], ids: list[str],
              horizon: Horizon) -> int:
        """Stored items of the set the reader may see; with ``ids``: how many of those."""
        if ids:
            return len(self.get(set_name, scope, ids, None, None, horizon))
        return sum(self._count(set_name, s, horizon) for s in self._scopes(scope))

    def _count(self, set_name: str, scope: str, horizon: Horizon) -> int:
        try:
            placed = _placed(None, set_name, scope)
            total = self.store.count(self.collection, placed)
            if not total:
                return 0
            try:
                marks = self.store.get(None, self._graves, placed, None)
            except (CollectionNotFoundError, UnknownFilterFieldError):
                marks = []
            total -= sum(1 for m in marks if horizon.shows(m))  # (an item per mark)
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

    def search(self, set_name: str, scope: str | list[str], vector: list[float], limit: int,
               filters: dict[str, Any] | None, kwargs: dict[str, Any],
               horizon: Horizon) -> list[MemorySetItem]:
        def fetcher(placed: dict[str, Any]) -> Callable[[int | None], list[Document]]:
            def fetch(n: int | None) -> list[Document]:
                return self.store.query(VectorStoreQuery(
                    query_embedding=vector, limit=n or 0, collection_name=self.collection,
                    filters=placed, extra_args=kwargs)).documents
            return fetch

        scopes = self._scopes(scope)
        try:
            docs: list[Document] = []
            for s in scopes:
                docs += self._visible(fetcher(_placed(filters, set_name, s)), limit, horizon)
        except UnknownFilterFieldError as e:
            if _empty_on_unplaced(e):
                return []
            raise
        if len(scopes) > 1:  # the closest of both scopes' closest
            docs = _by_score(docs)[:limit]
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
            scopes = [w["scope"], *([w["legacy"]] if w.get("legacy") else [])]
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
                found = [d for d in (self.store.get(w["ids"], self.collection)
                                     if w["ids"] else [])
                         if d.id is not None and d.metadata.get(_SET) == w["set"]]
                for s in scopes:
                    ids = [str(d.id) for d in found if d.metadata.get(_SCOPE) == s]
                    self._bury(ids, w, now, s)
                    deleted += len(ids)
            else:  # clear (the key's items under its older scope too)
                for s in scopes:
                    try:
                        ids = [str(d.id) for d in self.store.get(
                            None, self.collection, {**placed, _SCOPE: s}, None)
                            if d.id is not None]
                    except UnknownFilterFieldError as e:
                        if not _empty_on_unplaced(e):
                            raise
                        ids = []
                    self._bury(ids, w, now, s)
                deleted += 1
        for set_name, scope in {(w["set"], s) for w in writes if w["op"] != "add"
                                for s in (w["scope"], w.get("legacy")) if s}:
            self._purge(set_name, scope)
        return {"added": added, "deleted": deleted}

    def _bury(self, ids: list[str], write: dict[str, Any], now: str, scope: str) -> None:
        """Mark ``ids``, items of ``scope``, deleted by ``write`` (see ``deleted``).

        A write without tags (logged by an older version) deletes them at once.
        """
        if not ids:
            return
        if "owner" not in write:
            self.store.delete(ids, self.collection)
            return
        tags = {_SET: write["set"], _SCOPE: scope, _OWNER: write["owner"],
                _EPOCH: write["epoch"], _RUN: write["run"], _EXEC: write["exec"],
                _CREATED: now}
        self.store.add([Document(id=i, content=i, embedding=[1.0], metadata=tags)
                        for i in ids], self._graves)

    def _purge(self, set_name: str, scope: str) -> None:
        """Delete the items of a set marked deleted more than ``DELETED_RETENTION_S`` ago."""
        placed = {_SET: set_name, _SCOPE: scope}
        try:
            marks = self.store.get(None, self._graves, placed, None)
        except (CollectionNotFoundError, UnknownFilterFieldError):
            return
        cut = datetime.now(timezone.utc).timestamp() - DELETED_RETENTION_S
        old = [str(m.id) for m in marks
               if datetime.fromisoformat(str(m.metadata.get(_CREATED))).timestamp() < cut]
        if old:
            self.store.delete(old, self.collection)
            self.store.delete(old, self._graves)


RESERVED = _RESERVED
"""The metadata fields memory items reserve (a user's filter or metadata may not name one)."""

WRITER_TAGS = _TAGS
"""The metadata fields that tag a document written through an action's store view with its
writer (``tagged``; reads remove them): a document's metadata or a filter may not name one."""

DEFAULT_COLLECTION = "long_term_memory"
"""The collection of memory items when ``LongTermMemoryOptions.COLLECTION`` names none."""


def memory_collections(collection: str | None) -> frozenset[str]:
    """The collections long-term memory keeps in its store for the memory ``collection``.

    The items (every key's), the id secret (``-keys``), the deletion marks (``-deleted``),
    and the copies a vector-store view keeps of what it changes in each (``-prior``). An
    action's view of a store refuses them (``runtime._knowledge``): a collection name taken
    from a record would otherwise reach every key's memory.

    Args:
        collection: the configured memory collection (``None``: the default).

    Returns:
        The names.
    """
    base = collection or DEFAULT_COLLECTION
    names = (base, f"{base}-keys", f"{base}-deleted")
    return frozenset((*names, *(f"{n}-prior" for n in names)))
