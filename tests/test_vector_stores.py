"""Vector stores: Chroma embedded (a local path) and as a real server (``chroma run``, started
here, stopped by PID), bad input, plan-build checks, and the context retrieval action."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

pytest.importorskip("chromadb")

from support.providers import free_port  # noqa: E402

from flink_agents_py import AgentsExecutionEnvironment  # noqa: E402
from flink_agents_py.api import (  # noqa: E402
    Agent,
    CollectionNotFoundError,
    ContextRetrievalRequestEvent,
    ContextRetrievalResponseEvent,
    DimensionMismatchError,
    Document,
    EmbeddingModelSetup,
    InputEvent,
    LongTermMemoryOptions,
    OutputEvent,
    PlanError,
    ResourceDescriptor,
    ResourceType,
    UnknownFilterFieldError,
    VectorStoreError,
    VectorStoreQuery,
    action,
    embedding_model_setup,
    vector_store,
)
from flink_agents_py.integrations.embedding_models import HashingEmbeddingModel  # noqa: E402
from flink_agents_py.integrations.vector_stores import ChromaVectorStore  # noqa: E402
from flink_agents_py.plan import AgentPlan  # noqa: E402
from flink_agents_py.runtime._resources import ResourceEnvironment  # noqa: E402

REVIEWS = [
    Document(content="these shoes run small, order a size up",
             metadata={"product": "A", "stars": 3}),
    Document(content="true to size and comfortable all day", metadata={"product": "A", "stars": 5}),
    Document(content="the color faded after one wash", metadata={"product": "B", "stars": 2}),
]


class _Env(Agent):
    """Declares an embedding model and a store; a resource environment builds them."""

    def __init__(self, **store_args):
        super().__init__()
        self.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION,
                          HashingEmbeddingModel(dimension=32))
        self.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                          ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
        self.add_resource("kb", ResourceType.VECTOR_STORE,
                          ResourceDescriptor(ChromaVectorStore, embedding_model="emb",
                                             **store_args))
        self.add_action("noop", [InputEvent], lambda e, c: None)


def _store(**store_args) -> ChromaVectorStore:
    env = ResourceEnvironment(AgentPlan.from_agent(_Env(**store_args)))
    return env.get("kb", ResourceType.VECTOR_STORE)  # type: ignore[return-value]


def _exercise(store: ChromaVectorStore) -> None:
    ids = store.add(REVIEWS)
    assert len(set(ids)) == 3 and store.size() == 3
    assert store.add(REVIEWS[0]) == ids[:1] and store.size() == 3  # same document, same id

    found = store.query(VectorStoreQuery(query_text="do these shoes run small", limit=2))
    assert found.documents[0].id == ids[0]
    assert found.documents[0].score <= found.documents[1].score
    by_vector = store.query(VectorStoreQuery(
        query_embedding=store.get_embedding_model().embed("color faded wash"), limit=1))
    assert by_vector.documents[0].content == REVIEWS[2].content

    only_b = store.query(VectorStoreQuery(query_text="shoes size", filters={"product": "B"}))
    assert [d.metadata["product"] for d in only_b.documents] == ["B"]
    both = store.query(VectorStoreQuery(query_text="size", filters={"product": "A", "stars": 5}))
    assert [d.id for d in both.documents] == [ids[1]]

    assert [d.id for d in store.get([ids[2], "missing", ids[0]])] == [ids[2], ids[0]]
    assert {d.id for d in store.get(filters={"product": "A"})} == set(ids[:2])
    store.delete(ids[0])
    assert store.size() == 2
    store.delete(filters={"product": "B"})
    assert [d.id for d in store.get(limit=None)] == [ids[1]]
    store.delete()
    assert store.size() == 0


def test_embedded_chroma_adds_queries_gets_deletes_and_persists(tmp_path):
    _exercise(_store(persist_directory=str(tmp_path / "db"), collection="col1"))
    first = _store(persist_directory=str(tmp_path / "db"), collection="col2")
    first.add(REVIEWS)
    again = _store(persist_directory=str(tmp_path / "db"), collection="col2")  # a new process
    assert again.size() == 3
    assert again.query(VectorStoreQuery(query_text="faded color")).documents[0].metadata == {
        "product": "B", "stars": 2}


def test_bad_input_gives_named_errors(tmp_path):
    store = _store(persist_directory=str(tmp_path / "db"))
    store.add(REVIEWS)
    with pytest.raises(DimensionMismatchError, match="32-dimensional vectors; vector 0 has 3"):
        store.query(VectorStoreQuery(query_embedding=[1.0, 0.0, 0.0]))
    with pytest.raises(DimensionMismatchError):
        store.add(Document(content="x", embedding=[0.5] * 7))
    with pytest.raises(UnknownFilterFieldError, match=r"\['prodcut'\].*fields: product, stars"):
        store.query(VectorStoreQuery(query_text="size", filters={"prodcut": "A"}))
    with pytest.raises(VectorStoreError, match="field equality only"):
        store.get(filters={"$or": [{"product": "A"}]})
    with pytest.raises(VectorStoreError, match="not a JSON scalar"):
        store.add(Document(content="x", metadata={"tags": ["a"]}))
    with pytest.raises(VectorStoreError, match="both query_text and query_embedding are empty"):
        store.query(VectorStoreQuery(query_text=" "))
    strict = _store(persist_directory=str(tmp_path / "db"), collection="absent",
                    create_collection_if_not_exists=False)
    with pytest.raises(CollectionNotFoundError, match="'absent' does not exist"):
        strict.query(VectorStoreQuery(query_text="size"))
    lenient = _store(persist_directory=str(tmp_path / "db"), collection="absent")
    assert lenient.query(VectorStoreQuery(query_text="size")).documents == []


def test_plan_build_names_dangling_knowledge_references():
    class Dangling(Agent):
        @embedding_model_setup
        @staticmethod
        def emb():
            return ResourceDescriptor(EmbeddingModelSetup, connection="nowhere")

        @vector_store
        @staticmethod
        def kb():
            return ResourceDescriptor(ChromaVectorStore, embedding_model="missing_model")

        @action(InputEvent)
        @staticmethod
        def go(event, ctx):
            pass

    with pytest.raises(PlanError) as e:
        AgentPlan.from_agent(Dangling().set_config(**{LongTermMemoryOptions.VECTOR_STORE: "mem"}))
    text = str(e.value)
    assert "names connection 'nowhere'" in text
    assert "names embedding model 'missing_model'" in text
    assert "names vector store 'mem'" in text


# ------------------------------------------------------------------------- server mode
@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory):
    """``chroma run`` on 127.0.0.1 (the chromadb package's own server), stopped by PID."""
    exe = os.path.join(os.path.dirname(sys.executable), "chroma")
    if not os.path.exists(exe):
        pytest.skip("the chroma CLI is not installed")
    port = free_port()
    path = tmp_path_factory.mktemp("chroma-server")
    log = open(path / "server.log", "wb")
    proc = subprocess.Popen([exe, "run", "--path", str(path / "data"), "--host", "127.0.0.1",
                             "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1)
                break
            except OSError:
                assert proc.poll() is None, (path / "server.log").read_text()
                assert time.monotonic() < deadline, "chroma server did not start"
                time.sleep(0.2)
        yield port
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def test_chroma_server_mode_against_a_real_server(chroma_server):
    _exercise(_store(host="127.0.0.1", port=chroma_server, collection="server_c1"))
    store = _store(host="127.0.0.1", port=chroma_server, collection="server_c2")
    store.add(REVIEWS)
    with pytest.raises(DimensionMismatchError):
        store.query(VectorStoreQuery(query_embedding=[1.0]))
    with pytest.raises(UnknownFilterFieldError):
        store.get(filters={"nope": 1})


# ------------------------------------------------------------------------- retrieval action
class Retriever(_Env):
    def __init__(self, path: str):
        super().__init__(persist_directory=path)
        self._actions.clear()
        self.add_action("ask", [InputEvent], Retriever.ask)
        self.add_action("answer", [ContextRetrievalResponseEvent], Retriever.answer)

    @staticmethod
    def ask(event, ctx):
        ctx.send_event(ContextRetrievalRequestEvent(
            query=event.input["q"], vector_store=event.input.get("store", "kb"),
            max_results=2, filters=event.input.get("filters")))

    @staticmethod
    def answer(event, ctx):
        ctx.send_event(OutputEvent(output={"key": ctx.key, "error": event.error,
                                           "docs": [d.content for d in event.documents]}))


def test_context_retrieval_answers_requests_and_reports_failures(tmp_path):
    agent = Retriever(str(tmp_path / "db"))
    plan = AgentPlan.from_agent(agent)
    ResourceEnvironment(plan).get("kb", ResourceType.VECTOR_STORE).add(REVIEWS)
    records = [{"key": "1", "q": "does it run small"},
               {"key": "2", "q": "size", "store": "nope"},
               {"key": "3", "q": "size", "filters": {"colour": "red"}}]
    result = AgentsExecutionEnvironment.local().from_list(records).apply(plan).run()
    by_key = {o["key"]: o for o in result.outputs}
    assert by_key["1"]["error"] is None
    assert by_key["1"]["docs"][0] == REVIEWS[0].content and len(by_key["1"]["docs"]) == 2
    assert "no vector_store resource named 'nope'" in by_key["2"]["error"]
    assert by_key["2"]["docs"] == []
    assert by_key["3"]["error"].startswith("UnknownFilterFieldError")
    assert result.errors == [] and len(result.outputs) == 3


def test_a_field_another_writer_added_is_known_to_filters(tmp_path):
    a = _store(persist_directory=str(tmp_path / "db"))
    b = _store(persist_directory=str(tmp_path / "db"))
    a.add(REVIEWS[0])
    assert b.size() == 1  # b has read the collection (fields: product, stars)
    a.add(Document(content="new field", metadata={"colour": "red"}))
    assert [d.content for d in b.get(filters={"colour": "red"})] == ["new field"]
    with pytest.raises(UnknownFilterFieldError):
        b.get(filters={"flavour": "sweet"})


def test_resources_pickle_without_their_clients(tmp_path):
    """Flink's process mode pickles declared resources: configuration only, reconnecting."""
    import pickle

    from flink_agents_py.integrations.embedding_models import (
        MiniLMEmbeddingModel,
        OpenAIEmbeddingModel,
    )

    store = _store(persist_directory=str(tmp_path / "db"))
    store.add(REVIEWS)
    copy = pickle.loads(pickle.dumps(store))
    assert copy.persist_directory == store.persist_directory and copy.size() == 3
    for conn in (HashingEmbeddingModel(dimension=8), MiniLMEmbeddingModel(batch_size=4),
                 OpenAIEmbeddingModel(base_url="http://127.0.0.1:1/v1")):
        again = pickle.loads(pickle.dumps(conn))
        assert again.model_dump() == conn.model_dump()
    hashing = pickle.loads(pickle.dumps(HashingEmbeddingModel(dimension=8)))
    assert len(hashing.embed("still works")) == 8


async def _query_then_add(event: InputEvent, ctx) -> None:
    kb = ctx.get_resource("kb", ResourceType.VECTOR_STORE)
    found = await kb.aquery(VectorStoreQuery(query_text="a review", limit=5))       # c0
    listed = await kb.aget(limit=10)                                                # c1
    await kb.aadd([Document(content=f"review {event.input['n']}")])                 # c2
    ctx.send_event(OutputEvent(output={"found": sorted(d.content for d in found.documents),
                                       "listed": sorted(d.content for d in listed)}))


def test_reads_are_recorded_in_the_callback_that_made_them_and_replayed(tmp_path):
    """A checkpoint never finds a read in flight: a restore replays what the first
    execution read, not what the crashed attempt added after the checkpoint."""
    from support.harness import KEY, new_core, run_to_end, snapshot_of

    from flink_agents_py.integrations.embedding_models import HashingEmbeddingModel
    from flink_agents_py.plan import AgentPlan
    from flink_agents_py.runtime import InMemoryKeyState

    agent = Agent()
    agent.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION,
                       ResourceDescriptor(HashingEmbeddingModel, dimension=8))
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                       ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
    agent.add_resource("kb", ResourceType.VECTOR_STORE, ResourceDescriptor(
        ChromaVectorStore, embedding_model="emb", persist_directory=str(tmp_path / "db")))
    agent.add_action("go", [InputEvent], _query_then_add)
    plan = AgentPlan.from_agent(agent)
    old = new_core(plan)
    state = InMemoryKeyState()
    try:
        old.on_input(KEY, {"n": 0}, state)
        first, _ = run_to_end(old, state)
        assert first == [{"found": [], "listed": []}]
        old.on_input(KEY, {"n": 1}, state)  # the first callback: both reads, the add started
        [execution] = state.run.inflight.values()
        assert [execution.calls[str(i)].done for i in range(3)] == [True, True, False]
        saved = snapshot_of(state, "json")
        crashed, errors = run_to_end(old, state)  # adds "review 1", then dies
    finally:
        old.close()
    assert errors == [] and crashed == [{"found": ["review 0"], "listed": ["review 0"]}]
    new = new_core(plan)
    try:
        outputs, errors = run_to_end(new, saved)
    finally:
        new.close()
    assert errors == [] and outputs == crashed
    assert new.counters["calls_replayed"] == 2 and new.counters["calls_executed"] == 1
