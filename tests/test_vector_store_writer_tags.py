"""An action's store view refuses metadata and filter fields that tag writers.

Documents written through ``ctx.get_resource(..., VECTOR_STORE)`` carry their writer in
``fa_owner``, ``fa_epoch``, ``fa_run``, ``fa_exec``, ``fa_call`` and ``fa_digest``, and its
reads remove those fields. Before, a user's own metadata of such a name was overwritten on
write and dropped on read (the document came back without it, no word said), and a filter on
one matched the writer's tags instead (found nothing). Long-term memory items reserved all
of them but ``fa_call`` and ``fa_digest``, which were lost the same way. Now each is a
``VectorStoreError`` naming the field, before the store is called.
"""

from __future__ import annotations

import pytest

pytest.importorskip("chromadb")

from flink_agents_py import AgentsExecutionEnvironment  # noqa: E402
from flink_agents_py.api import (  # noqa: E402
    Agent,
    ContextRetrievalRequestEvent,
    ContextRetrievalResponseEvent,
    Document,
    EmbeddingModelSetup,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    VectorStoreQuery,
    action,
    embedding_model_connection,
    embedding_model_setup,
    vector_store,
)
from flink_agents_py.integrations.embedding_models import HashingEmbeddingModel  # noqa: E402
from flink_agents_py.integrations.vector_stores import ChromaVectorStore  # noqa: E402


class Library(Agent):
    @embedding_model_connection
    @staticmethod
    def hashing() -> ResourceDescriptor:
        return ResourceDescriptor(HashingEmbeddingModel)

    @embedding_model_setup
    @staticmethod
    def emb() -> ResourceDescriptor:
        return ResourceDescriptor(EmbeddingModelSetup, connection="hashing")

    @vector_store
    @staticmethod
    def kb() -> ResourceDescriptor:
        return ResourceDescriptor(ChromaVectorStore, embedding_model="emb")

    @action(InputEvent)
    @staticmethod
    async def go(event, ctx):
        store = ctx.get_resource("kb", ResourceType.VECTOR_STORE)
        seen = {}

        def attempt(label, fn):
            try:
                seen[label] = fn()
            except Exception as e:  # noqa: BLE001 - what the user sees
                seen[label] = f"{type(e).__name__}: {e}"

        mine = Document(content="alpha run", id="d1", metadata={"fa_run": "r7", "lang": "en"})
        attempt("add", lambda: store.add([mine]))
        attempt("update", lambda: store.update([mine]))
        attempt("kept", lambda: store.add([Document(content="alpha", id="d2",
                                                    metadata={"fa_note": "x"})]))
        attempt("get", lambda: [d.metadata for d in store.get(["d1", "d2"])])
        attempt("query", lambda: store.query(VectorStoreQuery(query_text="alpha",
                                                              filters={"fa_owner": "k"})))
        attempt("get_filter", lambda: store.get(filters={"fa_exec": "e"}))
        attempt("delete", lambda: store.delete(filters={"fa_call": 0}))
        attempt("count", lambda: store.count(filters={"fa_epoch": "e"}))
        ctx.send_event(ContextRetrievalRequestEvent(query="alpha", vector_store="kb",
                                                    filters={"fa_digest": "d"}))
        ctx.send_event(OutputEvent(output=seen))

    @action(ContextRetrievalResponseEvent)
    @staticmethod
    def answered(event, ctx):
        ctx.send_event(OutputEvent(output={"retrieval": event.error}))


def test_writer_tag_fields_are_refused_by_name_and_other_fields_kept():
    result = AgentsExecutionEnvironment.local().from_list([{"key": "k"}]).apply(Library()).run()
    assert result.errors == []
    seen = next(o for o in result.outputs if "add" in o)
    for label in ("add", "update"):
        assert seen[label].startswith("VectorStoreError: vector store 'kb': metadata field "
                                      "'fa_run' of document 'd1' is reserved"), seen[label]
    assert seen["kept"] == ["d2"]
    assert seen["get"] == [{"fa_note": "x"}]  # d1 was never written; a non-tag fa_ field kept
    for label, field in [("query", "fa_owner"), ("get_filter", "fa_exec"),
                         ("delete", "fa_call"), ("count", "fa_epoch")]:
        assert seen[label].startswith(
            f"VectorStoreError: vector store 'kb': filter field '{field}' is reserved"), label
    [retrieval] = [o["retrieval"] for o in result.outputs if "retrieval" in o]
    assert "filter field 'fa_digest' is reserved" in retrieval


class Notes(Library):
    @action(InputEvent)
    @staticmethod
    async def go(event, ctx):
        notes = ctx.long_term_memory.get_memory_set("notes")
        seen = {}
        for field in ("fa_call", "fa_digest"):
            try:
                notes.add(f"with {field}", {field: 1, "lang": "en"})
                seen[f"add {field}"] = "added"
            except Exception as e:  # noqa: BLE001 - what the user sees
                seen[f"add {field}"] = f"{type(e).__name__}: {e}"
            try:
                seen[f"filter {field}"] = notes.get(filters={field: 1})
            except Exception as e:  # noqa: BLE001
                seen[f"filter {field}"] = f"{type(e).__name__}: {e}"
        ctx.send_event(OutputEvent(output=seen))


def test_memory_items_refuse_the_writer_tag_fields_too():
    # before: fa_call and fa_digest were accepted, stored, and missing from the items read
    from flink_agents_py.api import LongTermMemoryOptions

    agent = Notes()
    agent.set_config(**{LongTermMemoryOptions.VECTOR_STORE: "kb"})
    result = AgentsExecutionEnvironment.local().from_list([{"key": "k"}]).apply(agent).run()
    assert result.errors == []
    [seen] = result.outputs
    for field in ("fa_call", "fa_digest"):
        assert seen[f"add {field}"].startswith(
            f"VectorStoreError: memory set 'notes': item 0 metadata {field!r}"), seen
        assert "reserved" in seen[f"add {field}"]
        assert seen[f"filter {field}"].startswith("VectorStoreError: ")
        assert seen[f"filter {field}"].endswith(f"filter field {field!r} is reserved")
