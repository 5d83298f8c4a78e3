"""What a key keeps in ``InMemoryKeyState`` (the local runner's and the core's tests) once idle.

A key whose queued inputs were all taken keeps its next input position (``_next_seq``) and its
short-term memory, and no slot of the inputs it took: before, each taken input left a
``None`` slot in the key's list (32 bytes of list storage per finished key in the P5 bench,
for as long as the key lived).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState
from tests.support.harness import new_core, run_to_end

EMPTY = sys.getsizeof([])


async def pause(n: int) -> int:
    await asyncio.sleep(0.001)
    return n


class Slow(Agent):
    """Each input waits on one durable call, so later inputs queue behind it."""

    @action(InputEvent)
    @staticmethod
    async def work(event: InputEvent, ctx: RunnerContext) -> None:
        n = await ctx.durable_execute_async(pause, event.input)
        ctx.short_term_memory.set("last", n)
        ctx.send_event(OutputEvent(output=n))


def _slots(state: InMemoryKeyState) -> int:
    """Bytes the key's input list holds beyond an empty list's."""
    return sys.getsizeof(state._queue) - EMPTY


def test_taking_every_queued_input_leaves_no_slots_and_the_position_goes_on():
    state = InMemoryKeyState()
    for n in range(3):
        state.push_input({"n": n})
    assert [state.pop_input() for _ in range(3)] == [(0, {"n": 0}), (1, {"n": 1}), (2, {"n": 2})]
    assert state.pop_input() is None and state.queued() == 0
    assert _slots(state) == 0
    state.push_input("next")
    state.push_input("after")
    assert state.queued() == 2
    assert state.pop_input() == (3, "next")  # the key's next position, not 0 again
    assert state.queued() == 1 and state.pop_input() == (4, "after")
    assert _slots(state) == 0


def test_a_long_queue_taken_in_part_keeps_its_order():
    state = InMemoryKeyState()
    for n in range(3000):
        state.push_input(n)
    taken = [state.pop_input() for _ in range(2000)]
    assert taken == [(n, n) for n in range(2000)]
    state.push_input(3000)
    rest: list[Any] = []
    while (item := state.pop_input()) is not None:
        rest.append(item)
    assert rest == [(n, n) for n in range(2000, 3001)]
    assert _slots(state) == 0


def test_a_key_run_through_the_core_keeps_only_its_memory_and_position():
    plan = AgentPlan.from_agent(Slow())
    core = new_core(plan)
    try:
        state = InMemoryKeyState()
        outputs: list[Any] = []
        for n in range(3):  # the second and third queue behind the first's call
            res = core.on_input("k1", n, state)
            outputs.extend(res.outputs)
        more, errors = run_to_end(core, state)
        assert errors == []
        assert outputs + more == [0, 1, 2]
        assert state.run is None and state.queued() == 0
        assert _slots(state) == 0
        assert state.memory == {"last": 2}
        # the key's next input is its fourth: the run takes position 3
        res = core.on_input("k1", 3, state)
        assert res.busy and state.run is not None and state.run.seq == 3
        more, errors = run_to_end(core, state)
        assert errors == [] and res.outputs + more == [3]
        assert _slots(state) == 0
    finally:
        core.close()
