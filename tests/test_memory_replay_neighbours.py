"""Neighbours of the replay defects in memory: what an action read must be what it reads
again when it is re-executed after a restore, whatever other actions of its run committed
after it read (core-level restores, ``support.harness``)."""

from __future__ import annotations

import pytest
from support.harness import KEY, new_core, poll_until, resume, run_to_end, snapshot_of
from support.probes import count, wait

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState

pytestmark = pytest.mark.timeout(60)


def held(name: str) -> str:
    count(name)
    wait(name)
    return name


class ReadThenWait(Agent):
    """``read`` reads the counter and waits on a call; ``write`` (triggered by the same
    input, run meanwhile) overwrites the counter and completes. ``read`` outputs what it
    read."""

    @action(InputEvent)
    @staticmethod
    async def read(event: InputEvent, ctx: RunnerContext) -> None:
        which = event.input["which"]
        mem = ctx.sensory_memory if which == "sensory" else ctx.short_term_memory
        if which == "short, after its own write":
            mem.set("seed", 1)  # its view is its own from here
        seen = mem.get("counter", "unset")
        await ctx.durable_execute_async(held, "read")
        ctx.send_event(OutputEvent(output={"seen": seen, "again": mem.get("counter", "unset")}))

    @action(InputEvent)
    @staticmethod
    def write(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.short_term_memory.set("counter", "written by write")
        ctx.sensory_memory.set("counter", "written by write")


@pytest.mark.parametrize("which", ["short", "sensory", "short, after its own write"])
def test_a_read_is_the_same_after_a_restore_when_another_action_wrote_after_it(which, probes):
    plan = AgentPlan.from_agent(ReadThenWait())
    core = new_core(plan)
    try:
        state = InMemoryKeyState()
        res = core.on_input(KEY, {"which": which}, state)
        assert res.errors == [] and res.outputs == []
        poll_until(core, state, lambda s: s.run is not None and len(s.run.inflight) == 1
                   and probes["read"] == 1)
        snap = snapshot_of(state, "json")
        probes.open("read")
        # the fault-free run: what ``read`` saw
        first, errors = run_to_end(core, state)
    finally:
        probes.open("read")
        core.close()
    assert errors == []
    assert first == [{"seen": "unset", "again": "unset" if "own" in which
                      else "written by write"}]
    outputs, errors, _ = resume(plan, snap)
    assert errors == [] and outputs == first


def test_what_undoes_a_write_puts_back_a_branch_a_value_or_an_absence():
    from flink_agents_py.runtime.context._memory import ActionMemory, apply_writes, priors

    tree = {"a": 5, "b": {"c": [1]}, "keep": 1}
    writes = [(["a", "x"], 1), (["b", "c"], [2]), (["b", "d"], 3), (["new"], {"n": 1})]
    undo = priors(tree, writes)
    apply_writes(tree, writes)
    seen = ActionMemory(tree, "short_term_memory", lambda _m: list(reversed(undo)))
    assert seen.to_dict() == {"a": 5, "b": {"c": [1]}, "keep": 1}


def test_check_replay_safety_passes_actions_that_read_while_another_writes():
    """At every crash point: ``gather`` reads the counter, then awaits calls started at once
    and calls awaited in another order than made; ``bump`` (the same input) bumps it."""
    from support.memory_replay_agents import GatherAgent, inputs

    from flink_agents_py.testing import check_replay_safety

    report = check_replay_safety(GatherAgent(), inputs(), other_process=False)
    report.assert_ok()
    assert report.points_total > 10


def test_check_replay_safety_passes_chats_and_a_call_awaited_in_another_order():
    """Two chats (one with a tool round) and a call started at once, awaited in another
    order, beside an action of the same input writing memory: at every crash point."""
    from support.memory_replay_agents import ChatPair, add, answer

    from flink_agents_py.api import ChatModelSetup, ResourceDescriptor, ResourceType
    from flink_agents_py.testing import check_replay_safety, model_from_function

    agent = ChatPair()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(answer))
    agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=["add"]))
    agent.add_resource("add", ResourceType.TOOL, add)
    report = check_replay_safety(agent, [{"key": "a", "n": 0}, {"key": "b", "n": 1},
                                         {"key": "a", "n": 2}], other_process=False)
    report.assert_ok()
    assert report.points_total > 10


def test_check_replay_safety_passes_two_actions_of_one_input_on_long_term_memory(tmp_path):
    pytest.importorskip("chromadb")
    from support.memory_replay_agents import LtmPair

    from flink_agents_py.api import (
        EmbeddingModelSetup,
        LongTermMemoryOptions,
        ResourceDescriptor,
        ResourceType,
    )
    from flink_agents_py.integrations.embedding_models import HashingEmbeddingModel
    from flink_agents_py.integrations.vector_stores import ChromaVectorStore
    from flink_agents_py.testing import check_replay_safety

    agent = LtmPair()
    agent.add_resource("hashing", ResourceType.EMBEDDING_MODEL_CONNECTION,
                       HashingEmbeddingModel(dimension=8))
    agent.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                       ResourceDescriptor(EmbeddingModelSetup, connection="hashing"))
    agent.add_resource("kb", ResourceType.VECTOR_STORE, ResourceDescriptor(
        ChromaVectorStore, embedding_model="emb", persist_directory=str(tmp_path / "db")))
    agent.set_config(**{LongTermMemoryOptions.VECTOR_STORE: "kb"})
    report = check_replay_safety(agent, [
        {"key": "a", "text": "likes tea"}, {"key": "b", "text": "likes jazz"},
        {"key": "a", "text": "lives in Lima"}, {"key": "a", "text": "tea again"}],
        other_process=False)
    report.assert_ok()


class _MemoryUser(Agent):
    """Reads and writes short-term and sensory memory in each action."""

    @action(InputEvent)
    @staticmethod
    def go(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.sensory_memory.set("seen", ctx.sensory_memory.get("seen", 0) + 1)
        ctx.short_term_memory.set("n", (ctx.short_term_memory.get("n") or 0) + 1)
        ctx.send_event(OutputEvent(output=ctx.short_term_memory.get("n")))


def test_an_ended_action_leaves_no_reference_cycle_behind():
    """The replay clock of memory reads is held by the action's memories: had it been a
    bound method of the execution, every ended action (its events, records and memory
    views) would wait for the cyclic garbage collector, which in a TaskManager's interpreter
    cost the operator thread 150 us per chat."""
    import gc

    from flink_agents_py import AgentsExecutionEnvironment

    def executions() -> set[int]:
        return {id(o) for o in gc.get_objects() if type(o).__name__ == "ActionExecution"}

    gc.collect()
    gc.disable()
    try:
        before = executions()  # another test's, still referenced: not this run's
        result = (AgentsExecutionEnvironment.local()
                  .from_list([{"key": k % 5} for k in range(50)]).apply(_MemoryUser()).run())
        left = executions() - before
    finally:
        gc.enable()
    assert result.errors == [] and len(result.outputs) == 50
    assert len(left) == 0, f"{len(left)} ended actions left for the collector"
