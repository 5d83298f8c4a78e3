"""Neighbours of the "a re-made read sees the future" defects, for the durable vector-store
view (``ctx.get_resource(name, VECTOR_STORE)``): a read made again after a restore must not
see what the key's crashed attempt changed after the checkpoint, by an add (fixed before),
a delete or an update (core-level restores, ``support.harness``)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("chromadb")

from support.harness import new_core, run_to_end  # noqa: E402
from support.probes import gate  # noqa: E402
from test_long_term_memory import (  # noqa: E402
    _crash_at_the_gate,
    _gated_plan,
    _restored,
    _wait_gate,
)

from flink_agents_py import AgentsExecutionEnvironment  # noqa: E402
from flink_agents_py.api import (  # noqa: E402
    Agent,
    Document,
    EmbeddingModelSetup,
    InputEvent,
    LongTermMemoryOptions,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    VectorStoreError,
    VectorStoreQuery,
)
from flink_agents_py.integrations.embedding_models import HashingEmbeddingModel  # noqa: E402
from flink_agents_py.integrations.vector_stores import ChromaVectorStore  # noqa: E402
from flink_agents_py.runtime import InMemoryKeyState  # noqa: E402
from flink_agents_py.runtime._resources import ResourceEnvironment  # noqa: E402


async def _gate_then_change(event: InputEvent, ctx: Any) -> None:
    kb = ctx.get_resource("kb", ResourceType.VECTOR_STORE)
    await ctx.durable_execute_async(_wait_gate, True)
    if event.input["op"] == "delete, then read":
        kb.delete(ids=["t0"], collection_name="docs")
    found = kb.get(collection_name="docs", limit=None)
    by_filter = kb.get(collection_name="docs", filters={"x": 0})
    hits = kb.query(VectorStoreQuery(query_text="ticket", limit=5, collection_name="docs"))
    size = kb.size("docs")
    if event.input["op"] == "delete":
        kb.delete(ids=["t0"], collection_name="docs")
    elif event.input["op"] == "update":
        kb.update(Document(id="t0", content="ticket 0 (closed)", metadata={"x": 0}), "docs")
    ctx.send_event(OutputEvent(output={
        "got": sorted(d.content for d in found), "size": size,
        "by_filter": [d.content for d in by_filter],
        "hits": sorted(d.content for d in hits.documents),
        "meta": sorted(str(d.metadata) for d in found)}))


@pytest.mark.parametrize("op", ["delete", "update"])
def test_a_re_made_vector_store_read_does_not_see_what_the_crashed_attempt_changed(
        tmp_path, probes, op):
    plan = _gated_plan(tmp_path, _gate_then_change)
    store = ResourceEnvironment(plan).get("kb", ResourceType.VECTOR_STORE)
    store.add(Document(id="t0", content="ticket 0", metadata={"x": 0}), "docs")
    store.add(Document(id="t1", content="ticket 1", metadata={"x": 1}), "docs")
    snapshot, crashed = _crash_at_the_gate(plan, {"op": op})
    seen = {"got": ["ticket 0", "ticket 1"], "size": 2, "by_filter": ["ticket 0"],
            "hits": ["ticket 0", "ticket 1"], "meta": ["{'x': 0}", "{'x': 1}"]}
    assert crashed == [seen]
    assert _restored(plan, snapshot) == [seen]
    # the change stays made: another key's read sees it (once)
    core = new_core(plan)
    try:
        gate().set()
        other = InMemoryKeyState()
        core.on_input("other", {"op": "read"}, other)
        later, errors = run_to_end(core, other, key="other")
    finally:
        core.close()
    assert errors == []
    after = (["ticket 1"], 1, [], ["ticket 1"]) if op == "delete" else (
        ["ticket 0 (closed)", "ticket 1"], 2, ["ticket 0 (closed)"],
        ["ticket 0 (closed)", "ticket 1"])
    [out] = later
    assert (out["got"], out["size"], out["by_filter"], out["hits"]) == after


def test_a_re_made_read_after_the_actions_own_delete_sees_the_delete(tmp_path, probes):
    plan = _gated_plan(tmp_path, _gate_then_change)
    store = ResourceEnvironment(plan).get("kb", ResourceType.VECTOR_STORE)
    store.add(Document(id="t0", content="ticket 0", metadata={"x": 0}), "docs")
    store.add(Document(id="t1", content="ticket 1", metadata={"x": 1}), "docs")
    snapshot, crashed = _crash_at_the_gate(plan, {"op": "delete, then read"})
    seen = {"got": ["ticket 1"], "size": 1, "by_filter": [], "hits": ["ticket 1"],
            "meta": ["{'x': 1}"]}
    assert crashed == [seen]
    assert _restored(plan, snapshot) == [seen]


# -- long-term memory written before an upgrade that changed the embedding model ------------
def _note_and_search(event: InputEvent, ctx: Any) -> None:
    notes = ctx.long_term_memory.get_memory_set("notes")
    out: dict[str, Any] = {"listed": [i.value for i in notes.get()]}
    try:
        out["found"] = [i.value for i in notes.search("tea", 3)]
    except VectorStoreError as e:
        out["error"] = f"{type(e).__name__}: {e}"
    ctx.send_event(OutputEvent(output=out))
    if event.input.get("note"):
        notes.add(event.input["note"])


def _memory_agent(path: str, dimension: int) -> Agent:
    agent = Agent()
    agent.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION,
                       HashingEmbeddingModel(dimension=dimension))
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                       ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
    agent.add_resource("kb", ResourceType.VECTOR_STORE, ResourceDescriptor(
        ChromaVectorStore, embedding_model="emb", persist_directory=path))
    agent.add_action("go", [InputEvent], _note_and_search)
    agent.set_config(**{LongTermMemoryOptions.VECTOR_STORE: "kb"})
    return agent


def test_memory_read_after_the_embedding_model_changed_fails_naming_the_set_and_key(tmp_path):
    path = str(tmp_path / "db")
    first = AgentsExecutionEnvironment.local().from_list(
        [{"key": "ana", "note": "likes tea"}]).apply(_memory_agent(path, 8)).run()
    assert first.errors == []
    later = AgentsExecutionEnvironment.local().from_list(
        [{"key": "ana"}, {"key": "ana", "note": "likes jazz"}]).apply(
            _memory_agent(path, 16)).run()
    [read] = later.outputs  # (the failed action sends nothing)
    assert read["listed"] == ["likes tea"]  # read back: get needs no vectors
    error = read["error"]
    assert error.startswith("DimensionMismatchError: long-term memory set 'notes' of key 'ana'")
    assert "8-dimensional" in error and "embedding model" in error
    assert "LongTermMemoryOptions.COLLECTION" in error
    [failed] = later.errors  # the add of the second record cannot be committed
    assert failed.error_type == "DimensionMismatchError" and failed.key == "ana"
    assert "long-term memory commit of set 'notes' of key 'ana'" in failed.message
