"""Long-term memory: per-key and shared sets, writes applied when the action completes, a
restore that re-executes nothing recorded, and one MiniCluster job with embeddings, a vector
store and memory together."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.probes import gate, store

pytest.importorskip("chromadb")

from support import knowledge_agents as ka  # noqa: E402
from support.harness import (  # noqa: E402
    KEY,
    drive_until,
    new_core,
    poll_until,
    run_to_end,
    snapshot_of,
)

from flink_agents_py import AgentsExecutionEnvironment  # noqa: E402
from flink_agents_py.api import (  # noqa: E402
    Agent,
    Document,
    EmbeddingModelSetup,
    Event,
    InputEvent,
    LongTermMemoryOptions,
    OutputEvent,
    ResourceDescriptor,
    ResourceError,
    ResourceType,
    VectorStoreError,
    VectorStoreQuery,
)
from flink_agents_py.integrations.embedding_models import HashingEmbeddingModel  # noqa: E402
from flink_agents_py.integrations.vector_stores import ChromaVectorStore  # noqa: E402
from flink_agents_py.plan import AgentPlan  # noqa: E402
from flink_agents_py.runtime import InMemoryKeyState, Journal  # noqa: E402
from flink_agents_py.runtime._resources import ResourceEnvironment  # noqa: E402


def _memory_docs(plan: AgentPlan) -> list[Document]:
    store = ResourceEnvironment(plan).get("kb", ResourceType.VECTOR_STORE)
    return store.get(collection_name="long_term_memory", limit=None)


def test_sets_per_key_and_shared_writes_apply_when_the_action_completes(tmp_path):
    plan = AgentPlan.from_agent(ka.build(str(tmp_path / "db")))
    records = [ka.record(n) for n in range(6)]
    result = AgentsExecutionEnvironment.local().from_list(records).apply(plan).run()
    assert sorted(result.outputs, key=lambda o: o["n"]) == ka.expected(6)
    # record 4 failed after add(): none of its memory writes applied
    assert [e.action for e in result.errors] == ["remember"]
    docs = _memory_docs(plan)
    notes = sorted((d.metadata["fa_scope"][:4], d.content) for d in docs
                   if d.metadata["fa_set"] == "notes")
    assert sorted(c for _, c in notes) == sorted(t for n, t in enumerate(ka.TEXTS) if n != 4)
    shared = {d.content for d in docs if d.metadata["fa_set"] == "everyone"}
    assert shared == {f"k{n % 2}: {ka.TEXTS[n]}" for n in range(6) if n != 4}
    [shared_scope] = {d.metadata["fa_scope"] for d in docs if d.metadata["fa_set"] == "everyone"}
    assert shared_scope.startswith("shared:")  # every key's, of this agent only


class Editor(Agent):
    """Adds, reads its own pending adds, deletes, clears (per the record's ``op``)."""

    def __init__(self, path: str, configured: bool = True) -> None:
        super().__init__()
        self.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION,
                          HashingEmbeddingModel(dimension=16))
        self.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                          ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
        self.add_resource("kb", ResourceType.VECTOR_STORE,
                          ResourceDescriptor(ChromaVectorStore, embedding_model="emb",
                                             persist_directory=path))
        self.add_action("edit", [InputEvent], Editor.edit)
        if configured:
            self.set_config(**{LongTermMemoryOptions.VECTOR_STORE: "kb"})

    @staticmethod
    def edit(event: InputEvent, ctx: Any) -> None:
        op = event.input["op"]
        try:
            m = ctx.long_term_memory.get_memory_set("facts")
            out: dict[str, Any] = {"op": op}
            if op == "add":
                ids = m.add(["likes red", "size 9", "lives in Oslo"],
                            [{"t": "pref"}, {"t": "size"}, {"t": "home"}])
                out["pending"] = [i.value for i in m.get(filters={"t": "size"})]
                out["search_before_commit"] = [i.value for i in m.search("size", 3)]
                out["ids"] = ids
            elif op == "read":
                out["search"] = [i.value for i in m.search("what size", 1)]
                out["pref"] = [i.value for i in m.get(filters={"t": "pref"})]
                out["size"] = m.size()
            elif op == "delete":
                m.delete(event.input["id"])
                out["size_after"] = m.size()
            elif op == "clear":
                out["had"] = ctx.long_term_memory.delete_memory_set("facts")
                out["size_after"] = m.size()
            elif op == "bad":
                m.add("x", {"fa_set": "spoof"})
        except (ResourceError, VectorStoreError) as e:
            out = {"op": op, "error": f"{type(e).__name__}: {e}"}
        ctx.send_event(OutputEvent(output=out))


def _run(agent: Agent, *inputs: dict[str, Any]) -> list[Any]:
    records = [{"key": "u1", **i} for i in inputs]
    return AgentsExecutionEnvironment.local().from_list(records).apply(agent).run().outputs


