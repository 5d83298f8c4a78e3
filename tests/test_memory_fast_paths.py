"""The short-term and sensory memory's fast paths keep what the general code did.

A ``set`` of a scalar takes it as its own JSON form without the serializer's walk, a path
seen before is not parsed again, the ownership check of a memory operation and of
``ctx.sensory_memory`` runs inline, a write into an empty tree starts a fresh view, and the
commit skips the undo entries when no other action is reading (issue 31, part 4). Each test
here fails if its cut changed what an action sees: a scalar with no JSON form still refused
naming where, nothing logged for it, the operations counted exactly as before (a replay
places other actions' writes by that count), a kept memory still refused, an uncommitted
write still the action's own.
"""

from __future__ import annotations

import enum
from typing import Any

import pytest

from flink_agents_py.api import (
    Agent,
    InputEvent,
    NotInActionContextError,
    OutputEvent,
    RunnerContext,
    SerializationError,
    action,
)
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore, InMemoryKeyState
from flink_agents_py.runtime.context._memory import ActionMemory

pytestmark = pytest.mark.timeout(60)


class Level(enum.IntEnum):
    HIGH = 3


NOT_JSON = {
    "nan": float("nan"),
    "inf": float("inf"),
    "-inf": float("-inf"),
    "int past 64 bits": 1 << 64,
    "int below int64": -(1 << 63) - 1,
    "lone surrogate": "a\ud800b",
}
EDGES = {
    "largest uint64": (1 << 64) - 1,
    "smallest int64": -(1 << 63),
    "non-ascii": "é ü",
    "true": True,
    "zero float": 0.0,
    "none": None,
    "int enum": Level.HIGH,
}


def _run(agent: Agent, inputs: list[Any]) -> tuple[list[Any], list[Any], InMemoryKeyState]:
    core = AgentCore(AgentPlan.from_agent(agent))
    core.open()
    try:
        state = InMemoryKeyState()
        outputs: list[Any] = []
        errors: list[Any] = []
        for record in inputs:
            res = core.on_input("k", record, state)
            outputs += res.outputs
            errors += res.errors
        return outputs, errors, state
    finally:
        core.close()


class Writes(Agent):
    """Writes each value of its input to both memories and reports what happened."""

    @action(InputEvent)
    @staticmethod
    def act(event: InputEvent, ctx: RunnerContext) -> None:
        seen: dict[str, Any] = {}
        for name, value in VALUES[event.input["which"]].items():
            for memory in (ctx.short_term_memory, ctx.sensory_memory):
                try:
                    ref = memory.set(name, value)
                except SerializationError as e:
                    seen[f"{memory_name(memory)}:{name}"] = str(e)
                else:
                    got = memory.get(ref)
                    seen[f"{memory_name(memory)}:{name}"] = [got, type(got).__name__, ref.type_name]
        record = ctx._execution._record  # type: ignore[attr-defined]
        ctx.send_event(OutputEvent(output={"seen": seen, "ops": record.memory_ops}))


VALUES = {"bad": NOT_JSON, "edges": EDGES}


def memory_name(memory: Any) -> str:
    return "stm" if memory is not None and memory._name == "short_term_memory" else "sensory"


def test_a_scalar_with_no_json_form_is_refused_naming_where_and_neither_logged_nor_counted():
    outputs, errors, state = _run(Writes(), [{"which": "bad"}])
    assert errors == []
    (out,) = outputs
    for name in NOT_JSON:
        for memory in ("short_term_memory", "sensory_memory"):
            short = "stm" if memory == "short_term_memory" else "sensory"
            message = out["seen"][f"{short}:{name}"]
            assert message.startswith(f"{memory} value at {name!r}"), message
    assert out["ops"] == 0  # a refused value is no operation: a replay counts as the run did
    assert state.memory == {}


def test_scalars_at_the_edges_of_their_json_form_are_stored_as_they_were():
    outputs, errors, state = _run(Writes(), [{"which": "edges"}])
    assert errors == []
    (out,) = outputs
    for short in ("stm", "sensory"):
        got = {name: out["seen"][f"{short}:{name}"] for name in EDGES}
        assert got == {
            "largest uint64": [(1 << 64) - 1, "int", "int"],
            "smallest int64": [-(1 << 63), "int", "int"],
            "non-ascii": ["é ü", "str", "str"],
            "true": [True, "bool", "bool"],
            "zero float": [0.0, "float", "float"],
            "none": [None, "NoneType", "NoneType"],
            "int enum": [3, "int", "Level"],
        }
    assert out["ops"] == 2 * 2 * len(EDGES)  # a set and a get each, in each memory
    assert state.memory == {
        name: (3 if name == "int enum" else value) for name, value in EDGES.items()
    }
    assert type(state.memory["int enum"]) is int and type(state.memory["true"]) is bool


class Counts(Agent):
    """Operations that fail at different points, then one that works: the count of each."""

    @action(InputEvent)
    @staticmethod
    def act(event: InputEvent, ctx: RunnerContext) -> None:
        stm = ctx.short_term_memory
        record = ctx._execution._record  # type: ignore[attr-defined]
        counts = []
        for attempt in (
            lambda: stm.get("a..b"),
            lambda: stm.set("a..b", 1),
            lambda: stm.set("_budget.x", 1),
            lambda: stm.set("x", float("nan")),
            lambda: stm.get(""),
            lambda: stm.set("x", 1),
            lambda: stm.get("x"),
            lambda: stm.get("x.y.z"),
            lambda: stm.delete("x.y"),
            lambda: stm.set("d", {"k": [1, 2]}),
            lambda: stm.get("d.k"),
        ):
            try:
                attempt()
            except (ValueError, SerializationError):
                pass
            counts.append(record.memory_ops)
        ctx.send_event(OutputEvent(output=counts))


