"""Wake-ups per completion in thread mode: one callback applies every key's completed I/O.

In thread mode the operator may switch the keyed state backend's current key inside a
callback (``AgentOperator._pump``). Driven here over the fakes of ``test_operator_costs``
plus a fake backend whose current key is the one keyed state and timers act on, as in
Flink's embedded Python operator.
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

import pytest

pytest.importorskip("pyflink")

from test_operator_costs import (  # noqa: E402
    Backend,
    FakeRuntimeContext,
    Harness,
    Slow,
)

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action  # noqa: E402
from flink_agents_py.flink import AgentOperator  # noqa: E402
from flink_agents_py.plan import AgentPlan  # noqa: E402


class JavaBackend:
    """Flink's keyed state backend as the operator sees it: a current key it may switch."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.switches = 0

    def getCurrentKey(self) -> Any:  # noqa: N802 - Java's name
        return ("java-key", self.backend.key)

    def setCurrentKey(self, key: Any) -> None:  # noqa: N802
        assert isinstance(key, tuple) and key[0] == "java-key", key
        self.switches += 1
        self.backend.key = key[1]


class SwitchableContext(FakeRuntimeContext):
    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self.java = JavaBackend(backend)
        self._keyed_state_backend = type("KeyedStateBackend", (), {})()
        self._keyed_state_backend._keyed_state_backend = self.java


class PumpHarness(Harness):
    """``Harness`` in thread mode; checks that each callback leaves its own key current."""

    def __init__(self, agent: Any, **options: Any) -> None:
        self.backend = Backend()
        from test_operator_costs import Ctx, Timers

        self.timers = Timers(self.backend)
        self.ctx = Ctx(self.backend, self.timers)
        self.rc = SwitchableContext(self.backend)
        self.op = AgentOperator(AgentPlan.from_agent(agent), metrics=False, **options)
        self.op.open(self.rc)
        self.out: list[Any] = []
        self.waiting_seen: list[int] = []

    def feed(self, key: Any, record: Any) -> None:
        super().feed(key, record)
        assert self.backend.key == key, "process_element left another key current"

    def fire(self, t: int, key: Any) -> None:
        super().fire(t, key)
        assert self.backend.key == key, "on_timer left another key current"


@pytest.fixture
def pump_harness():
    made: list[PumpHarness] = []

    def make(agent: Any, **options: Any) -> PumpHarness:
        made.append(PumpHarness(agent, **options))
        return made[-1]

    yield make
    for h in made:
        h.close()


def by_key(out: list[dict[str, Any]]) -> dict[str, list[int]]:
    got: dict[str, list[int]] = collections.defaultdict(list)
    for o in out:
        got[o["key"]].append(o["n"])
    return dict(got)


def test_one_callback_applies_the_completions_of_many_keys(pump_harness):
    keys = 40
    h = pump_harness(Slow(), max_in_flight=keys)
    assert h.op._backend is h.rc.java  # thread mode: keys can be switched
    for n in range(keys):
        h.feed(f"k{n}", {"n": n})
    h.run_timers()
    assert by_key(h.out) == {f"k{n}": [n] for n in range(keys)}
    # every completion applied by the pump, under its own key, in far fewer callbacks
    assert h.op.stats["pumped"] == keys
    assert h.op.stats["timer_callbacks"] <= keys // 4, dict(h.op.stats)
    assert h.op.stats["idle_polls"] == 0
    assert h.rc.java.switches >= keys  # each other key made current for its turn
    # every key idle: its run cleared, its timers deleted, nothing kept in memory
    assert not h.op._run_state.data and not h.timers.event
    assert not h.op._jkeys and not h.op._runs


def test_queued_inputs_of_a_key_run_in_order_through_the_pump(pump_harness):
    h = pump_harness(Slow(), max_in_flight=4)
    for n in range(12):
        h.feed(f"k{n % 3}", {"n": n})
    h.run_timers()
    assert by_key(h.out) == {f"k{i}": [n for n in range(12) if n % 3 == i] for i in range(3)}
    assert all(not q for q in h.op._queue_state.data.values())
    assert not h.op._run_state.data


def test_inputs_arriving_while_calls_complete_are_applied_by_the_element_callback(pump_harness):
    h = pump_harness(Slow(), max_in_flight=8)
    for n in range(8):
        h.feed(f"a{n}", {"n": n})
    time.sleep(0.2)  # the calls complete; no timer fires
    h.feed("b", {"n": 100})  # this element's callback applies the other keys' completions
    assert sorted(o["n"] for o in h.out) == list(range(8))
    h.run_timers()
    assert sorted(o["n"] for o in h.out) == [*range(8), 100]


def test_end_of_input_drains_every_busy_key(pump_harness):
    h = pump_harness(Slow())
    for n in range(12):
        h.feed(f"k{n % 4}", {"n": n})
    h.end()  # processing-time timers are dropped at the end of input
    assert by_key(h.out) == {f"k{i}": [n for n in range(12) if n % 4 == i] for i in range(4)}


def test_a_restored_operator_resumes_busy_keys_from_keyed_state_and_their_timers(pump_harness):
    # a checkpoint holds runs in flight and their keys' timers; a new operator (after a
    # failure) has nothing in memory: each key's own poll timer resumes it from keyed state
    h = pump_harness(Slow(), max_in_flight=8)
    for n in range(6):
        h.feed(f"k{n}", {"n": n})
    assert len(h.op._run_state.data) == 6 and h.out == []
    saved = {name: dict(getattr(h.op, name).data) for name in
             ("_run_state", "_memory_state", "_head_state", "_tail_state")}
    h.op.close()  # the failed attempt: its calls are abandoned
    h.op = AgentOperator(AgentPlan.from_agent(Slow()), metrics=False, max_in_flight=8)
    h.op.open(h.rc)
    for name, data in saved.items():
        getattr(h.op, name).data.update(data)
    h.run_timers(timeout_s=30)
    assert by_key(h.out) == {f"k{n}": [n] for n in range(6)}
    assert not h.op._run_state.data and not h.timers.event


async def step_call(n: int) -> int:
    await asyncio.sleep(0.03)
    return n + 1


class ThreeCalls(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        n = event.input["n"]
        for _ in range(3):  # three durable calls in a row: the key stays busy between them
            n = await ctx.durable_execute_async(step_call, n)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": n}))


def test_a_key_making_calls_in_a_row_is_resumed_by_the_pump_not_by_polls(pump_harness):
    h = pump_harness(ThreeCalls(), max_in_flight=16)
    for n in range(10):
        h.feed(f"k{n}", {"n": n * 10})
    h.run_timers()
    assert by_key(h.out) == {f"k{n}": [n * 10 + 3] for n in range(10)}
    assert h.op.stats["pumped"] == 30  # each completion applied once, by the pump
    assert h.op.stats["idle_polls"] == 0, dict(h.op.stats)