def test_add_get_search_delete_and_clear(tmp_path):
    agent = Editor(str(tmp_path / "db"))
    [added] = _run(agent, {"op": "add"})
    assert added["pending"] == ["size 9"]  # the action sees its own adds in get...
    assert added["search_before_commit"] == []  # ...not in search (not embedded yet)
    read, = _run(agent, {"op": "read"})
    assert read == {"op": "read", "search": ["size 9"], "pref": ["likes red"], "size": 3}
    deleted, = _run(agent, {"op": "delete", "id": added["ids"][1]})
    assert deleted["size_after"] == 2
    assert _run(agent, {"op": "read"})[0]["size"] == 2
    cleared, = _run(agent, {"op": "clear"})
    assert cleared == {"op": "clear", "had": True, "size_after": 0}
    assert _run(agent, {"op": "read"})[0] == {"op": "read", "search": [], "pref": [], "size": 0}
    bad, = _run(agent, {"op": "bad"})
    assert "reserved" in bad["error"]


def test_memory_without_a_configured_store_is_a_named_error(tmp_path):
    [out] = _run(Editor(str(tmp_path / "db"), configured=False), {"op": "read"})
    assert out["error"].startswith("ResourceError: long-term memory needs a vector store")


# ------------------------------------------------------------------------- core restore
class _Counting(ChromaVectorStore):
    """Counts upserts (``_add_embedding`` calls) across instances."""

    def _add_embedding(self, documents, collection_name, **kwargs):
        store("upserts", list).append((collection_name, [d.id for d in documents]))
        return super()._add_embedding(documents, collection_name, **kwargs)




def _wait_gate(block: bool) -> str:
    assert not block or gate().wait(20)
    return "opened"


async def _restorable(event: InputEvent, ctx: Any) -> None:
    kb = ctx.get_resource("kb", ResourceType.VECTOR_STORE)
    ids = await kb.aadd([Document(content="the sole came off", metadata={"p": "A"})])  # c0
    vec = await ctx.get_resource("emb", ResourceType.EMBEDDING_MODEL).aembed("sole")  # c1
    notes = ctx.long_term_memory.get_memory_set("notes")
    found = await notes.asearch("sole", 3)                            # c2 embed, c3 search
    notes.add("sole came off after a week")  # (the key's epoch was drawn as its run began)
    gate = await ctx.durable_execute_async(_wait_gate, event.input["block"])  # c4
    ctx.send_event(OutputEvent(output={
        "ids": ids, "dims": len(vec), "found": [f.value for f in found], "gate": gate,
        "types": [type(vec[0]).__name__] + [
            f"{type(f).__name__}/{type(f.created_at).__name__}" for f in found]}))
    # completing: long_term_memory.commit (c5) embeds and writes the note


def _restorable_plan(tmp_path, emb: HashingEmbeddingModel) -> AgentPlan:
    agent = Agent()
    agent.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION, emb)
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                       ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
    agent.add_resource("kb", ResourceType.VECTOR_STORE,
                       _Counting(embedding_model="emb", persist_directory=str(tmp_path / "db")))
    agent.add_action("go", [InputEvent], _restorable)
    agent.set_config(**{LongTermMemoryOptions.VECTOR_STORE: "kb"})
    return AgentPlan.from_agent(agent)


class _DictJournal(Journal):
    def __init__(self) -> None:
        self.records: dict[tuple[Any, str], Any] = {}

    def append(self, key, call_id, record):
        self.records[(key, call_id)] = record.model_copy(deep=True)

    def lookup(self, key, call_id):
        rec = self.records.get((key, call_id))
        return rec.model_copy(deep=True) if rec is not None else None


def test_with_a_journal_a_restore_after_the_commit_embeds_and_writes_nothing(tmp_path, probes):
    emb = HashingEmbeddingModel(dimension=8)
    plan = _restorable_plan(tmp_path, emb)
    upserted = probes.store("upserts", list)
    journal = _DictJournal()
    old = new_core(plan, journal=journal)
    state = InMemoryKeyState()
    try:
        old.on_input(KEY, {"x": 1, "block": True}, state)
        calls = lambda s: next(iter(s.run.inflight.values())).calls  # noqa: E731
        drive_until(old, state, lambda s: "4" in calls(s), quiet=True)
        checkpoint = snapshot_of(state, "json")  # taken while the gate (c4) is in flight
        gate().set()
        first, errors = run_to_end(old, state)  # the old operator completes the run, then dies
        assert errors == [] and len(first) == 1
    finally:
        old.close()
    embeds, upserts = emb.calls, len(upserted)
    assert [k[1].rsplit("/", 1)[1] for k in journal.records] == [f"c{i}" for i in range(6)]

    new = new_core(plan, journal=journal)
    try:
        outputs, errors = run_to_end(new, checkpoint)
    finally:
        new.close()
    assert errors == [] and outputs == first
    assert new.counters["calls_executed"] == 0  # c4 and the commit (c5) from the journal
    assert new.counters["calls_replayed"] == 6
    assert (emb.calls, len(upserted)) == (embeds, upserts)
    assert len(_memory_docs(plan)) == 1


