"""``AgentMetrics`` as a core's only observer: the core reports to its ``MetricsProbe``.

The probe counts events, outputs, runs and actions inline and times them with the metrics'
clock, calling into the metrics' hooks only for durable calls, chat events and keys with
calls or chats open. A
reporter must see the same names and values as through every hook, and other observers
(custom ones, subclasses overriding a hook) must still get every hook.
"""

from __future__ import annotations

import collections
import copy
import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest
from support.metric_counts import metric_counts
from support.observability_scenario import RECORDS, orchestrator

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.observability import AgentMetrics
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore, CompositeObserver, InMemoryKeyState, Observer

pytestmark = pytest.mark.timeout(60)


class Echo(Agent):
    @action(InputEvent)
    @staticmethod
    def echo(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"echo": event.input}))


class Failing(Agent):
    @action(InputEvent)
    @staticmethod
    def boom(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input["n"] % 2:
            raise ValueError("odd")
        ctx.send_event(OutputEvent(output=event.input))


class Recorder(Observer):
    """A custom observer of the old shape: counts every hook it gets."""

    def __init__(self) -> None:
        self.seen: collections.Counter[str] = collections.Counter()

    def event_dispatched(self, key: Any, event: Any, parent: str | None) -> None:
        self.seen["event_dispatched"] += 1

    def action_started(self, key: Any, execution_id: str, action: str, reentered: bool) -> None:
        self.seen["action_started"] += 1

    def action_finished(self, key: Any, execution_id: str, action: str,
                        error: BaseException | None) -> None:
        self.seen["action_finished"] += 1

    def output_emitted(self, key: Any, output: Any, parent: str) -> None:
        self.seen["output_emitted"] += 1


def _no_hook(name: str):
    def hook(*args: Any) -> None:
        raise AssertionError(f"the core called {name} although it reports to the probe")
    return hook


ECHO_RECORDS = [{"key": f"k{i % 3}", "n": i} for i in range(12)]


@pytest.mark.parametrize("agent,records", [
    (Echo, ECHO_RECORDS),
    (Failing, ECHO_RECORDS),
    (orchestrator, RECORDS),  # chats with a tool round, a tool and a sub-agent
], ids=["echo", "failing-actions", "chats-tools-subagents"])
def test_metrics_alone_count_what_every_hookmetric_counts(agent, records):
    alone, beside, recorder = AgentMetrics(), AgentMetrics(), Recorder()
    assert alone.probe is not None
    for name in ("action_started", "action_finished", "output_emitted", "run_started",
                 "run_completed"):
        setattr(alone, name, _no_hook(name))  # the core reports to its probe instead
    AgentsExecutionEnvironment.local(metrics=False, observer=alone).from_list(
        records).apply(agent()).run()
    # beside another observer: no probe of its own, every hook is called, for both observers
    AgentsExecutionEnvironment.local(metrics=False, observer=CompositeObserver(
        beside, recorder)).from_list(records).apply(agent()).run()
    got, want = metric_counts(alone), metric_counts(beside)
    assert got == want
    assert got["runs_completed"] == len(records) and got["events_processed"] > len(records)
    assert recorder.seen["event_dispatched"] == got["events_processed"]
    assert recorder.seen["output_emitted"] == got["outputs_emitted"]
    executed = sum(got["actions_executed"].values())
    assert recorder.seen["action_started"] == recorder.seen["action_finished"] == executed
    if agent is Failing:
        assert got["actions_failed"] == {"boom": 6}
    if agent is orchestrator:
        assert got["chats"] and got["latency_counts"]["chat"]
    assert alone.open_calls() == 0 and not alone._keys  # nothing kept after the runs


def test_a_subclass_overriding_a_hook_gets_every_hook_and_no_probe():
    class Seeing(AgentMetrics):
        def event_dispatched(self, key: Any, event: Any, parent: str | None) -> None:
            self.seen = getattr(self, "seen", 0) + 1
            super().event_dispatched(key, event, parent)

    m = Seeing()
    assert m.probe is None
    AgentsExecutionEnvironment.local(metrics=False, observer=m).from_list(
        ECHO_RECORDS).apply(Echo()).run()
    snap = m.snapshot()
    assert m.seen == snap["events_processed"] == 2 * len(ECHO_RECORDS)
    assert snap["events_processed_by_type"] == {"InputEvent": 12, "OutputEvent": 12}
    assert snap["outputs_emitted"] == 12 and snap["actions_executed"] == {"echo": 12}


_GATE = threading.Event()


def first_step(x: int) -> int:
    return x + 1


def gated_step(x: int) -> int:
    _GATE.wait(10)
    return x * 10


class TwoSteps(Agent):
    @action(InputEvent)
    @staticmethod
    async def work(event: InputEvent, ctx: RunnerContext) -> None:
        a = await ctx.durable_execute_async(first_step, event.input["x"])
        b = await ctx.durable_execute_async(gated_step, a)
        ctx.send_event(OutputEvent(output={"a": a, "b": b}))


def _until(core: AgentCore, state: InMemoryKeyState, done) -> list[Any]:
    res = core.advance("k", state)
    outputs = list(res.outputs)
    while not done(state) and res.busy:
        assert core.wait_for("k", 10)
        res = core.advance("k", state)
        outputs.extend(res.outputs)
    return outputs


def test_an_action_reentered_after_a_restore_is_counted_by_the_probe():
    plan = AgentPlan.from_agent(TwoSteps())
    _GATE.clear()
    old = AgentCore(plan, observer=AgentMetrics())
    old.open()
    state = InMemoryKeyState()
    try:
        old.on_input("k", {"x": 1}, state)
        _until(old, state, lambda s: "1" in next(iter(s.run.inflight.values())).calls)
        snapshot = copy.deepcopy(state)  # c0 recorded, c1 in flight: the "checkpoint"
    finally:
        _GATE.set()
        old.close()
    metrics = AgentMetrics()
    new = AgentCore(plan, observer=metrics)
    new.open()
    try:
        assert _until(new, snapshot, lambda s: s.run is None) == [{"a": 2, "b": 20}]
    finally:
        new.close()
    m = metrics.snapshot()
    assert m["actions_reentered"] == {"work": 1} and m["actions_executed"] == {"work": 1}
    assert m["latency_ms"]["action"]["work"]["count"] == 1
    assert m["durable_calls_replayed"] == 1 and m["durable_calls_executed"] == 1
    assert m["runs_completed"] == 1 and m["runs_in_flight"] == 0 and m["calls_in_flight"] == 0
    assert m["events_processed_by_type"] == {"OutputEvent": 1}  # the input was before


def test_a_clock_replaced_after_construction_times_the_actions():
    ticks = iter(range(10**6))

    def clock() -> float:
        return float(next(ticks))  # one second per read, from 0 (perf_counter is far above)

    m = AgentMetrics()
    m.clock = clock
    AgentsExecutionEnvironment.local(metrics=False, observer=m).from_list(
        ECHO_RECORDS).apply(Echo()).run()
    action = m.snapshot()["latency_ms"]["action"]["echo"]
    assert action["count"] >= len(ECHO_RECORDS) - 1  # at most the first, mixed, is left out
    assert 0 < action["min"] and action["max"] < 10_000  # whole seconds of the new clock


def test_a_user_reads_the_metrics_of_their_own_agent_from_their_own_directory(tmp_path):
    (tmp_path / "my_agent.py").write_text(textwrap.dedent("""
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action

        class Shout(Agent):
            @action(InputEvent)
            @staticmethod
            def shout(event: InputEvent, ctx: RunnerContext) -> None:
                ctx.send_event(OutputEvent(output=str(event.input["text"]).upper()))

        records = [{"key": f"u{i % 2}", "text": f"hi {i}"} for i in range(5)]
        res = AgentsExecutionEnvironment.local().from_list(
            records, key_selector=lambda r: r["key"]).apply(Shout()).run()
        m = res.metrics
        print(m["events_processed"], m["outputs_emitted"], m["runs_completed"],
              m["actions_executed"]["shout"], m["latency_ms"]["action"]["shout"]["count"],
              m["latency_ms"]["run"]["count"], sorted(res.outputs)[0])
    """))
    out = subprocess.run([sys.executable, "my_agent.py"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["10", "5", "5", "5", "5", "5", "HI", "0"]


class _Typed:
    """An event seen by the probe: its type, id and the chat fields the metrics read."""

    def __init__(self, etype: str, id: str, **fields: Any) -> None:  # noqa: A002
        self.type, self.id = etype, id
        self.__dict__.update(fields)


@pytest.mark.parametrize("plain", [False, True], ids=["built-in types", "plain names"])
def test_the_probe_keeps_a_chats_bookkeeping_whether_its_types_are_built_in_or_plain(plain):
    """Chat and tool events count by type name, the built-in objects or plain strings alike.

    The probe tests a built-in type by identity first (no Python ``__eq__`` call); an event
    whose ``type`` is a plain string of the same name must be counted the same.
    """
    from flink_agents_py.api.internal import BuiltinEventType

    def kind(name: str) -> str:
        return str.__str__(name) if plain else BuiltinEventType(name)

    metrics = AgentMetrics()
    probe = metrics.probe
    assert probe is not None and (type(kind("ChatRequestEvent")) is str) is plain
    probe.event_dispatched("k", _Typed(kind("ChatRequestEvent"), "r0/c/e0", model="m"))
    probe.event_dispatched("k", _Typed(kind("ToolRequestEvent"), "r0/c/e1"), parent="r0/c")
    probe.event_dispatched("k", _Typed(kind("ToolResponseEvent"), "r0/t/e0", request_id="x"))
    probe.event_dispatched(
        "k", _Typed(kind("ChatResponseEvent"), "r0/c/e2", request_id="r0/c/e0", error=None)
    )
    got = metric_counts(metrics)
    assert got["chats"] == {"m": 1}
    assert got["latency_counts"]["chat"] == {"m": 1}
    assert sum(got["events_processed_by_type"].values()) == 4


def test_the_observers_compare_no_built_in_event_type_in_python(monkeypatch, tmp_path):
    """The metrics (alone and beside another observer) and the event log read each event's
    type without ``BuiltinEventType.__eq__``: a Python call per comparison, several an event.
    """
    from flink_agents_py.api.internal import BuiltinEventType

    made: collections.Counter[str] = collections.Counter()
    original = BuiltinEventType.__eq__

    def counted(self: Any, other: object) -> bool:
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller.startswith("flink_agents_py.observability"):
            code = sys._getframe(1).f_code
            made[f"{caller}.{code.co_name}"] += 1
        return original(self, other)

    monkeypatch.setattr(BuiltinEventType, "__eq__", counted)
    logged = tmp_path / "events.jsonl"
    metrics = AgentMetrics()
    for env in (
        AgentsExecutionEnvironment.local(metrics=False, observer=metrics),
        AgentsExecutionEnvironment.local(
            metrics=False, observer=CompositeObserver(AgentMetrics(), Recorder()),
            event_log=str(logged)),
    ):
        env.from_list(RECORDS).apply(orchestrator()).run()
    monkeypatch.undo()  # (a snapshot sorts its labels: read once, not per event)
    assert metric_counts(metrics)["chats"]  # the chats were counted
    assert logged.read_text().count('"ChatResponseEvent"') >= len(RECORDS)
    assert not made, f"BuiltinEventType.__eq__ called from {dict(made)}"
