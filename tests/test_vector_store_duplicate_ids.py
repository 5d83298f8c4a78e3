"""One ``add`` holding the same id twice stores it once, the last, as two adds would.

A document without an id gets one derived from its text and metadata, so two reviews with
the same text (and metadata) in one ``add`` share an id. Before, Chroma refused the whole
upsert (``Expected IDs to be unique``), so one repeated review failed the batch (and the
action calling it); ids repeated across the store's internal batches were upserted one after
the other, last wins. Now every call is that: the last document of an id is stored. The
neighbours: ``get`` and ``delete`` given an id twice failed the same way; they now take it
once.
"""

from __future__ import annotations

import pytest

pytest.importorskip("chromadb")

from flink_agents_py import AgentsExecutionEnvironment  # noqa: E402
from flink_agents_py.api import (  # noqa: E402
    Agent,
    Document,
    EmbeddingModelSetup,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    action,
    embedding_model_connection,
    embedding_model_setup,
    vector_store,
)
from flink_agents_py.integrations.embedding_models import HashingEmbeddingModel  # noqa: E402
from flink_agents_py.integrations.vector_stores import ChromaVectorStore  # noqa: E402


class Reviews(Agent):
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
        same = store.add([Document(content="runs small", metadata={"p": "A"}),
                          Document(content="runs small", metadata={"p": "A"}),
                          Document(content="true to size", metadata={"p": "A"})])
        given = await store.aadd([Document(content="first", id="r1"),
                                  Document(content="second", id="r1")])
        twice = [d.content for d in store.get(["r1", "r1"])]
        size = store.size()
        store.delete(["r1", "r1"])
        ctx.send_event(OutputEvent(output={
            "same": same, "given": given, "size": size, "r1": twice,
            "after_delete": [d.id for d in store.get(["r1"])], "left": store.size()}))


def test_an_id_twice_in_one_add_is_stored_once_the_last():
    result = AgentsExecutionEnvironment.local().from_list([{"key": "k"}]).apply(Reviews()).run()
    assert result.errors == []
    [out] = result.outputs
    assert len(out["same"]) == 3 and out["same"][0] == out["same"][1] != out["same"][2]
    assert out["given"] == ["r1", "r1"]
    assert out["r1"] == ["second"]  # asked twice, found once
    assert out["size"] == 3
    assert out["after_delete"] == [] and out["left"] == 2  # deleted, asked twice