def test_restore_re_executes_nothing_recorded(tmp_path, probes):
    emb = HashingEmbeddingModel(dimension=8)
    plan = _restorable_plan(tmp_path, emb)
    upserted = probes.store("upserts", list)

    old = new_core(plan)
    state = InMemoryKeyState()
    try:
        old.on_input(KEY, {"x": 0, "block": False}, state)  # a first run leaves one note
        first, errors = run_to_end(old, state)
        assert errors == [] and first[0]["found"] == []
        upserted.clear()
        old.on_input(KEY, {"x": 1, "block": True}, state)
        calls = lambda s: next(iter(s.run.inflight.values())).calls  # noqa: E731
        drive_until(old, state, lambda s: "4" in calls(s), quiet=True)
        assert [calls(state)[str(i)].done for i in range(5)] == [True] * 4 + [False]
        snapshot = snapshot_of(state, "json")
        embeds_before, upserts_before = emb.calls, list(upserted)
        assert upserts_before == [(None, upserts_before[0][1])]  # the kb add, once
    finally:
        gate().set()
        old.close()

    new = new_core(plan)
    try:
        outputs, errors = run_to_end(new, snapshot)
    finally:
        new.close()
    assert errors == []
    note = "sole came off after a week"
    assert outputs == [{"ids": upserts_before[0][1], "dims": 8, "found": [note],
                        "gate": "opened", "types": ["float", "MemorySetItem/datetime"]}]
    assert new.counters["calls_replayed"] == 4  # the add, the embeds and the search
    assert new.counters["calls_executed"] == 2  # the gate, then long_term_memory.commit
    # only the commit embedded (one batch) and wrote (the memory item), on the new core
    assert emb.calls - embeds_before == 1
    assert upserted[1:] == [("long_term_memory", upserted[1][1])]
    assert len(upserted) == 2
    docs = _memory_docs(plan)
    assert [d.content for d in docs] == [note, note]  # one per run, none twice


# ------------------------------------------------------------------------- MiniCluster
@pytest.mark.flink
@pytest.mark.timeout(300)
def test_embeddings_store_and_memory_in_one_minicluster_job(tmp_path):
    pytest.importorskip("pyflink")
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    from flink_agents_py.flink import create_stream_environment

    env = create_stream_environment()
    env.set_parallelism(1)  # one embedded Chroma (SQLite) writer
    pickled = Types.PICKLED_BYTE_ARRAY()
    ds = env.from_source(NumberSequenceSource(0, 5), WatermarkStrategy.no_watermarks(),
                         "numbers").map(ka.record, output_type=pickled)
    applied = AgentsExecutionEnvironment.flink(env).from_datastream(ds).apply(
        ka.build(str(tmp_path / "db")))
    both = applied.to_datastream().map(lambda o: ("out", o), output_type=pickled).union(
        applied.errors_datastream().map(lambda e: ("err", e), output_type=pickled))
    with both.execute_and_collect("knowledge-agent") as rows:
        rows = list(rows)
    outs = sorted((v for k, v in rows if k == "out"), key=lambda o: o["n"])
    assert outs == ka.expected(6)
    assert len([v for k, v in rows if k == "err"]) == 1
    kb = ChromaVectorStore(persist_directory=str(tmp_path / "db"), collection="reviews")
    assert kb.size() == 6  # every record's durable add, the failed one's included
    assert kb.size("long_term_memory") == 10  # 5 notes and 5 shared items


# ------------------------------------------------------------------------- compaction
def test_compaction_summarizes_a_set_through_a_chat_model(tmp_path):
    from flink_agents_py.api import ChatModelSetup
    from flink_agents_py.integrations.chat_models import ScriptedChatModel

    chat = ScriptedChatModel.from_function(
        lambda req: "SUMMARY: " + "; ".join(
            line[2:] for line in req.last_user_text.splitlines()))

    async def act(event, ctx):
        m = ctx.long_term_memory.get_memory_set("prefs")
        if event.input["op"] == "add":
            m.add(event.input["items"])
            ctx.send_event(OutputEvent(output={"size": m.size()}))
        else:
            new_id = await m.acompact("summarizer")
            ctx.send_event(OutputEvent(output={"id": new_id, "items": [
                i.value for i in m.get()], "meta": [i.additional_metadata for i in m.get()]}))

    agent = Editor(str(tmp_path / "db"))
    agent._actions.clear()
    agent.add_resource("scripted", ResourceType.CHAT_MODEL_CONNECTION, chat)
    agent.add_resource("summarizer", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="scripted"))
    agent.add_action("act", [InputEvent], act)
    outs = _run(agent, {"op": "add", "items": ["likes red"]},
                {"op": "add", "items": ["size 9", "lives in Oslo"]}, {"op": "compact"},
                {"op": "compact"})
    assert outs[1] == {"size": 3}
    summary = "SUMMARY: likes red; size 9; lives in Oslo"
    assert outs[2]["items"] == [summary]
    assert outs[2]["meta"] == [{"compacted_from": 3}]
    assert outs[3] == {"id": None, "items": [summary], "meta": [{"compacted_from": 3}]}
    assert chat.calls == 1


