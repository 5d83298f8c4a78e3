"""An action's memory clock is made with its first memory: what it guards stays guarded.

An action execution counts its memory operations on a clock its memories share; the clock
is made when the action first takes a memory (issue 31, part 4: an action that never uses
memory, e.g. an echo, builds none). A memory kept by one action and used in a later one of
the same key must still be refused, also when that later action never took a memory of
its own (it has no clock then); and an action's sensory and short-term memory count on one
clock, so writes keep their order across a restore.
"""

from __future__ import annotations

from typing import Any

import pytest

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore, InMemoryKeyState

pytestmark = pytest.mark.timeout(60)

KEPT: dict[str, Any] = {}


def _attempt(fn: Any) -> str:
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the test reports what was raised
        return type(e).__name__
    return "done"


class Keeper(Agent):
    @action(InputEvent)
    @staticmethod
    def act(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input["op"] == "keep":
            ctx.sensory_memory.set("a", 1)
            ctx.short_term_memory.set("b", 2)
            KEPT.update(sensory=ctx.sensory_memory, stm=ctx.short_term_memory)
            ctx.send_event(OutputEvent(output={"kept": True}))
        else:  # a later action of the same key that takes no memory of its own
            ctx.send_event(
                OutputEvent(
                    output={
                        "read_sensory": _attempt(lambda: KEPT["sensory"].get("a")),
                        "write_stm": _attempt(lambda: KEPT["stm"].set("b", 3)),
                        "read_stm": _attempt(lambda: KEPT["stm"].get("b")),
                    }
                )
            )


def test_a_kept_memory_is_refused_in_a_later_action_that_took_no_memory():
    core = AgentCore(AgentPlan.from_agent(Keeper()))
    core.open()
    try:
        state = InMemoryKeyState()
        first = core.on_input("k", {"op": "keep"}, state)
        later = core.on_input("k", {"op": "use"}, state)
    finally:
        core.close()
    assert first.outputs == [{"kept": True}] and not first.errors
    assert later.outputs == [
        {
            "read_sensory": "NotInActionContextError",
            "write_stm": "NotInActionContextError",
            "read_stm": "NotInActionContextError",
        }
    ]
    assert state.memory == {"b": 2}  # the kept memory wrote nothing


def test_an_actions_memories_share_one_clock_made_with_the_first():
    from flink_agents_py.runtime.recorder._execution import ActionExecution

    seen: dict[str, Any] = {}

    class Probe(Agent):
        @action(InputEvent)
        @staticmethod
        def act(event: InputEvent, ctx: RunnerContext) -> None:
            execution: ActionExecution = ctx._execution  # type: ignore[attr-defined]
            seen["before"] = execution._clock
            ctx.short_term_memory.set("x", 1)
            ctx.sensory_memory.set("y", 2)
            ctx.short_term_memory.set("z", 3)
            seen["ops"] = execution._record.memory_ops
            seen["shared"] = execution.sensory._clock is execution.short_term._clock

    core = AgentCore(AgentPlan.from_agent(Probe()))
    core.open()
    try:
        core.on_input("k", {"n": 1}, InMemoryKeyState())
    finally:
        core.close()
    assert seen == {"before": None, "ops": 3, "shared": True}
