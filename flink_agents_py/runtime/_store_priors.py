"""What a document was before a vector-store delete or update: kept, so a re-made read can see it.

The durable vector-store view (``_knowledge.DurableVectorStore``) tags its adds with the
writer (key, memory epoch, run, action execution, call) so that a read made again after a
restore leaves out what the key's crashed attempt added after the checkpoint (``Horizon``).
A delete or an update changes documents that were there before, which a tag on the new
version cannot undo: the view keeps, before it deletes or replaces them, the documents as
they were (their *priors*) in the collection ``<collection>-prior``, tagged with the writer
of the change (``fa_prior_of``: the document's id; ``fa_prior_meta``: its metadata as JSON).
A read whose horizon hides that change sees the prior instead of the change: a document the
crashed attempt deleted is found again, one it updated is found as it was. The updated
version carries the writer's tags as an add's does, so it is left out.

Priors are embedded again from their text (by the store's embedding model); a store without
one keeps none (its deletes and updates are then seen by re-made reads). A prior is removed
by a later delete or update of the same key once older than ``DELETED_RETENTION_S``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from ..api import (
    CollectionNotFoundError,
    Document,
    UnknownFilterFieldError,
    VectorStore,
    VectorStoreError,
    VectorStoreQuery,
)
from ._memory_items import DELETED_RETENTION_S, Horizon, _untagged, tagged

__all__ = ["MAX_PRIORS", "save_priors", "with_priors", "ranked_with_priors", "restored_count",
           "current"]

_OF, _META, _CREATED = "fa_prior_of", "fa_prior_meta", "fa_created_at"
_OWNER = "fa_owner"

log = logging.getLogger("flink_agents_py.runtime")


def _prior_collection(store: VectorStore, collection: str | None) -> str:
    return f"{collection or store.collection or 'documents'}-prior"


MAX_PRIORS = 1000
"""The most documents one delete or update keeps priors of (each is embedded again)."""


def save_priors(store: VectorStore, collection: str | None, docs: list[Document],
                tags: dict[str, Any]) -> None:
    """Keep ``docs`` (about to be deleted or replaced by the writer ``tags``) as priors.

    More than ``MAX_PRIORS`` documents: none is kept (a warning says so).
    """
    docs = [d for d in docs if d.id is not None]
    if not docs:
        return
    if len(docs) > MAX_PRIORS:
        log.warning("a vector-store delete or update of %d documents keeps no copies of them "
                    "(the most is %d): a read made again after a restore sees the change",
                    len(docs), MAX_PRIORS)
        return
    now = datetime.now(timezone.utc).isoformat()
    marks = {_CREATED: now}
    priors = [Document(id=f"{d.id}|{tags['exec']}|{tags['call']}", content=d.content,
                       metadata={**d.metadata, **marks, _OF: str(d.id),
                                 _META: json.dumps(d.metadata, sort_keys=True)})
              for d in docs]
    where = _prior_collection(store, collection)
    try:
        store.add(tagged(priors, tags), where)
    except VectorStoreError:  # no embedding model (or the backend refused): no priors kept
        return
    try:
        mine = store.get(None, where, {_OWNER: tags["owner"]}, None)
    except (CollectionNotFoundError, UnknownFilterFieldError):
        return
    cut = datetime.now(timezone.utc).timestamp() - DELETED_RETENTION_S
    old = [str(p.id) for p in mine
           if datetime.fromisoformat(str(p.metadata.get(_CREATED))).timestamp() < cut]
    if old:
        store.delete(old, where)


def _hidden(store: VectorStore, collection: str | None, horizon: Horizon
            ) -> dict[str, tuple[str, Document]]:
    """The versions a reader with ``horizon`` sees instead of the changes it does not see.

    Returns:
        Per document id: the prior's id and the version before the earliest change
        ``horizon`` hides, when that version is one the reader may see.
    """
    if horizon.epoch is None:
        return {}
    try:
        found = store.get(None, _prior_collection(store, collection), {_OWNER: horizon.owner},
                          None)
    except (CollectionNotFoundError, UnknownFilterFieldError):
        return {}
    out: dict[str, tuple[str, Document]] = {}
    seen: set[str] = set()
    for p in sorted(found, key=lambda p: str(p.metadata.get(_CREATED, ""))):
        of = str(p.metadata.get(_OF))
        if horizon.shows(p) or of in seen:
            continue
        seen.add(of)
        original = Document(id=of, content=p.content,
                            metadata=json.loads(str(p.metadata.get(_META, "{}"))))
        if horizon.shows(original):
            out[of] = (str(p.id), original)
    return out


def _matches(doc: Document, ids: Any, filters: dict[str, Any] | None) -> bool:
    if ids is not None:
        return doc.id in ([ids] if isinstance(ids, str) else list(ids))
    return all(doc.metadata.get(k) == v for k, v in (filters or {}).items())


def with_priors(store: VectorStore, collection: str | None, ids: Any,
                filters: dict[str, Any] | None, limit: int | None, horizon: Horizon,
                fetch: Callable[[int | None], list[Document]]) -> list[Document]:
    """``fetch(limit)`` (documents the reader sees), with the priors ``horizon`` restores.

    Returns:
        The documents, those found again last, up to ``limit``.
    """
    hidden = _hidden(store, collection, horizon)
    if not hidden:
        return fetch(limit)
    docs = fetch(None)
    present = {d.id for d in docs}
    docs += [_untagged(doc) for _, doc in hidden.values() if doc.id not in present
             and _matches(doc, ids, filters)]
    return docs if limit is None else docs[:limit]


def ranked_with_priors(store: VectorStore, query: VectorStoreQuery, horizon: Horizon,
                       fetch: Callable[[int], list[Document]]) -> list[Document]:
    """The ``query.limit`` closest documents the reader sees, restored priors among them.

    Returns:
        The documents, closest first (a prior ranked by its own distance to the query).
    """
    hidden = _hidden(store, query.collection_name, horizon)
    if not hidden:
        return fetch(query.limit)
    docs = fetch(query.limit)
    present = {d.id for d in docs}
    try:
        found = store.query(query.model_copy(update={
            "collection_name": _prior_collection(store, query.collection_name),
            "filters": {**(query.filters or {}), _OWNER: horizon.owner},
            "limit": query.limit + len(hidden)})).documents
    except (CollectionNotFoundError, UnknownFilterFieldError):
        found = []
    by_prior = {prior_id: doc for prior_id, doc in hidden.values()}
    for p in found:
        doc = by_prior.get(str(p.id))
        if doc is not None and doc.id not in present:
            docs.append(_untagged(doc).model_copy(update={"score": p.score}))
            present.add(doc.id)
    docs.sort(key=lambda d: d.score if d.score is not None else float("inf"))
    return docs[:query.limit]


def restored_count(store: VectorStore, collection: str | None, horizon: Horizon) -> int:
    """How many documents a reader with ``horizon`` sees again that the store lacks.

    Deleted, or replaced by a version the reader does not see (counted as hidden too).

    Returns:
        The count.
    """
    hidden = _hidden(store, collection, horizon)
    if not hidden:
        return 0
    current = store.get(list(hidden), collection)
    shown = {d.id for d in current if horizon.shows(d)}
    return sum(1 for of in hidden if of not in shown)


def current(fetch: Callable[[], list[Document]]) -> list[Document]:
    """What ``fetch()`` finds, or nothing for a missing collection."""
    try:
        return fetch()
    except CollectionNotFoundError:
        return []