def test_a_compaction_never_awaited_is_warned_about_naming_its_line(tmp_path, caplog):
    """``m.acompact(...)`` without ``await`` compacted nothing, silently (Python's coroutine
    warning pointed into the runtime); now a WARNING says so, naming the line."""
    import logging

    from flink_agents_py.api import ChatModelSetup
    from flink_agents_py.integrations.chat_models import ScriptedChatModel
    from flink_agents_py.runtime.context._calls import MustAwait

    chat = ScriptedChatModel.from_function(lambda req: "SUMMARY")

    async def act(event, ctx):
        m = ctx.long_term_memory.get_memory_set("prefs")
        if event.input["op"] == "add":
            m.add(event.input["items"])
        else:
            m.acompact("summarizer")  # FORGOT-AWAIT
        ctx.send_event(OutputEvent(output={"size": m.size()}))

    agent = Editor(str(tmp_path / "db"))
    agent._actions.clear()
    agent.add_resource("scripted", ResourceType.CHAT_MODEL_CONNECTION, chat)
    agent.add_resource("summarizer", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="scripted"))
    agent.add_action("act", [InputEvent], act)
    MustAwait._warned.clear()
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outs = _run(agent, {"op": "add", "items": ["likes red", "size 9"]}, {"op": "compact"})
    assert outs == [{"size": 2}, {"size": 2}] and chat.calls == 0
    [warned] = [r.getMessage() for r in caplog.records if "never awaited" in r.getMessage()]
    with open(__file__, encoding="utf-8") as f:
        line = next(i for i, text in enumerate(f, 1) if text.rstrip().endswith("# FORGOT-AWAIT"))
    assert f"test_long_term_memory.py:{line}" in warned, warned
    assert "memory set 'prefs'.acompact('summarizer')" in warned
    assert "never compacted" in warned and "await memory_set.acompact(" in warned


def test_a_failing_commit_fails_the_action_and_applies_nothing(tmp_path):
    agent = Editor(str(tmp_path / "db"))
    store = ResourceEnvironment(AgentPlan.from_agent(agent)).get("kb", ResourceType.VECTOR_STORE)
    # the memory collection already holds 3-dimensional vectors; the agent's model makes 16
    store.add(Document(content="old", embedding=[1.0, 0.0, 0.0]), "long_term_memory")
    records = [{"key": "u1", "op": "add"}, {"key": "u2", "op": "read"}]
    result = AgentsExecutionEnvironment.local().from_list(records).apply(agent).run()
    assert [o["op"] for o in result.outputs] == ["read"]  # the failed action sent nothing
    [err] = result.errors
    assert err.key == "u1" and err.error_type == "DimensionMismatchError"
    assert "16" in err.message and "3-dimensional" in err.message
    assert store.size("long_term_memory") == 1


# ------------------------------------------------------------------------- replayed reads
class _GatedHashing(HashingEmbeddingModel):
    """Embeds a query (a text starting with ``?``) only once the probes' gate is open."""

    def embed_texts(self, texts, **kwargs):
        if any(t.startswith("?") for t in texts):
            assert gate().wait(20)
        return super().embed_texts(texts, **kwargs)


async def _search_then_note(event: InputEvent, ctx: Any) -> None:
    notes = ctx.long_term_memory.get_memory_set("notes")
    found = await notes.asearch("? " + event.input["text"], 5)
    listed, size = notes.get(), notes.size()
    notes.add(event.input["text"])
    ctx.send_event(OutputEvent(output={"found": sorted(f.value for f in found),
                                       "listed": [i.value for i in listed], "size": size}))


def _search_then_note_plan(tmp_path) -> AgentPlan:
    agent = Agent()
    agent.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION,
                       _GatedHashing(dimension=8))
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                       ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
    agent.add_resource("kb", ResourceType.VECTOR_STORE, ResourceDescriptor(
        ChromaVectorStore, embedding_model="emb", persist_directory=str(tmp_path / "db")))
    agent.add_action("note", [InputEvent], _search_then_note)
    agent.set_config(**{LongTermMemoryOptions.VECTOR_STORE: "kb"})
    return AgentPlan.from_agent(agent)


