"""Long-term memory and vector stores are isolated by default (issue 26, section 2).

One key tries every memory operation on another key's item ids (on the local runner, and on
a Flink MiniCluster); two agents of one process share neither memory nor an in-memory
store declared without a collection; a collection named by the program is shared the way
Chroma shares it (filled through chromadb's own client, found by the agent).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

pytest.importorskip("chromadb")

from support import knowledge_agents as ka  # noqa: E402

from flink_agents_py import AgentsExecutionEnvironment  # noqa: E402
from flink_agents_py.api import (  # noqa: E402
    Agent,
    ContextRetrievalRequestEvent,
    ContextRetrievalResponseEvent,
    EmbeddingModelSetup,
    InputEvent,
    LongTermMemoryOptions,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    VectorStoreError,
    action,
)
from flink_agents_py.integrations.embedding_models import HashingEmbeddingModel  # noqa: E402
from flink_agents_py.integrations.vector_stores import ChromaVectorStore  # noqa: E402
from flink_agents_py.plan import AgentPlan  # noqa: E402

NOTES = ["alice note one", "alice note two", "alice note three"]


def _run(agent: Agent, *records: dict[str, Any]) -> list[dict[str, Any]]:
    result = AgentsExecutionEnvironment.local().from_list(list(records)).apply(agent).run()
    assert result.errors == []
    return result.outputs


def _attack(ids: list[str]) -> dict[str, Any]:
    return {"key": "mallory", "op": "attack", "ids": ids, "query": "alice note"}


def _assert_found_nothing(attack: dict[str, Any]) -> None:
    assert attack == {"key": "mallory", "op": "attack", "get": [], "get_one": [],
                      "search": [], "sync_search": [], "listed": [], "size": 0,
                      "shared_get": [], "shared_size": 0, "had": False}


def _assert_intact(agent: Agent, ids: list[str]) -> None:
    [read] = _run(agent, {"key": "alice", "op": "read", "ids": ids, "query": "alice note"})
    assert read["values"] == read["by_id"] == read["found"] == sorted(NOTES)
    assert read["size"] == 3


def test_a_key_cannot_read_or_delete_another_keys_memory_by_its_ids(tmp_path):
    agent = ka.NotesAgent(str(tmp_path / "db"))
    [added] = _run(agent, {"key": "alice", "op": "add", "texts": NOTES})
    ids = added["ids"]
    assert len(set(ids)) == 3 and all(i.startswith("ltm-") and len(i) == 36 for i in ids)
    [attack] = _run(agent, _attack(ids))
    _assert_found_nothing(attack)
    _assert_intact(agent, ids)


def test_item_ids_depend_on_a_secret_of_the_store_not_only_on_the_key(tmp_path):
    # the same key, record and action on two stores: were ids computable from the key and
    # the execution alone, they would be equal
    first = _run(ka.NotesAgent(str(tmp_path / "a")), {"key": "alice", "op": "add",
                                                        "texts": NOTES})[0]["ids"]
    second = _run(ka.NotesAgent(str(tmp_path / "b")), {"key": "alice", "op": "add",
                                                         "texts": NOTES})[0]["ids"]
    assert set(first).isdisjoint(second)
    # a new job on the same store has no state (a new memory epoch): its add is new items,
    # never the old job's ids (a replay restores the epoch and upserts the same ids: see
    # test_long_term_memory's restore tests)
    again = ka.NotesAgent(str(tmp_path / "a"))
    assert set(_run(again, {"key": "alice", "op": "add",
                            "texts": NOTES})[0]["ids"]).isdisjoint(first)


def test_two_agents_in_one_process_share_no_memory(tmp_path):
    path = str(tmp_path / "db")  # one store directory, one memory collection, one key
    mine, other = ka.NotesAgent(path), ka.OtherNotesAgent(path)
    ids = _run(mine, {"key": "alice", "op": "add", "texts": NOTES})[0]["ids"]
    [attack] = _run(other, {**_attack(ids), "key": "alice"})
    _assert_found_nothing({**attack, "key": "mallory"})
    _assert_intact(mine, ids)


def test_two_agents_with_an_in_memory_store_and_no_collection_do_not_share_documents():
    a = _run(ka.StoreAgent(), {"key": "k", "text": "first agent's document"})
    b = _run(ka.OtherStoreAgent(), {"key": "k", "text": "second agent's document"})
    assert a[0]["found"] == ["first agent's document"] and a[0]["size"] == 1
    assert b[0]["found"] == ["second agent's document"] and b[0]["size"] == 1
    assert a[0]["collection"] != b[0]["collection"]
    assert a[0]["collection"].startswith("StoreAgent_kb_")
    # named after the agent and the resource: the same in every plan of the agent
    plan = AgentPlan.from_agent(ka.StoreAgent())
    store = plan.resources[ResourceType.VECTOR_STORE]["kb"]
    assert store.descriptor.arguments["collection"] == a[0]["collection"]


def test_plain_agents_are_told_apart_by_their_actions():
    def collection(fn: Any) -> str:
        agent = Agent().add_action("act", [InputEvent], fn)
        agent.add_resource("kb", ResourceType.VECTOR_STORE, ResourceDescriptor(
            ChromaVectorStore, embedding_model=None))
        plan = AgentPlan.from_agent(agent)
        return plan.resources[ResourceType.VECTOR_STORE]["kb"].descriptor.arguments["collection"]

    assert collection(ka.store_op) != collection(ka.notes_op)
    assert collection(ka.store_op) == collection(ka.store_op)  # stable: the same program


def _retrieve(event: InputEvent, ctx: Any) -> None:
    ctx.send_event(ContextRetrievalRequestEvent(query=event.input["q"], vector_store="kb",
                                                max_results=2))


def _answer(event: ContextRetrievalResponseEvent, ctx: Any) -> None:
    ctx.send_event(OutputEvent(output={"error": event.error,
                                       "docs": [d.content for d in event.documents]}))


def test_a_named_collection_filled_through_chromadbs_own_client_is_found():
    import chromadb

    name = f"kb-{uuid.uuid4().hex[:12]}"
    texts = ["flink is a stream processor", "python is a language", "chroma stores vectors"]
    vectors = HashingEmbeddingModel(dimension=16).embed_texts(texts).embeddings
    chromadb.EphemeralClient().get_or_create_collection(name).add(
        ids=[f"doc{i}" for i in range(3)], documents=texts, embeddings=vectors)

    agent = Agent()
    agent.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION,
                       ResourceDescriptor(HashingEmbeddingModel, dimension=16))
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                       ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
    agent.add_resource("kb", ResourceType.VECTOR_STORE,
                       ResourceDescriptor(ChromaVectorStore, embedding_model="emb",
                                          collection=name))
    agent.add_action("retrieve", [InputEvent], _retrieve)
    agent.add_action("answer", [ContextRetrievalResponseEvent], _answer)
    [out] = _run(agent, {"key": "q", "q": "python is a language"})
    assert out["error"] is None and out["docs"][0] == "python is a language"
    # and a chromadb client opened afterwards (default settings) sees the same collection
    assert chromadb.EphemeralClient().get_collection(name).count() == 3


@pytest.mark.flink
@pytest.mark.timeout(300)
def test_isolation_holds_on_a_minicluster(tmp_path):
    pytest.importorskip("pyflink")
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    from flink_agents_py.flink import create_stream_environment

    path = str(tmp_path / "db")
    agent = ka.NotesAgent(path)
    ids = _run(agent, {"key": "alice", "op": "add", "texts": NOTES})[0]["ids"]

    env = create_stream_environment()
    env.set_parallelism(1)  # one embedded Chroma (SQLite) writer
    pickled = Types.PICKLED_BYTE_ARRAY()
    records = [_attack(ids), {"key": "bob", "op": "add", "texts": ["bob's own note"]}]
    ds = env.from_source(NumberSequenceSource(0, 1), WatermarkStrategy.no_watermarks(),
                         "records").map(lambda n: records[n], output_type=pickled)
    applied = AgentsExecutionEnvironment.flink(env).from_datastream(ds).apply(agent)
    with applied.to_datastream().execute_and_collect("memory-isolation") as rows:
        outs = {o["key"]: o for o in rows}
    _assert_found_nothing(outs["mallory"])
    assert len(outs["bob"]["ids"]) == 1 and outs["bob"]["ids"][0] not in ids
    _assert_intact(agent, ids)


def test_a_collection_chromadbs_persistent_client_filled_is_shared_by_path(tmp_path):
    import chromadb

    from flink_agents_py.api import Document, VectorStoreQuery

    path = str(tmp_path / "kb")
    client = chromadb.PersistentClient(path=path)
    client.get_or_create_collection("facts").add(ids=["a"], documents=["hello"],
                                                 embeddings=[[1.0, 0.0]])
    store = ChromaVectorStore(persist_directory=path, collection="facts")
    found = store.query(VectorStoreQuery(query_embedding=[1.0, 0.0], limit=2)).documents
    assert [(d.id, d.content) for d in found] == [("a", "hello")]
    store.add([Document(content="mine", embedding=[0.0, 1.0])])
    assert client.get_collection("facts").count() == 2  # one instance: chromadb sees it


def test_two_keys_whose_old_64_bit_scopes_collide_share_nothing(tmp_path, monkeypatch):
    # a key's items were placed by a 64-bit digest of the agent and the key: two keys with
    # the same digest (chance, or a key made to collide) read, listed and deleted each
    # other's items. Every key collides here; the full digest keeps them apart
    from flink_agents_py.runtime.context import _long_term_memory as ltm

    real = ltm.digest

    def colliding(value: Any) -> str:  # every [agent, key]: one digest (not the epochs)
        return "0" * 16 if isinstance(value, list) and len(value) == 2 else real(value)

    monkeypatch.setattr(ltm, "digest", colliding)
    agent = ka.NotesAgent(str(tmp_path / "db"))
    [added] = _run(agent, {"key": "alice", "op": "add", "texts": NOTES})
    [attack] = _run(agent, _attack(added["ids"]))
    _assert_found_nothing(attack)
    _assert_intact(agent, added["ids"])


def test_items_written_under_a_keys_old_scope_are_still_its_own(tmp_path, monkeypatch):
    # items an older version wrote (under the key's 64-bit scope) are read, searched,
    # counted and deleted by their key, and by no other
    from flink_agents_py.runtime.context import _long_term_memory as ltm

    agent = ka.NotesAgent(str(tmp_path / "db"))
    scopes = ltm.key_scopes
    with monkeypatch.context() as old_version:
        old_version.setattr(ltm, "key_scopes", lambda a, k: (scopes(a, k)[1],) * 2)
        [added] = _run(agent, {"key": "alice", "op": "add", "texts": NOTES[:2]})
    [more] = _run(agent, {"key": "alice", "op": "add", "texts": NOTES[2:]})
    ids = added["ids"] + more["ids"]
    _assert_intact(agent, ids)  # both scopes' items, by id, listed, searched, counted
    [attack] = _run(agent, _attack(ids))
    _assert_found_nothing(attack)
    _assert_intact(agent, ids)
    [own] = _run(agent, {"key": "alice", "op": "attack", "ids": ids[:1], "query": "alice"})
    assert own["had"] is True and own["size"] == 3 and sorted(own["listed"]) == sorted(NOTES)
    [read] = _run(agent, {"key": "alice", "op": "read", "ids": ids, "query": "alice note"})
    assert read["values"] == read["by_id"] == read["found"] == [] and read["size"] == 0


class _Peeker(Agent):
    """A sub-agent naming its parent's memory collections through the inherited store."""

    @action(InputEvent)
    @staticmethod
    def peek(event: InputEvent, ctx: Any) -> None:
        kb = ctx.get_resource("kb", ResourceType.VECTOR_STORE)
        seen = {}
        for name in ("parent_mem", "parent_mem-keys", "Parent_Mem-deleted"):
            try:
                seen[name] = sorted(d.content for d in kb.get(collection_name=name))
            except VectorStoreError as e:
                seen[name] = "refused" if "kept by long-term memory" in str(e) else str(e)
        ctx.send_event(OutputEvent(output=seen))


