"""Per-key isolation against hostile records: what one key's record can make an action reach.

- Long-term memory keeps every key's items in collections of the vector store it is
  configured with (``long_term_memory``, its ``-keys`` id secret, its ``-deleted`` marks and
  their ``-prior`` copies). The same store is a resource an action reaches with
  ``ctx.get_resource``; an action that takes the collection from its record (a topic, a
  tenant's knowledge base) let a record naming the memory collection list, read and delete
  every key's memory and read the id secret. Those collections are now refused by the
  action's view of any store, and by the built-in context retrieval, before the store is
  called; the key's own memory through ``ctx.long_term_memory`` is unchanged.
- One test runs such an agent as a user's module from a folder outside the repository.
- An outside event read from JSON names a tuple key as an array: it was refused as
  unhashable (a tuple-keyed run could not be answered from Kafka or a file); the array is
  now that tuple, and only that key.
- The local model's answer cache is shared by every key: ``cache_size=0`` on a connection
  now keeps it out even when another connection of the same model file keeps one.
- The runtime keeps its own entries in each key's short-term memory: the spend of each
  budgeted setup (``_budget.<setup>``) and the key's memory epoch (``_flink_agents_py``). An
  action writing fields named by its record (a profile, form fields) let a record write
  them: a huge spend in an agent budget's entry was adopted by the subtask's shared count at
  the key's next chat, so one key's record refused every other key's chats for the window.
  Writes there (``set``, ``new_object``, through a ``MemoryObject`` too) are now refused
  with a ``ValueError`` naming the entry; deleting ``_budget.<setup>`` (the documented reset
  of a key's own spend) and reading both still work.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest

pytest.importorskip("chromadb")

from test_budgets import Metered  # noqa: E402
from test_flow_control import Asker, run  # noqa: E402

from flink_agents_py import AgentsExecutionEnvironment  # noqa: E402
from flink_agents_py.api import (  # noqa: E402
    Agent,
    Budget,
    ChatModelSetup,
    ContextRetrievalRequestEvent,
    ContextRetrievalResponseEvent,
    Document,
    EmbeddingModelSetup,
    InputEvent,
    LongTermMemoryOptions,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    VectorStoreQuery,
    action,
)
from flink_agents_py.integrations.embedding_models import HashingEmbeddingModel  # noqa: E402
from flink_agents_py.integrations.vector_stores import ChromaVectorStore  # noqa: E402

pytestmark = pytest.mark.timeout(180)

REPO = pathlib.Path(__file__).resolve().parents[1]


def _try(fn: Any) -> Any:
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - the test reads what each call did
        return f"refused: {type(e).__name__}: {e}"


async def topic_op(event: InputEvent, ctx: Any) -> None:
    """``op`` ``remember``: add ``text`` to the key's long-term memory; ``topic``: every
    store operation on the collection the record names (the hostile part)."""
    rec = event.input
    if rec["op"] == "remember":
        ids = ctx.long_term_memory.get_memory_set("notes").add([rec["text"]])
        ctx.send_event(OutputEvent(output={"ids": ids}))
        return
    if rec["op"] == "recall":
        notes = ctx.long_term_memory.get_memory_set("notes")
        ctx.send_event(OutputEvent(output={"values": [i.value for i in notes.get()]}))
        return
    kb = ctx.get_resource("kb", ResourceType.VECTOR_STORE)
    name = rec["collection"]
    out = {
        "get": _try(lambda: [d.content for d in kb.get(None, name, None, None)]),
        "query": _try(lambda: [d.content for d in kb.query(VectorStoreQuery(
            query_text="secret", limit=10, collection_name=name)).documents]),
        "size": _try(lambda: kb.size(name)),
        "add": _try(lambda: kb.add([Document(id="fa-ltm-secret", content="00" * 32)], name)),
        "update": _try(lambda: kb.update([Document(id="x", content="y")], name)),
        "delete": _try(lambda: kb.delete(None, name, {"fa_set": "notes"})),
        "count": _try(lambda: kb.count(name, {"fa_set": "notes"})),
        "get_collection": _try(lambda: kb.get_collection(name).name),
        "get_or_create_collection": _try(lambda: kb.get_or_create_collection(name).name),
        "delete_collection": _try(lambda: kb.delete_collection(name)),
    }
    ctx.send_event(OutputEvent(output=out))
    ctx.send_event(ContextRetrievalRequestEvent(query="secret", vector_store="kb",
                                                collection_name=name, max_results=5))


def _retrieved(event: ContextRetrievalResponseEvent, ctx: Any) -> None:
    ctx.send_event(OutputEvent(output={"retrieved": [d.content for d in event.documents],
                                       "error": event.error}))


def _agent(path: str, collection: str | None = None) -> Agent:
    agent = Agent()
    agent.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION,
                       ResourceDescriptor(HashingEmbeddingModel, dimension=16))
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                       ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
    agent.add_resource("kb", ResourceType.VECTOR_STORE,
                       ResourceDescriptor(ChromaVectorStore, embedding_model="emb",
                                          persist_directory=path))
    agent.add_action("topic", [InputEvent], topic_op)
    agent.add_action("retrieved", [ContextRetrievalResponseEvent], _retrieved)
    config = {LongTermMemoryOptions.VECTOR_STORE: "kb"}
    if collection is not None:
        config[LongTermMemoryOptions.COLLECTION] = collection
    agent.set_config(**config)
    return agent


def _run(agent: Agent, *records: dict[str, Any]) -> list[dict[str, Any]]:
    result = AgentsExecutionEnvironment.local().from_list(list(records)).apply(agent).run()
    assert result.errors == []
    return result.outputs


def _assert_all_refused(outputs: list[dict[str, Any]], name: str) -> None:
    [ops] = [o for o in outputs if "get" in o]
    for op, what in ops.items():
        assert isinstance(what, str) and what.startswith("refused: VectorStoreError"), (op, what)
        assert "long-term memory" in what and repr(name) in what, what
    [retrieved] = [o for o in outputs if "retrieved" in o]
    assert retrieved["retrieved"] == [] and "long-term memory" in retrieved["error"]


@pytest.mark.parametrize("suffix", ["", "-keys", "-deleted", "-prior", "-deleted-prior",
                                    "-keys-prior"])
@pytest.mark.parametrize("collection", [None, "tenant_memory"])
def test_a_record_naming_a_memory_collection_reaches_no_keys_memory(tmp_path, collection,
                                                                     suffix):
    agent = _agent(str(tmp_path / "db"), collection)
    [added] = _run(agent, {"key": "alice", "op": "remember", "text": "alice's secret"})
    name = (collection or "long_term_memory") + suffix
    outputs = _run(agent, {"key": "mallory", "op": "topic", "collection": name})
    _assert_all_refused(outputs, name)
    [after] = _run(agent, {"key": "alice", "op": "recall"})
    assert after["values"] == ["alice's secret"]
    # a plain knowledge collection of the same store still works for every key
    plain, retrieved = _run(agent, {"key": "mallory", "op": "topic", "collection": "kb_docs"})
    assert not [v for v in plain.values() if "long-term memory" in str(v)]
    assert plain["get"] == [] and plain["size"] == 0
    assert plain["add"] == ["fa-ltm-secret"]  # an id is only an id in another collection
    assert plain["get_collection"] == "kb_docs"
    assert plain["delete_collection"] is True
    assert "long-term memory" not in str(retrieved["error"])


USER_MODULE = '''
"""A user's agent: the knowledge base to search is the record's "topic"."""
import json, sys
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, EmbeddingModelSetup, InputEvent, LongTermMemoryOptions,
                                 OutputEvent, ResourceDescriptor, ResourceType, VectorStoreQuery)
from flink_agents_py.integrations.embedding_models import HashingEmbeddingModel
from flink_agents_py.integrations.vector_stores import ChromaVectorStore


async def answer(event, ctx):
    rec = event.input
    if "remember" in rec:
        ctx.long_term_memory.get_memory_set("chat").add([rec["remember"]])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "remembered": True}))
        return
    kb = ctx.get_resource("kb", ResourceType.VECTOR_STORE)
    found = kb.query(VectorStoreQuery(query_text=rec["q"], limit=5,
                                      collection_name=rec["topic"]))
    ctx.send_event(OutputEvent(output={"key": ctx.key,
                                       "found": [d.content for d in found.documents]}))


class Helpdesk(Agent):
    def __init__(self, path):
        super().__init__()
        self.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION,
                          ResourceDescriptor(HashingEmbeddingModel, dimension=16))
        self.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                          ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
        self.add_resource("kb", ResourceType.VECTOR_STORE,
                          ResourceDescriptor(ChromaVectorStore, embedding_model="emb",
                                             persist_directory=path))
        self.add_action("answer", [InputEvent], answer)
        self.set_config(**{LongTermMemoryOptions.VECTOR_STORE: "kb"})


if __name__ == "__main__":
    records = [json.loads(line) for line in open(sys.argv[2])]
    result = (AgentsExecutionEnvironment.local().from_list(records)
              .apply(Helpdesk(sys.argv[1])).run())
    print(json.dumps({"outputs": result.outputs,
                      "errors": [{"key": e.key, "where": e.execution_id,
                                  "type": e.error_type, "message": e.message}
                                 for e in result.errors]}))
'''


def test_a_users_module_outside_the_repository_leaks_no_memory_to_a_hostile_topic(tmp_path):
    home = tmp_path / "user"
    home.mkdir()
    (home / "helpdesk.py").write_text(textwrap.dedent(USER_MODULE))
    records = [{"key": "alice", "remember": "alice's card ends 4242"},
               {"key": "mallory", "topic": "long_term_memory", "q": "card"},
               {"key": "bob", "topic": "faq", "q": "card"}]
    (home / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "helpdesk.py", str(home / "db"), "records.jsonl"],
                          cwd=home, env=env, capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    assert str(REPO) not in str(home)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "4242" not in done.stdout
    [mallory] = [e for e in result["errors"] if e["key"] == "mallory"]
    assert mallory["type"] == "VectorStoreError" and "long-term memory" in mallory["message"]
    # bob's topic has no documents yet: he finds none, and nothing goes wrong for him
    assert result["outputs"] == [{"key": "alice", "remembered": True},
                                 {"key": "bob", "found": []}]
    assert [e["key"] for e in result["errors"]] == ["mallory"]


class ProfileAsker(Asker):
    """Keeps the record's ``profile`` fields in short-term memory, each under its own name
    (the hostile part: the names come from the record), then asks the model."""

    @action(InputEvent)
    @staticmethod
    def keep(event: InputEvent, ctx: RunnerContext) -> None:
        for field, value in event.input.get("profile", {}).items():
            ctx.short_term_memory.set(field, value)


def _profile_agent(budget: Budget) -> ProfileAsker:
    agent = ProfileAsker()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(Metered, label="big", reply="big"))
    agent.add_resource("model", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn", budget=budget))
    return agent


HUGE_SPEND = {"input": 10**12, "output": 0, "cost": 0.0, "window_start": None, "calls": []}


@pytest.mark.parametrize("field", ["_budget.model", "_budget", "_flink_agents_py.x",
                                   "_flink_agents_py"])
def test_a_record_cannot_write_the_runtimes_memory_entries(field, probes):
    value = {"model": HUGE_SPEND} if field == "_budget" else HUGE_SPEND
    res = run(_profile_agent(Budget(max_tokens=150, scope="agent")),
              [{"key": "mallory", "q": "hi", "profile": {field: value}},
               {"key": "alice", "q": "hello"}], max_in_flight=1)
    # mallory's record is refused where it writes (its chat still ran: the actions of one
    # input are independent); alice, another key, is not refused by the agent's budget
    [error] = res.errors
    assert error.key == "mallory" and error.action == "keep" and error.seq == 0
    assert error.error_type == "ValueError" and "reserved" in error.message
    assert repr(field.split(".")[0]) in error.message
    assert [(o["key"], o["error"]) for o in res.outputs] == [("mallory", None), ("alice", None)]
    assert probes["big"] == 2


def test_a_key_may_still_delete_its_own_spend_entry_and_read_it(probes):
    class Resetter(Asker):
        @action(InputEvent)
        @staticmethod
        def reset(event: InputEvent, ctx: RunnerContext) -> None:
            if event.input.get("reset"):
                ctx.short_term_memory.delete("_budget.model")

    agent = Resetter()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(Metered, label="big", reply="big"))
    agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", budget=Budget(max_tokens=15)))
    res = run(agent, [{"key": "a", "q": 1}, {"key": "a", "q": 2},
                      {"key": "a", "q": 3, "reset": True}], max_in_flight=1)
    assert res.errors == []
    assert [o["error"] is None for o in res.outputs] == [True, False, True]


@pytest.mark.flink
@pytest.mark.timeout(300)
def test_the_memory_collections_are_refused_on_a_minicluster(tmp_path):
    pytest.importorskip("pyflink")
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    from flink_agents_py.flink import create_stream_environment

    agent = _agent(str(tmp_path / "db"))
    _run(agent, {"key": "alice", "op": "remember", "text": "alice's secret"})
    env = create_stream_environment()
    env.set_parallelism(1)  # one embedded Chroma (SQLite) writer
    records = [{"key": "mallory", "op": "topic", "collection": "long_term_memory"},
               {"key": "bob", "op": "remember", "text": "bob's own note"}]
    ds = env.from_source(NumberSequenceSource(0, 1), WatermarkStrategy.no_watermarks(),
                         "records").map(lambda n: records[n],
                                        output_type=Types.PICKLED_BYTE_ARRAY())
    applied = AgentsExecutionEnvironment.flink(env).from_datastream(ds).apply(agent)
    with applied.to_datastream().execute_and_collect("memory-collections") as rows:
        outs = list(rows)
    _assert_all_refused([o for o in outs if "ids" not in o], "long_term_memory")
    assert len([o for o in outs if "ids" in o]) == 1  # bob's own memory works
    [after] = _run(agent, {"key": "alice", "op": "recall"})
    assert after["values"] == ["alice's secret"]


def test_a_connection_without_an_answer_cache_never_reads_the_shared_one():
    # the answer cache of a model file is shared by every connection (and so every key) of
    # the process: a hit tells a key that another asked the same (metadata["cached"], and
    # the time it took). cache_size=0 turns it off for a connection whose prompts hold a
    # key's data, even when another connection of the same file keeps one (the loaded
    # model's cache size is the largest asked for)
    from test_local_model_contexts import ask, connection

    from flink_agents_py.integrations.chat_models._llama import LlamaCppChatModel

    shared: dict[str, Any] = {"made": [], "calls": [], "running": 0, "peak": 0, "fail": 0}
    shared["lock"] = threading.Lock()
    shared["changed"] = threading.Condition(shared["lock"])
    shared["gate"] = threading.Event()
    shared["gate"].set()
    cached = connection(shared, instances=1)
    private = LlamaCppChatModel(cache_size=0)
    private._loaded = cached._loaded  # one model file: one loaded model
    first = ask(cached, "alice's question")
    assert "cached" not in first.metadata
    again = ask(private, "alice's question")
    assert "cached" not in again.metadata and len(shared["calls"]) == 2
    assert ask(cached, "alice's question").metadata["cached"] is True  # the cache still works


async def _wait_for_c(event: InputEvent, ctx: Any) -> None:
    got = await ctx.wait_for("c", timeout_s=100)
    ctx.send_event(OutputEvent(output={"key": ctx.key, "got": got}))


def test_an_outside_event_names_a_tuple_key_in_its_json_form_and_only_that_key():
    # a tuple key's JSON form is an array: an event read from JSON (Kafka, a file, an
    # ApprovalRequest's answer sent back) carries a list, which was refused as unhashable,
    # so a run keyed by a tuple could never be answered from JSON. The list is that tuple,
    # never another key (("a", 1) and ("a", "1") stay apart)
    agent = Agent().add_action("wait", [InputEvent], _wait_for_c)
    records = [{"user": "a", "n": 1}, {"user": "a", "n": "1"}, {"user": "b", "n": [1]}]
    events = [{"key": ["a", 1], "correlation_id": "c", "payload": "for (a, 1)"},
              json.loads(json.dumps({"key": ("a", "1"), "correlation_id": "c",
                                     "payload": "for (a, '1')"})),
              {"key": ["b", [1]], "correlation_id": "c", "payload": "nested"}]

    def by_user(r: dict[str, Any]) -> Any:
        n = r["n"]
        return (r["user"], tuple(n) if isinstance(n, list) else n)

    result = (AgentsExecutionEnvironment.local()
              .from_list(records, key_selector=by_user).connect(events).apply(agent).run())
    assert result.errors == []
    assert sorted((repr(o["key"]), o["got"]) for o in result.outputs) == [
        ("('a', '1')", "for (a, '1')"), ("('a', 1)", "for (a, 1)"), ("('b', (1,))", "nested")]