@pytest.mark.parametrize("checkpoint", ["search in flight", "before the run"])
def test_a_restored_read_does_not_see_what_the_crashed_attempt_wrote_after_the_checkpoint(
        tmp_path, probes, checkpoint):
    plan = _search_then_note_plan(tmp_path)
    old = new_core(plan)
    state = InMemoryKeyState()
    try:
        gate().set()
        old.on_input(KEY, {"text": "note zero"}, state)  # the first run leaves one note
        first, errors = run_to_end(old, state)
        assert errors == [] and first == [{"found": [], "listed": [], "size": 0}]
        gate().clear()
        saved = snapshot_of(state) if checkpoint == "before the run" else None
        old.on_input(KEY, {"text": "note one"}, state)
        if saved is None:  # the query's embedding (c0) started, the search not made yet
            calls = lambda s: next(iter(s.run.inflight.values())).calls  # noqa: E731
            poll_until(old, state, lambda s: "0" in calls(s) and not calls(s)["0"].done)
            saved = snapshot_of(state)  # (a copy that keeps the key's input sequence)
        gate().set()
        crashed, errors = run_to_end(old, state)  # the attempt commits "note one", then dies
        assert errors == []
    finally:
        gate().set()
        old.close()
    seen = {"found": ["note zero"], "listed": ["note zero"], "size": 1}
    assert crashed == [seen]
    assert sorted(d.content for d in _memory_docs(plan)) == ["note one", "note zero"]

    new = new_core(plan)
    try:
        if checkpoint == "before the run":
            new.on_input(KEY, {"text": "note one"}, saved)
        outputs, errors = run_to_end(new, saved)
    finally:
        new.close()
    assert errors == [] and outputs == [seen]  # not its own later note
    assert sorted(d.content for d in _memory_docs(plan)) == ["note one", "note zero"]
    # a later run sees both notes, the re-committed one once
    newer = new_core(plan)
    try:
        newer.on_input(KEY, {"text": "note two"}, saved)
        later, errors = run_to_end(newer, saved)
    finally:
        newer.close()
    assert later == [{"found": ["note one", "note zero"], "listed": ["note zero", "note one"],
                      "size": 2}]


async def _first_read_then_write(event: InputEvent, ctx: Any) -> None:
    notes = ctx.long_term_memory.get_memory_set("notes")
    before = notes.size()  # the key's first memory access
    await ctx.durable_execute_async(_wait_gate, True)  # the checkpoint finds it in flight
    notes.add("first note")
    ctx.send_event(OutputEvent(output={"before": before, "after": notes.size(),
                                       "listed": [i.value for i in notes.get()]}))


def test_a_restore_inside_a_keys_first_action_hides_what_its_crashed_attempt_wrote(
        tmp_path, probes):
    """The checkpoint is taken after the key's first read and before its first write; the
    crashed attempt then commits its note. The restored action's reads after its add must
    count the note once (its own pending add), not also the crashed attempt's copy."""
    agent = Agent()
    agent.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION,
                       HashingEmbeddingModel(dimension=8))
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                       ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
    agent.add_resource("kb", ResourceType.VECTOR_STORE, ResourceDescriptor(
        ChromaVectorStore, embedding_model="emb", persist_directory=str(tmp_path / "db")))
    agent.add_action("go", [InputEvent], _first_read_then_write)
    agent.set_config(**{LongTermMemoryOptions.VECTOR_STORE: "kb"})
    plan = AgentPlan.from_agent(agent)
    expected = [{"before": 0, "after": 1, "listed": ["first note"]}]
    old = new_core(plan)
    state = InMemoryKeyState()
    try:
        gate().clear()
        old.on_input(KEY, {"x": 0}, state)
        calls = lambda s: next(iter(s.run.inflight.values())).calls  # noqa: E731
        drive_until(old, state, lambda s: any(not c.done for c in calls(s).values()),
                    quiet=True)  # the gated call started
        snapshot = snapshot_of(state, "json")
        gate().set()
        crashed, errors = run_to_end(old, state)  # commits "first note", then dies
        assert errors == [] and crashed == expected
    finally:
        gate().set()
        old.close()
    new = new_core(plan)
    try:
        outputs, errors = run_to_end(new, snapshot)
    finally:
        new.close()
    assert errors == [] and outputs == expected
    assert [d.content for d in _memory_docs(plan)] == ["first note"]  # upserted, not twice


def _adder(path: str) -> Editor:
    agent = Editor(path)
    agent._actions.clear()
    agent.add_action("edit", [InputEvent], _add_or_list)
    return agent


def _job(path: str, *records: dict[str, Any]) -> list[Any]:
    result = AgentsExecutionEnvironment.local().from_list(
        [{"key": "u1", **r} for r in records]).apply(_adder(path)).run()
    assert result.errors == []
    return result.outputs


def test_a_limited_get_returns_the_oldest_items_whatever_the_stores_order(tmp_path):
    """A re-executed commit upserts an item again: the store may then return it last. A get
    with a limit (and the compaction built on it) still takes the oldest items first."""
    import chromadb

    path = str(tmp_path / "db")
    _job(path, {"add": "oldest"}, {"add": "middle"}, {"add": "newest"})
    col = chromadb.PersistentClient(path).get_collection("long_term_memory")
    got = col.get(include=["embeddings", "documents", "metadatas"])
    i = got["documents"].index("oldest")
    col.delete(ids=[got["ids"][i]])  # back in, as an upsert can put it: last in the store
    col.add(ids=[got["ids"][i]], embeddings=[got["embeddings"][i]], documents=["oldest"],
            metadatas=[got["metadatas"][i]])
    assert _job(path, {"limit": 1}, {"limit": 2}, {"limit": 100}) == [
        ["oldest"], ["oldest", "middle"], ["oldest", "middle", "newest"]]


def test_a_new_job_adds_to_a_keys_memory_and_never_overwrites_an_old_jobs_items(tmp_path):
    """Long-term memory outlives a job: a second job over the same store (no state: its
    action executions are numbered from the start again) keeps the first job's items."""
    path = str(tmp_path / "db")
    _job(path, {"add": "from the first job"})
    _job(path, {"add": "from the second job"})
    assert _job(path, {"limit": 100}) == [["from the first job", "from the second job"]]


