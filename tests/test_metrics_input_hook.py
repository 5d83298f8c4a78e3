"""A run's start and its input event reach the probe in one hook: the same counts as two.

The core reports a run started from a queued input and the dispatch of its ``InputEvent``
through ``Probe.input_dispatched`` (issue 31, part 4: one hook fewer per echo record). The
metrics must count what ``run_started`` and ``event_dispatched`` count, with the run's
latency measured from its start; any other observer must get both hooks, in that order,
before the hooks of the run's actions; a run that waits and completes in a later callback
keeps its start's token.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from support.metric_counts import metric_counts

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.observability import AgentMetrics
from flink_agents_py.observability._metrics_probe import MetricsProbe
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore, CompositeObserver, InMemoryKeyState, Observer

pytestmark = pytest.mark.timeout(60)

_gate = threading.Event()


def _slow(n: int) -> int:
    _gate.wait(10)
    return n


class Echo(Agent):
    """Echo; an input with ``wait`` set waits once for a durable call first."""

    @action(InputEvent)
    @staticmethod
    async def echo(event: InputEvent, ctx: RunnerContext) -> None:
        n = event.input["n"]
        if event.input.get("wait"):
            n = await ctx.durable_execute_async(_slow, n)
        ctx.send_event(OutputEvent(output={"n": n}))


class Seen(Observer):
    """The run and event hooks, in order."""

    def __init__(self) -> None:
        self.hooks: list[tuple[Any, ...]] = []

    def run_started(self, key: Any, seq: int) -> None:
        self.hooks.append(("run", key, seq))

    def event_dispatched(self, key: Any, event: Any, parent: str | None) -> None:
        self.hooks.append(("event", key, event.type, event.id, parent))

    def action_started(self, key: Any, execution_id: str, action: str, reentered: bool) -> None:
        self.hooks.append(("action", key, execution_id))

    def run_completed(self, key: Any, seq: int) -> None:
        self.hooks.append(("done", key, seq))


def _run(observer: Observer) -> list[Any]:
    core = AgentCore(AgentPlan.from_agent(Echo()), observer=observer)
    core.open()
    outputs: list[Any] = []
    try:
        _gate.clear()
        waiting = InMemoryKeyState()
        outputs.extend(core.on_input("w", {"n": 0, "wait": True}, waiting).outputs)
        state = InMemoryKeyState()
        for i in range(3):  # the same key: runs r0, r1, r2
            outputs.extend(core.on_input("k", {"n": i + 1}, state).outputs)
        _gate.set()
        assert core.wait_for("w", 10)
        outputs.extend(core.advance("w", waiting).outputs)  # completes in a later callback
    finally:
        core.close()
    return outputs


def test_the_metrics_count_a_run_and_its_input_event_as_two_hooks_do():
    alone, beside, seen = AgentMetrics(), AgentMetrics(), Seen()
    assert isinstance(alone.probe, MetricsProbe)
    outputs = _run(alone)
    assert outputs == [{"n": 1}, {"n": 2}, {"n": 3}, {"n": 0}]
    assert _run(CompositeObserver(beside, seen)) == outputs
    got, want = metric_counts(alone), metric_counts(beside)
    assert got == want  # through the probe as through every hook
    assert got["runs_started"] == got["runs_completed"] == 4
    assert got["runs_in_flight"] == 0
    assert got["events_processed_by_type"] == {"InputEvent": 4, "OutputEvent": 4}
    assert got["latency_counts"]["run"] == 4  # the waiting run's token was kept
    # another observer: the run, then its input event, then its action
    assert seen.hooks[:3] == [
        ("run", "w", 0),
        ("event", "w", "InputEvent", "r0", None),
        ("action", "w", "r0/echo"),
    ]
    assert seen.hooks[3:8] == [
        ("run", "k", 0),
        ("event", "k", "InputEvent", "r0", None),
        ("action", "k", "r0/echo"),
        ("event", "k", "OutputEvent", "r0/echo/e0", "r0/echo"),
        ("done", "k", 0),
    ]
    assert seen.hooks[-1] == ("done", "w", 0)


def test_the_waiting_run_latency_spans_its_wait():
    metrics = AgentMetrics()
    _run(metrics)
    latency = metrics.snapshot()["latency_ms"]["run"]
    assert latency["count"] == 4
    assert latency["max"] >= latency["min"] >= 0.0
