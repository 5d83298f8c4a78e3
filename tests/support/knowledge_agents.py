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


# ------------------------------------------------------------------- isolation (two keys)
async def notes_op(event: InputEvent, ctx: Any) -> None:
    """``op`` ``add``: add ``texts``; ``attack``: try every operation on ``ids`` (another
    key's); ``read``: list the notes. Outputs what it found."""
    rec = event.input
    ltm = ctx.long_term_memory
    notes = ltm.get_memory_set("notes")
    shared = ltm.get_memory_set("notes", shared=True)
    op = rec["op"]
    out: dict[str, Any] = {}
    if op == "add":
        out["ids"] = notes.add(rec["texts"])
    elif op == "attack":
        ids = rec["ids"]
        out = {"get": [i.value for i in notes.get(ids)],
               "get_one": [i.value for i in notes.get(ids[0])],
               "search": [i.value for i in await notes.asearch(rec["query"], 10)],
               "sync_search": [i.value for i in notes.search(rec["query"], 10)],
               "listed": [i.value for i in notes.get()],
               "size": notes.size(),
               "shared_get": [i.value for i in shared.get(ids)],
               "shared_size": shared.size()}
        notes.delete(ids)
        shared.delete(ids)
        out["had"] = ltm.delete_memory_set("notes")
        ltm.delete_memory_set("notes", shared=True)
    else:
        out = {"values": sorted(i.value for i in notes.get()), "size": notes.size(),
               "by_id": sorted(i.value for i in notes.get(rec.get("ids") or [])),
               "found": sorted(i.value for i in notes.search(rec.get("query", "note"), 10))}
    ctx.send_event(OutputEvent(output={"key": ctx.key, "op": op, **out}))


class NotesAgent(Agent):
    """Long-term memory in a store with no collection named (``notes_op``)."""

    def __init__(self, path: str | None) -> None:
        super().__init__()
        self.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION,
                          ResourceDescriptor(HashingEmbeddingModel, dimension=32))
        self.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                          ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
        store = {"persist_directory": path} if path else {}
        self.add_resource("kb", ResourceType.VECTOR_STORE,
                          ResourceDescriptor(ChromaVectorStore, embedding_model="emb", **store))
        self.add_action("notes", [InputEvent], notes_op)
        self.set_config(**{LongTermMemoryOptions.VECTOR_STORE: "kb"})


class OtherNotesAgent(NotesAgent):
    """A second agent, the same in every way but its name."""


async def store_op(event: InputEvent, ctx: Any) -> None:
    """Add ``text`` to the store ``kb`` (no collection named), then list what it finds."""
    from flink_agents_py.api import VectorStoreQuery

    kb = ctx.get_resource("kb", ResourceType.VECTOR_STORE)
    await kb.aadd([Document(content=event.input["text"])])
    found = await kb.aquery(VectorStoreQuery(query_text=event.input["text"], limit=10))
    ctx.send_event(OutputEvent(output={"found": sorted(d.content for d in found.documents),
                                       "collection": kb.collection, "size": kb.size()}))


class StoreAgent(Agent):
    """An in-memory ``ChromaVectorStore()`` declared without a collection (``store_op``)."""

    def __init__(self) -> None:
        super().__init__()
        self.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION,
                          ResourceDescriptor(HashingEmbeddingModel, dimension=16))
        self.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                          ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
        self.add_resource("kb", ResourceType.VECTOR_STORE,
                          ResourceDescriptor(ChromaVectorStore, embedding_model="emb"))
        self.add_action("store", [InputEvent], store_op)


class OtherStoreAgent(StoreAgent):
    """A second agent with the same in-memory store declaration."""


# ------------------------------------------------------------- checked for replay safety
async def remember_op(event: InputEvent, ctx: Any) -> None:
    """``op`` ``add``: remember ``texts``; ``forget``: delete every note; ``read``: list,
    count and search the notes."""
    notes = ctx.long_term_memory.get_memory_set("notes")
    rec = event.input
    out: dict[str, Any] = {}
    if rec["op"] == "add":
        notes.add(rec["texts"])
    elif rec["op"] == "forget":
        notes.delete([i.id for i in notes.get()])
    else:
        out = {"values": sorted(i.value for i in notes.get()), "size": notes.size(),
               "found": sorted(i.value for i in notes.search("note", 10))}
    ctx.send_event(OutputEvent(output={"key": ctx.key, "op": rec["op"], **out}))


class RememberingAgent(NotesAgent):
    """Long-term memory written, deleted and read again across runs (``remember_op``)."""

    def __init__(self, path: str | None) -> None:
        super().__init__(path)
        self._actions.clear()
        self.add_action("remember", [InputEvent], remember_op)