class _Parent(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: Any) -> None:
        if event.input["op"] == "add":
            ctx.long_term_memory.get_memory_set("notes").add(f"note of {ctx.key}")
            ctx.send_event(OutputEvent(output="added"))
        elif event.input["op"] == "peek":
            result = await (await ctx.submit_subagent("child", {"x": 1}))
            ctx.send_event(OutputEvent(output=result.result))
        else:  # the parent naming its sub-agent's memory collection
            kb = ctx.get_resource("kb", ResourceType.VECTOR_STORE)
            try:
                ctx.send_event(OutputEvent(output=len(kb.get(collection_name="child_mem"))))
            except VectorStoreError as e:
                ctx.send_event(OutputEvent(output="refused" if "kept by long-term memory"
                                           in str(e) else str(e)))


def test_a_sub_agent_cannot_read_its_parents_memory_collection_through_a_shared_store(
        tmp_path):
    # an internal sub-agent uses its parent's store: its actions were refused only the
    # collections of its own memory configuration, so naming the parent's custom memory
    # collection read every key's items (and the ids' secret)
    child = _Peeker()
    child.set_config(**{LongTermMemoryOptions.COLLECTION: "child_mem"})
    parent = _Parent()
    parent.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION,
                        ResourceDescriptor(HashingEmbeddingModel, dimension=32))
    parent.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                        ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
    parent.add_resource("kb", ResourceType.VECTOR_STORE, ResourceDescriptor(
        ChromaVectorStore, embedding_model="emb", persist_directory=str(tmp_path / "db")))
    parent.add_resource("child", ResourceType.AGENT, child)
    parent.set_config(**{LongTermMemoryOptions.VECTOR_STORE: "kb",
                         LongTermMemoryOptions.COLLECTION: "parent_mem"})
    outputs = _run(parent, {"key": "alice", "op": "add"}, {"key": "mallory", "op": "peek"},
                   {"key": "mallory", "op": "other"})
    assert outputs == ["added", [{"parent_mem": "refused", "parent_mem-keys": "refused",
                                  "Parent_Mem-deleted": "refused"}], "refused"]


