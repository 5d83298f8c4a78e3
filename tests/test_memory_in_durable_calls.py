"""Memory writes inside a durable call's function are refused, as sending an event is.

A durable call's function runs once and only its result is recorded: a replay returns the
result without running it. A short-term, sensory or long-term memory write made inside it
(a helper that caches what it fetched: ``ctx.short_term_memory.set(...)`` inside
``ctx.durable_execute_async(fetch)``) was kept on the first run and lost when the action was
re-entered after a restore, so memory after a failure differed from a fault-free run (and
an async function wrote the action's memory from an I/O thread). It is now a ``UsageError``
naming the memory and the function; reads stay allowed.
"""

from __future__ import annotations

from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    EmbeddingModelSetup,
    InputEvent,
    LongTermMemoryOptions,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    UsageError,
    action,
)


def _attempt(fn: Any) -> str:
    try:
        fn()
    except UsageError as e:
        return str(e)
    return "written"


class Caching(Agent):
    """Writes memory from inside its durable calls' functions (the mistake)."""

    @action(InputEvent)
    @staticmethod
    async def fetch(event: InputEvent, ctx: RunnerContext) -> None:
        stm, sensory = ctx.short_term_memory, ctx.sensory_memory
        stm.set("seen", "before")

        def cache_it() -> dict[str, str]:  # sync: run in the action's thread
            return {"stm_set": _attempt(lambda: stm.set("cached", 1)),
                    "stm_delete": _attempt(lambda: stm.delete("seen")),
                    "sensory_set": _attempt(lambda: sensory.set("cached", 1)),
                    "object_set": _attempt(lambda: stm.get("obj", {}) is not None
                                           and stm.new_object("obj")),
                    "read": stm.get("seen")}

        async def cache_async() -> dict[str, str]:  # async: on the I/O executor
            notes = ctx.long_term_memory.get_memory_set("notes")
            return {"stm_set": _attempt(lambda: stm.set("cached_async", 1)),
                    "ltm_add": _attempt(lambda: notes.add("fetched")),
                    "ltm_delete": _attempt(lambda: notes.delete())}

        got = {**ctx.durable_execute(cache_it),
               **{f"async_{k}": v for k, v in (await ctx.durable_execute_async(cache_async)
                                               ).items()}}
        ctx.send_event(OutputEvent(output={"got": got, "stm": stm.to_dict(),
                                           "sensory": sensory.to_dict()}))


def test_memory_writes_inside_a_durable_calls_function_are_refused():
    pytest.importorskip("chromadb")
    from flink_agents_py.integrations.embedding_models import HashingEmbeddingModel
    from flink_agents_py.integrations.vector_stores import ChromaVectorStore

    agent = Caching()
    agent.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION,
                       ResourceDescriptor(HashingEmbeddingModel, dimension=8))
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                       ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
    agent.add_resource("kb", ResourceType.VECTOR_STORE,
                       ResourceDescriptor(ChromaVectorStore, embedding_model="emb"))
    agent.set_config(**{LongTermMemoryOptions.VECTOR_STORE: "kb"})
    result = AgentsExecutionEnvironment.local().from_list([{"key": "k"}]).apply(agent).run()
    assert result.errors == []
    [out] = result.outputs
    got = out["got"]
    assert got.pop("read") == "before"  # reading is fine
    for what, refused in got.items():
        assert "inside the function of a durable call" in refused, (what, refused)
    assert got["stm_set"].startswith("short_term_memory.set called")
    assert "cache_it" in got["stm_set"]
    assert got["sensory_set"].startswith("sensory_memory.set called")
    assert got["stm_delete"].startswith("short_term_memory.delete called")
    assert got["async_ltm_add"].startswith("long-term memory add called")
    assert got["async_ltm_delete"].startswith("long-term memory clear called")
    assert out["stm"] == {"seen": "before"} and out["sensory"] == {}


class PortedNotes(Agent):
    """Flink Agents' long-term memory example's idiom: memory operations as durable calls."""

    @action(InputEvent)
    @staticmethod
    async def note(event: InputEvent, ctx: RunnerContext) -> None:
        notes = ctx.long_term_memory.get_memory_set("notes")
        await ctx.durable_execute_async(notes.add, items=event.input["text"])
        items = await ctx.durable_execute_async(notes.get)
        seen = ctx.durable_execute(ctx.short_term_memory.get, "seen") or 0
        ctx.durable_execute(ctx.short_term_memory.set, "seen", seen + 1)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "seen": seen + 1,
                                           "notes": sorted(i.value for i in items)}))


def _ported_notes(path: str, agent: Agent | None = None) -> Agent:
    from flink_agents_py.integrations.embedding_models import HashingEmbeddingModel
    from flink_agents_py.integrations.vector_stores import ChromaVectorStore

    agent = agent if agent is not None else PortedNotes()
    agent.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION,
                       ResourceDescriptor(HashingEmbeddingModel, dimension=8))
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                       ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
    agent.add_resource("kb", ResourceType.VECTOR_STORE, ResourceDescriptor(
        ChromaVectorStore, embedding_model="emb", persist_directory=path))
    agent.set_config(**{LongTermMemoryOptions.VECTOR_STORE: "kb"})
    return agent


def test_memory_operations_run_as_durable_calls_survive_every_crash_point(tmp_path):
    # the writes were made inside the durable calls' functions: kept on the first run, lost
    # when a restore re-entered the action (the calls replayed, not run again)
    pytest.importorskip("chromadb")
    from flink_agents_py.testing import check_replay_safety

    inputs = [{"key": "a", "text": "likes tea"}, {"key": "a", "text": "lives in Lima"},
              {"key": "a", "text": "owns a cat"}]
    live = (AgentsExecutionEnvironment.local().from_list(inputs)
            .apply(_ported_notes(str(tmp_path / "live"))).run())
    assert live.errors == []
    assert [o["notes"] for o in live.outputs][-1] == ["likes tea", "lives in Lima",
                                                      "owns a cat"]
    assert [o["seen"] for o in live.outputs] == [1, 2, 3]
    report = check_replay_safety(_ported_notes(str(tmp_path / "db")), inputs,
                                 other_process=False)
    report.assert_ok()


class Searching(Agent):
    """An async memory operation given to the durable calls."""

    @action(InputEvent)
    @staticmethod
    async def look(event: InputEvent, ctx: RunnerContext) -> None:
        notes = ctx.long_term_memory.get_memory_set("notes")
        if event.input.get("text"):
            notes.add(event.input["text"])
            return
        found = await ctx.durable_execute_async(notes.asearch, "tea", 2)
        try:
            ctx.durable_execute(notes.asearch, "tea", 2)
            sync = "ran"
        except TypeError as e:
            sync = str(e)
        ctx.send_event(OutputEvent(output={"found": [i.value for i in found], "sync": sync}))


def test_an_async_memory_operation_is_awaited_through_durable_execute_async(tmp_path):
    pytest.importorskip("chromadb")
    searching = _ported_notes(str(tmp_path / "db"), Searching())
    records = [{"key": "a", "text": "likes tea"}, {"key": "a"}]
    result = AgentsExecutionEnvironment.local().from_list(records).apply(searching).run()
    assert result.errors == []
    [out] = result.outputs
    assert out["found"] == ["likes tea"]
    assert out["sync"].startswith("ctx.durable_execute(ActionMemorySet.asearch) got a coroutine")