def _add_or_list(event: InputEvent, ctx: Any) -> None:
    notes = ctx.long_term_memory.get_memory_set("facts")
    if "add" in event.input:
        notes.add(event.input["add"])
    else:
        ctx.send_event(OutputEvent(output=[i.value for i in notes.get(
            limit=event.input["limit"])]))


USER_JOB = '''
"""A user's job: remembers one note per run for user "ana", then lists her notes."""
import json
import sys

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, EmbeddingModelSetup, InputEvent, LongTermMemoryOptions,
                                 OutputEvent, ResourceDescriptor, ResourceType)
from flink_agents_py.integrations.embedding_models import HashingEmbeddingModel
from flink_agents_py.integrations.vector_stores import ChromaVectorStore


def remember(event, ctx):
    notes = ctx.long_term_memory.get_memory_set("notes")
    if event.input.get("note"):
        notes.add(event.input["note"])
    ctx.send_event(OutputEvent(output=[i.value for i in notes.get()]))


agent = Agent()
agent.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION,
                   ResourceDescriptor(HashingEmbeddingModel, dimension=8))
agent.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                   ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
agent.add_resource("kb", ResourceType.VECTOR_STORE, ResourceDescriptor(
    ChromaVectorStore, embedding_model="emb", persist_directory="memory-db"))
agent.add_action("remember", [InputEvent], remember)
agent.set_config(**{LongTermMemoryOptions.VECTOR_STORE: "kb"})
result = AgentsExecutionEnvironment.local().from_list(
    [{"key": "ana", "note": sys.argv[1] if len(sys.argv) > 1 else None}]).apply(agent).run()
assert result.errors == [], result.errors
print(json.dumps(result.outputs))
'''