def _pause(x: int) -> int:
    return x


class _Reader(Agent):
    """Adds a note (then makes one more durable call), or reads its notes (get, search,
    size), then makes one more durable call."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: Any) -> None:
        notes = ctx.long_term_memory.get_memory_set("notes")
        if event.input["op"] in ("add", "add_then_pause"):
            notes.add(event.input["text"])
            if event.input["op"] == "add_then_pause":
                await ctx.durable_execute_async(_pause, 1)
            ctx.send_event(OutputEvent(output="added"))
            return
        seen = {"get": [i.value for i in notes.get()], "size": notes.size(),
                "search": [i.value for i in notes.search("note", 5)]}
        await ctx.durable_execute_async(_pause, 1)
        ctx.send_event(OutputEvent(output=seen))


def _reader(path: str) -> Agent:
    agent = _Reader()
    agent.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION,
                       ResourceDescriptor(HashingEmbeddingModel, dimension=32))
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                       ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
    agent.add_resource("kb", ResourceType.VECTOR_STORE, ResourceDescriptor(
        ChromaVectorStore, embedding_model="emb", persist_directory=path))
    agent.set_config(**{LongTermMemoryOptions.VECTOR_STORE: "kb", "replay": "strict"})
    return agent


def test_a_read_recorded_before_the_full_key_scope_replays_with_its_arguments(
        tmp_path, monkeypatch, caplog):
    # a checkpoint of the older version (64-bit key scope) restored into this one: the
    # reads it recorded replay with the arguments it recorded (they name the old scope),
    # not as changed arguments (a warning; a divergence under strict replay)
    import json

    from flink_agents_py.runtime.context import _long_term_memory as ltm

    records = [{"key": "alice", "op": "add", "text": "alice note"},
               {"key": "alice", "op": "read"}]
    path = str(tmp_path / "db")
    snapshots: list[Any] = []

    def checkpoint(job: Any) -> None:  # the read made, the last call not yet done
        snap = job.snapshot()
        if "_pause" in json.dumps([k["run"] for k in snap["keys"]]):
            snapshots.append(json.loads(json.dumps(snap)))

    scopes = ltm.key_scopes
    with monkeypatch.context() as old_version:
        old_version.setattr(ltm, "key_scopes", lambda a, k: (scopes(a, k)[1],) * 2)
        first = (AgentsExecutionEnvironment.local().from_list(records).apply(_reader(path))
                 .run(on_step=checkpoint))
    seen = {"get": ["alice note"], "size": 1, "search": ["alice note"]}
    assert first.outputs == ["added", seen] and snapshots
    caplog.set_level("WARNING")
    restored = (AgentsExecutionEnvironment.local().from_list(records).apply(_reader(path))
                .restore(snapshots[0]).run())
    assert restored.errors == [] and restored.outputs == [seen]
    assert "arguments changed" not in caplog.text


def test_an_add_the_old_scheme_made_after_the_checkpoint_is_not_made_twice(
        tmp_path, monkeypatch):
    # an action in flight at a checkpoint of the older version added an item after it (the
    # crashed attempt); restored into this one, the action runs again: its add must be the
    # same item (its id), not a second one beside the crashed attempt's
    import json

    from flink_agents_py.runtime.context import _long_term_memory as ltm

    path = str(tmp_path / "db")
    snapshots: list[Any] = []

    def checkpoint(job: Any) -> None:
        snap = job.snapshot()
        if "_pause" in json.dumps([k["run"] for k in snap["keys"]]):
            snapshots.append(json.loads(json.dumps(snap)))

    def writer() -> Agent:
        return _reader(path)

    records = [{"key": "alice", "op": "add_then_pause", "text": "alice note"}]
    scopes = ltm.key_scopes
    with monkeypatch.context() as old_version:
        old_version.setattr(ltm, "key_scopes", lambda a, k: (scopes(a, k)[1],) * 2)
        assert (AgentsExecutionEnvironment.local().from_list(records).apply(writer())
                .run(on_step=checkpoint).outputs) == ["added"]
    restored = (AgentsExecutionEnvironment.local().from_list(records).apply(writer())
                .restore(snapshots[0]).run())
    assert restored.errors == [] and restored.outputs == ["added"]
    [read] = _run(_reader(path), {"key": "alice", "op": "read"})
    assert read == {"get": ["alice note"], "size": 1, "search": ["alice note"]}
