"""A store's embedding model reached through the store an action got: durable, as directly.

``ctx.get_resource("kb", VECTOR_STORE).get_embedding_model()`` handed back the setup itself,
so ``embed`` through it was the setup's own call, made again by a replay after a restore,
where ``ctx.get_resource("emb", EMBEDDING_MODEL).embed`` beside it was recorded. It is now
the same durable view (core-level restores, ``support.harness``).
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("chromadb")

from support.harness import KEY, call_of, new_core, run_to_end  # noqa: E402
from test_long_term_memory import (  # noqa: E402
    _crash_at_the_gate,
    _gated_plan,
    _restored,
    _wait_gate,
)

from flink_agents_py.api import (  # noqa: E402
    EmbeddingModelSetup,
    OutputEvent,
    ResourceType,
    VectorStore,
)
from flink_agents_py.runtime import InMemoryKeyState  # noqa: E402

pytestmark = pytest.mark.timeout(120)


async def _embed_through_the_store(event: Any, ctx: Any) -> None:
    kb = ctx.get_resource("kb", ResourceType.VECTOR_STORE)
    model = kb.get_embedding_model()
    vector = model.embed(event.input["text"])                     # c0
    more = model.embed([event.input["text"], "another"])          # c1
    await ctx.durable_execute_async(_wait_gate, True)             # c2: the checkpoint
    ctx.send_event(OutputEvent(output={
        "dims": len(vector), "same": vector == more[0],
        "is_setup": isinstance(model, EmbeddingModelSetup)}))


def test_an_embedding_through_the_store_is_replayed_not_made_again(
        tmp_path, probes, monkeypatch):
    plan = _gated_plan(tmp_path, _embed_through_the_store)
    snapshot, crashed = _crash_at_the_gate(plan, {"text": "the sole came off"})
    assert crashed == [{"dims": 8, "same": True, "is_setup": True}]
    assert [call_of(snapshot, "go", n).target.rsplit(":", 1)[-1] for n in range(2)] == \
        ["embedding_model[emb].embed"] * 2
    made: list[Any] = []
    real = EmbeddingModelSetup.embed_with_usage

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        made.append(args)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(EmbeddingModelSetup, "embed_with_usage", counted)
    assert _restored(plan, snapshot) == crashed
    assert made == []  # both replayed from their records


async def _no_model(event: Any, ctx: Any) -> None:
    kb = ctx.get_resource("kb", ResourceType.VECTOR_STORE)
    kb.resource.embedding_model = None
    try:
        kb.get_embedding_model()
    except Exception as e:  # noqa: BLE001 - what the action sees
        ctx.send_event(OutputEvent(output={"error": type(e).__name__, "text": str(e),
                                           "store": isinstance(kb, VectorStore)}))


def test_a_store_naming_no_embedding_model_says_so_through_the_view(tmp_path, probes):
    plan = _gated_plan(tmp_path, _no_model)
    core = new_core(plan)
    try:
        state = InMemoryKeyState()
        first = core.on_input(KEY, {}, state)
        outputs, errors = run_to_end(core, state)
    finally:
        core.close()
    assert [*first.errors, *errors] == []
    [out] = [*first.outputs, *outputs]
    assert out["error"] == "VectorStoreError" and "has no embedding_model" in out["text"]
    assert out["store"] is True