def test_a_users_jobs_run_one_after_another_keep_every_note(tmp_path):
    """Three runs of a user's own module (outside the repository), each a new job with no
    state, over one store: the second job's note joins the first's."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "notes_job.py").write_text(USER_JOB)
    venv = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "python"
    python = str(venv if venv.exists() else Path(sys.executable))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def job(*args: str) -> Any:
        done = subprocess.run([python, "notes_job.py", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    assert job("likes tea") == [["likes tea"]]
    assert job("lives in Lima") == [["likes tea", "lives in Lima"]]
    assert job() == [["likes tea", "lives in Lima"]]


# ------------------------------------------- restores before a key's first memory access etc.
def _gated_plan(tmp_path, fn) -> AgentPlan:
    agent = Agent()
    agent.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION,
                       HashingEmbeddingModel(dimension=8))
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                       ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
    agent.add_resource("kb", ResourceType.VECTOR_STORE, ResourceDescriptor(
        ChromaVectorStore, embedding_model="emb", persist_directory=str(tmp_path / "db")))
    agent.add_action("go", [InputEvent], fn)
    agent.set_config(**{LongTermMemoryOptions.VECTOR_STORE: "kb"})
    return AgentPlan.from_agent(agent)


def _crash_at_the_gate(plan: AgentPlan, record: dict[str, Any],
                       state: InMemoryKeyState | None = None) -> tuple[Any, list[Any]]:
    """Run ``record`` until its gated call is in flight, snapshot there, let the attempt
    run to the end (it commits its writes, then "dies"); the snapshot and its outputs."""
    old = new_core(plan)
    state = state if state is not None else InMemoryKeyState()
    try:
        gate().clear()
        old.on_input(KEY, record, state)
        calls = lambda s: next(iter(s.run.inflight.values())).calls  # noqa: E731
        drive_until(old, state, lambda s: any(not c.done for c in calls(s).values()),
                    quiet=True)
        snapshot = snapshot_of(state, "json")
        gate().set()
        crashed, errors = run_to_end(old, state)
        assert errors == []
    finally:
        gate().set()
        old.close()
    return snapshot, crashed


def _restored(plan: AgentPlan, snapshot: Any) -> list[Any]:
    new = new_core(plan)
    try:
        outputs, errors = run_to_end(new, snapshot)
    finally:
        new.close()
    assert errors == []
    return outputs


async def _gate_then_remember(event: InputEvent, ctx: Any) -> None:
    await ctx.durable_execute_async(_wait_gate, True)  # before the key's first memory access
    notes = ctx.long_term_memory.get_memory_set("notes")
    before = [i.value for i in notes.get()]
    notes.add("first note")
    ctx.send_event(OutputEvent(output={"before": before, "size": notes.size()}))


def test_a_restore_from_before_a_keys_first_memory_access_hides_its_crashed_writes(
        tmp_path, probes):
    """The checkpoint is taken in the key's first action before it touched memory; the
    crashed attempt then commits its note. The re-made read must not see that note, and the
    re-committed add must not make a second copy."""
    plan = _gated_plan(tmp_path, _gate_then_remember)
    snapshot, crashed = _crash_at_the_gate(plan, {"x": 0})
    assert crashed == [{"before": [], "size": 1}]
    assert _restored(plan, snapshot) == crashed
    assert [d.content for d in _memory_docs(plan)] == ["first note"]


async def _gate_then_forget(event: InputEvent, ctx: Any) -> None:
    notes = ctx.long_term_memory.get_memory_set("notes")
    if event.input.get("add"):
        notes.add(event.input["add"])
        return
    await ctx.durable_execute_async(_wait_gate, True)
    listed = notes.get()
    notes.delete([i.id for i in listed])
    ctx.send_event(OutputEvent(output={"listed": [i.value for i in listed],
                                       "size": notes.size()}))


def test_a_re_made_read_sees_again_what_the_crashed_attempt_deleted_after_the_checkpoint(
        tmp_path, probes):
    plan = _gated_plan(tmp_path, _gate_then_forget)
    state = InMemoryKeyState()
    first = new_core(plan)
    try:
        first.on_input(KEY, {"add": "keep me"}, state)
        assert run_to_end(first, state) == ([], [])
    finally:
        first.close()
    snapshot, crashed = _crash_at_the_gate(plan, {"x": 1}, state)
    assert crashed == [{"listed": ["keep me"], "size": 0}]
    assert _restored(plan, snapshot) == crashed  # it sees the note again, deletes it again
    later = new_core(plan)
    try:
        later.on_input(KEY, {"x": 2}, snapshot)
        gate().set()
        outputs, errors = run_to_end(later, snapshot)
    finally:
        later.close()
    assert errors == [] and outputs == [{"listed": [], "size": 0}]  # deleted, once and for all


async def _gate_then_file(event: InputEvent, ctx: Any) -> None:
    kb = ctx.get_resource("kb", ResourceType.VECTOR_STORE)
    await ctx.durable_execute_async(_wait_gate, True)
    found = kb.get(collection_name="docs", limit=None)
    hits = kb.query(VectorStoreQuery(query_text="ticket", limit=5, collection_name="docs"))
    size = kb.size("docs")
    kb.add(Document(content=f"ticket {event.input['x']}", metadata={"x": event.input["x"]}),
           "docs")
    ctx.send_event(OutputEvent(output={
        "got": sorted(d.content for d in found), "hits": sorted(
            d.content for d in hits.documents), "size": size,
        "meta": [d.metadata for d in found]}))


def test_a_re_made_vector_store_read_does_not_see_what_the_crashed_attempt_added(
        tmp_path, probes):
    plan = _gated_plan(tmp_path, _gate_then_file)
    store = ResourceEnvironment(plan).get("kb", ResourceType.VECTOR_STORE)
    store.add(Document(content="ticket 0", metadata={"x": 0}), "docs")  # loaded beforehand
    snapshot, crashed = _crash_at_the_gate(plan, {"x": 1})
    seen = {"got": ["ticket 0"], "hits": ["ticket 0"], "size": 1, "meta": [{"x": 0}]}
    assert crashed == [seen]
    assert _restored(plan, snapshot) == [seen]
    assert sorted(d.content for d in store.get(collection_name="docs", limit=None)) == [
        "ticket 0", "ticket 1"]  # the re-made add upserted (same id), no duplicate


def test_check_replay_safety_passes_a_memory_agent_at_every_crash_point(tmp_path):
    """The docs' recipe: a store in a new directory, kept (not reset) across the check's
    runs, as a real store keeps what a crashed attempt wrote. Every restore, those before a
    key's first record included, reads what the fault-free run read."""
    from flink_agents_py.testing import check_replay_safety

    inputs = [{"key": "a", "op": "add", "texts": ["likes tea"]}, {"key": "a", "op": "read"},
              {"key": "b", "op": "add", "texts": ["note from b"]},
              {"key": "a", "op": "add", "texts": ["lives in Lima"]}, {"key": "a", "op": "read"},
              {"key": "b", "op": "forget"}, {"key": "b", "op": "read"}]
    report = check_replay_safety(ka.RememberingAgent(str(tmp_path / "db")), inputs,
                                 other_process=False)
    report.assert_ok()
    assert report.points_total > 7


def test_a_deleted_item_is_kept_as_a_mark_until_its_retention_passes(tmp_path, monkeypatch):
    """A delete marks the item (a restore may need to see it again); a later delete of the
    set removes items whose marks are older than ``DELETED_RETENTION_S``, marks included."""
    import chromadb

    from flink_agents_py.runtime import _memory_items

    path = str(tmp_path / "db")

    def job(*records: dict[str, Any]) -> list[Any]:
        result = AgentsExecutionEnvironment.local().from_list(
            [{"key": "u1", **r} for r in records]).apply(ka.RememberingAgent(path)).run()
        assert result.errors == []
        return result.outputs

    def stored() -> tuple[int, int]:
        client = chromadb.PersistentClient(path)
        return (client.get_collection("long_term_memory").count(),
                client.get_collection("long_term_memory-deleted").count())

    job({"op": "add", "texts": ["old news", "more old news"]}, {"op": "forget"})
    assert stored() == (2, 2)  # kept, marked
    assert job({"op": "read"})[0]["values"] == []
    monkeypatch.setattr(_memory_items, "DELETED_RETENTION_S", 0)
    job({"op": "add", "texts": ["fresh"]}, {"op": "forget"})
    assert stored() == (0, 0)