def test_each_memory_operation_is_counted_as_before_whatever_it_raised():
    # a read with a bad path is counted (the tree is read first), a refused write is not:
    # the count places other actions' writes for a replay, so it must not move
    outputs, errors, state = _run(Counts(), [{}])
    assert errors == []
    assert outputs == [[1, 1, 1, 1, 2, 3, 4, 5, 6, 7, 8]]
    assert state.memory == {"x": 1, "d": {"k": [1, 2]}}


class Kept(Agent):
    """The first input keeps its memories; the second uses them in another action."""

    @action(InputEvent)
    @staticmethod
    def act(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input["op"] == "keep":
            KEPT["ctx"] = ctx
            KEPT["sensory"] = ctx.sensory_memory
            KEPT["sensory"].set("a", 1)
            return
        got = {}
        for name, use in (
            ("ctx.sensory_memory", lambda: KEPT["ctx"].sensory_memory),
            ("ctx.short_term_memory", lambda: KEPT["ctx"].short_term_memory),
            ("set", lambda: KEPT["sensory"].set("b", 2)),
            ("get", lambda: KEPT["sensory"].get("a")),
        ):
            try:
                use()
                got[name] = "allowed"
            except NotInActionContextError as e:
                got[name] = type(e).__name__ if "valid only in the action" in str(e) else str(e)
        ctx.send_event(OutputEvent(output=got))


KEPT: dict[str, Any] = {}


def test_a_context_and_a_memory_kept_from_an_earlier_action_are_refused_each_use():
    outputs, errors, _ = _run(Kept(), [{"op": "keep"}, {"op": "use"}])
    assert errors == []
    assert outputs == [
        {
            name: "NotInActionContextError"
            for name in ("ctx.sensory_memory", "ctx.short_term_memory", "set", "get")
        }
    ]


def test_a_write_into_an_empty_tree_stays_the_actions_own_until_committed():
    base: dict[str, Any] = {}
    memory = ActionMemory(base, "sensory_memory")
    memory.set("a", 1)
    memory.set("b.c", "x")
    assert base == {}  # the committed tree is untouched until the action completes
    assert memory.get("a") == 1 and memory.get("b.c") == "x"
    other = ActionMemory(base, "sensory_memory")  # another action of the run
    assert other.get("a", "unset") == "unset"
    assert memory.writes == [(["a"], 1), (["b", "c"], "x")]


class Parallel(Agent):
    """Two actions of one input: ``write`` commits while ``read`` is still in flight."""

    @action(InputEvent)
    @staticmethod
    async def read(event: InputEvent, ctx: RunnerContext) -> None:
        before = ctx.sensory_memory.get("x", "unset")
        await ctx.durable_execute_async(_pause)
        ctx.send_event(
            OutputEvent(output={"before": before, "after": ctx.sensory_memory.get("x", "unset")})
        )

    @action(InputEvent)
    @staticmethod
    def write(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.sensory_memory.set("x", "written")


async def _pause() -> None:
    return None


def test_a_commit_while_another_action_reads_gives_it_what_undoes_the_write():
    core = AgentCore(AgentPlan.from_agent(Parallel()))
    core.open()
    try:
        state = InMemoryKeyState()
        res = core.on_input("k", {}, state)
        undo = [list(r.memory_undo) for r in state.run.inflight.values()] if state.run else []
        outputs = list(res.outputs)
        while state.run is not None:
            core.wait_for("k", 5.0)
            outputs += core.advance("k", state).outputs
    finally:
        core.close()
    assert undo == [[[1, "sensory_memory", ["x"]]]]  # read once; "x" was absent before
    assert outputs == [{"before": "unset", "after": "written"}]


USER_SCRIPT = """
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action

KEPT = []


class Counter(Agent):
    @action(InputEvent)
    @staticmethod
    def count(event: InputEvent, ctx: RunnerContext) -> None:
        stm = ctx.short_term_memory
        seen = stm.get("count", 0)
        stm.set("count", seen + 1)
        stm.set("last", event.input["text"])
        try:
            stm.set("ratio", float("nan"))
            refused = "stored"
        except Exception as e:
            refused = type(e).__name__
        kept = "none"
        if KEPT:
            try:
                KEPT[0].get("count")
                kept = "allowed"
            except Exception as e:
                kept = type(e).__name__
        KEPT[:] = [stm]
        ctx.send_event(OutputEvent(output=[seen, stm.get("count"), stm.get("last"),
                                           refused, kept]))


records = [{"key": "a", "text": "héllo"}, {"key": "a", "text": "again"}]
for out in AgentsExecutionEnvironment.local().from_list(records).apply(Counter()).collect():
    print(out)
"""


def test_a_users_counter_in_short_term_memory_runs_from_their_own_module(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    venv = root / ".venv" / "bin" / "python"
    (tmp_path / "counter.py").write_text(USER_SCRIPT)
    proc = subprocess.run(
        [str(venv if venv.exists() else sys.executable), "counter.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=150,
        env={"PYTHONPATH": str(root), "PATH": ""},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines() == [
        "[0, 1, 'héllo', 'SerializationError', 'none']",
        "[1, 2, 'again', 'SerializationError', 'NotInActionContextError']",
    ]
