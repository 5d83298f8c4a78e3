"""An agent using embeddings, a vector store and long-term memory in one action (imported by
the local-runner and MiniCluster tests; Flink's Python workers import it by name)."""

from __future__ import annotations

from typing import Any

from flink_agents_py.api import (
    Agent,
    Document,
    EmbeddingModelSetup,
    InputEvent,
    LongTermMemoryOptions,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
)
from flink_agents_py.integrations.embedding_models import HashingEmbeddingModel
from flink_agents_py.integrations.vector_stores import ChromaVectorStore

TEXTS = ["shoes run small", "order a size up", "color faded fast", "comfortable all day",
         "runs small in the toe", "sturdy sole"]


def record(n: int) -> dict[str, Any]:
    """Input ``n``: key ``k{n % 2}``, a review text; ``fail`` makes the action fail after its
    memory writes (they must not apply)."""
    return {"key": f"k{n % 2}", "n": n, "text": TEXTS[n % len(TEXTS)], "fail": n == 4}


async def remember(event: InputEvent, ctx: Any) -> None:
    """Search the key's notes, add the text to them and to a shared set and the store."""
    rec = event.input
    notes = ctx.long_term_memory.get_memory_set("notes")
    everyone = ctx.long_term_memory.get_memory_set("everyone", shared=True)
    before = await notes.asearch(rec["text"], 5)
    ids = notes.add(rec["text"], {"n": rec["n"]})
    everyone.add(f"{ctx.key}: {rec['text']}")
    kb = ctx.get_resource("kb", ResourceType.VECTOR_STORE)
    await kb.aadd([Document(content=rec["text"], metadata={"key": ctx.key, "n": rec["n"]})])
    vector = ctx.get_resource("emb", ResourceType.EMBEDDING_MODEL).embed(rec["text"])
    if rec.get("fail"):
        raise RuntimeError(f"record {rec['n']} fails after its writes")
    ctx.send_event(OutputEvent(output={
        "key": ctx.key, "n": rec["n"], "before": sorted(i.value for i in before),
        "before_n": sorted((i.additional_metadata or {}).get("n") for i in before),
        "own": [i.value for i in notes.get(ids)], "size": notes.size(),
        "item_type": type(before[0]).__name__ if before else None, "dims": len(vector)}))


def build(path: str) -> Agent:
    """The agent, its store persisting under ``path``."""
    agent = Agent()
    agent.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION,
                       ResourceDescriptor(HashingEmbeddingModel, dimension=32))
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                       ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
    agent.add_resource("kb", ResourceType.VECTOR_STORE,
                       ResourceDescriptor(ChromaVectorStore, embedding_model="emb",
                                          persist_directory=path, collection="reviews"))
    agent.add_action("remember", [InputEvent], remember)
    agent.set_config(**{LongTermMemoryOptions.VECTOR_STORE: "kb"})
    return agent


def expected(n_records: int) -> list[dict[str, Any]]:
    """Outputs of records ``0..n_records-1``, processed per key in order (record 4 fails)."""
    out, notes = [], {"k0": [], "k1": []}
    for n in range(n_records):
        r = record(n)
        if r["fail"]:
            continue
        mine = notes[r["key"]]
        out.append({"key": r["key"], "n": n, "before": sorted(t for t, _ in mine),
                    "before_n": sorted(m for _, m in mine), "own": [r["text"]],
                    "size": len(mine) + 1,
                    "item_type": "MemorySetItem" if mine else None, "dims": 32})
        mine.append((r["text"], n))
    return out