class _Go(Event):
    """Sent by ``_read_then_go`` after its reads: starts ``_write_later``."""


def _slow_step() -> int:
    return 1


async def _read_then_go(event: InputEvent, ctx: Any) -> None:
    await ctx.durable_execute_async(_slow_step)  # a checkpoint can find the run here
    notes = ctx.long_term_memory.get_memory_set("notes")
    kb = ctx.get_resource("kb", ResourceType.VECTOR_STORE)
    ctx.send_event(OutputEvent(output={
        "read": event.input["n"], "notes": [i.value for i in notes.get()],
        "docs": sorted(d.content for d in kb.get(collection_name="docs", limit=None))}))
    ctx.send_event(_Go())


async def _write_later(event: _Go, ctx: Any) -> None:
    ctx.long_term_memory.get_memory_set("notes").add("written by a later action")
    await ctx.get_resource("kb", ResourceType.VECTOR_STORE).aadd(
        [Document(content="added by a later action")], "docs")


def test_a_re_made_read_does_not_see_what_a_later_action_of_its_run_wrote(tmp_path):
    """The checkpoint finds the run's first action in flight before its reads; its second
    action (not started then) writes a note and a document. The crashed attempt ran both,
    so the store holds what the second one wrote; the restored first action's reads must
    not see it (before the fix the run's items counted as seen unless their execution was
    in flight). The next run sees them."""
    from flink_agents_py.testing import check_replay_safety

    def agent(db: str) -> Agent:
        made = Agent()
        made.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION,
                          HashingEmbeddingModel(dimension=8))
        made.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                          ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
        made.add_resource("kb", ResourceType.VECTOR_STORE, ResourceDescriptor(
            ChromaVectorStore, embedding_model="emb", persist_directory=str(tmp_path / db)))
        made.add_action("read", [InputEvent], _read_then_go)
        made.add_action("write", [_Go], _write_later)
        made.set_config(**{LongTermMemoryOptions.VECTOR_STORE: "kb"})
        return made

    inputs = [{"key": "a", "n": 0}, {"key": "a", "n": 1}]
    fault_free = AgentsExecutionEnvironment.local().from_list(inputs).apply(agent("db0")).run()
    assert fault_free.outputs == [  # the next run sees what the later action wrote
        {"read": 0, "notes": [], "docs": []},
        {"read": 1, "notes": ["written by a later action"], "docs": ["added by a later action"]}]
    report = check_replay_safety(agent("db1"), inputs, other_process=False)
    report.assert_ok()  # before the fix: mismatches where the first read was not made yet
    assert report.points_total >= 4


def test_flink_agents_0_2_sets_compact_on_add_and_replay_at_every_crash_point(tmp_path):
    """A set made with Flink Agents 0.2's ``get_or_create_memory_set`` summarizes itself when
    an add fills it (a durable model call in a synchronous action): every restore point
    reads, summarizes and writes what the fault-free run did, the model called once per
    compaction."""
    from flink_agents_py.api import ChatModelSetup, SummarizationStrategy
    from flink_agents_py.integrations.chat_models import ScriptedChatModel
    from flink_agents_py.testing import check_replay_safety

    chat = ScriptedChatModel.from_function(
        lambda req: "SUMMARY: " + "; ".join(
            line[2:] for line in req.last_user_text.splitlines()))

    def act(event: InputEvent, ctx: Any) -> None:
        m = ctx.long_term_memory.get_or_create_memory_set(
            "prefs", str, 3, SummarizationStrategy(model="summarizer"))
        m.add(event.input["text"])
        ctx.send_event(OutputEvent(output={"size": m.size, "items": sorted(
            i.value for i in m.get()), "compacted": [i.compacted for i in m.get()]}))

    def build(db: str) -> Agent:
        agent = Editor(str(tmp_path / db))
        agent._actions.clear()
        agent.add_resource("scripted", ResourceType.CHAT_MODEL_CONNECTION, chat)
        agent.add_resource("summarizer", ResourceType.CHAT_MODEL,
                           ResourceDescriptor(ChatModelSetup, connection="scripted"))
        agent.add_action("act", [InputEvent], act)
        return agent

    inputs = [{"key": "u1", "text": t} for t in ("likes red", "size 9", "lives in Oslo", "tea")]
    outs = _run(build("db"), *[{"text": i["text"]} for i in inputs])
    summary = "SUMMARY: likes red; size 9; lives in Oslo"
    assert outs[2] == {"size": 1, "items": [summary], "compacted": [True]}
    assert outs[3] == {"size": 2, "items": [summary, "tea"], "compacted": [True, False]}
    assert chat.calls == 1
    report = check_replay_safety(build("db2"), inputs, other_process=False)
    report.assert_ok()
    assert report.points_total > 4
