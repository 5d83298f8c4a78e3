"""A run that returns at once reaches the metrics in one hook: the same counts, two clock reads.

A run whose input triggers one action of the agent's own, which returns at once having sent
only outputs, is finished by the core's straight line (``runtime/core/_at_once.py``). A probe
that overrides ``Probe.run_at_once`` gets its action's end, its outputs and the run's end in
that one call (issue 31, part 4: the agent metrics cost an echo record five hooks and four
clock reads). The metrics must count what the separate hooks count, and time the action and
the run with one reading at the end (both from the run's start); a probe that does not
override it, and every ``Observer``, get the separate hooks as before.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from support.metric_counts import metric_counts

import flink_agents_py
from flink_agents_py.api import (
    Agent,
    ChatRequestEvent,
    Event,
    InputEvent,
    OutputEvent,
    RunnerContext,
    action,
)
from flink_agents_py.observability import AgentMetrics
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore, InMemoryKeyState, Observer, Probe
from flink_agents_py.runtime.core import _at_once

pytestmark = pytest.mark.timeout(60)


class Relayed(Event):
    """An event one of ``Mixed``'s inputs sends on to a second action."""

    n: int


def _sum(a: int, b: int) -> int:
    return a + b


class Mixed(Agent):
    """One action on ``InputEvent``; what it does depends on the input's ``do``."""

    @action(InputEvent)
    @staticmethod
    async def first(event: InputEvent, ctx: RunnerContext) -> None:
        n, do = event.input["n"], event.input.get("do")
        if do == "two":
            ctx.send_event(OutputEvent(output=n))
            ctx.send_event(OutputEvent(output=-n))
        elif do == "none":
            return
        elif do == "relay":
            ctx.send_event(Relayed(n=n))
        elif do == "fail":
            raise ValueError(f"no {n}")
        elif do == "call":
            ctx.send_event(OutputEvent(output=await ctx.durable_execute_async(_sum, n, 1)))
        else:
            ctx.send_event(OutputEvent(output=n))

    @action(Relayed)
    @staticmethod
    def second(event: Relayed, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=event.n * 10))


_INPUTS = [
    {"n": 1},
    {"n": 2, "do": "two"},
    {"n": 3, "do": "none"},
    {"n": 4, "do": "relay"},
    {"n": 5, "do": "fail"},
    {"n": 6, "do": "call"},
    {"n": 7},
]


def _run(observer: Observer, at_once: bool, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    monkeypatch.setattr(_at_once, "AT_ONCE", at_once)
    core = AgentCore(AgentPlan.from_agent(Mixed()), observer=observer)
    core.open()
    got: list[Any] = []
    try:
        for i, record in enumerate(_INPUTS):
            key, state = f"k{i % 3}", InMemoryKeyState()
            res = core.on_input(key, record, state)
            if res.busy:
                assert core.wait_for(key, 10)
                res2 = core.advance(key, state)
                res.outputs.extend(res2.outputs)
                res.errors.extend(res2.errors)
            got.append((res.outputs, [e.action for e in res.errors]))
    finally:
        core.close()
    return got


def test_the_metrics_count_what_the_separate_hooks_count(monkeypatch):
    one, each = AgentMetrics(), AgentMetrics()
    fast = _run(one, True, monkeypatch)
    assert fast == _run(each, False, monkeypatch)
    assert fast[:3] == [([1], []), ([2, -2], []), ([], [])]
    got = metric_counts(one)
    assert got == metric_counts(each)
    assert got["runs_started"] == got["runs_completed"] == 7
    assert got["outputs_emitted"] == 6
    assert got["events_processed_by_type"] == {"InputEvent": 7, "OutputEvent": 6, "Relayed": 1}
    assert got["actions_executed"] == {"first": 7, "second": 1}
    assert got["latency_counts"]["run"] == 7


class _Ticks:
    """A clock that advances one second a reading, counting its readings."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return float(self.reads)


def test_an_echo_run_reads_the_clock_twice_and_its_action_and_run_latency_agree(monkeypatch):
    metrics = AgentMetrics()
    ticks = metrics.clock = _Ticks()
    monkeypatch.setattr(_at_once, "AT_ONCE", True)
    core = AgentCore(AgentPlan.from_agent(Mixed()), observer=metrics)
    core.open()
    try:
        state = InMemoryKeyState()
        # the first goes the general way (the core finds the route of its output then)
        core.on_input("k", {"n": 0}, state)
        before = ticks.reads
        for n in range(1, 41):
            assert core.on_input("k", {"n": n}, state).outputs == [n]
    finally:
        core.close()
    assert ticks.reads - before == 80  # two a run: its start, and its action's and its end
    latency = metrics.snapshot()["latency_ms"]
    assert latency["run"]["count"] == latency["action"]["first"]["count"] == 41
    # measured from the one start to the one end: a tick (1000 ms) each
    for summary in (latency["run"], latency["action"]["first"]):
        assert summary["min"] == summary["p50"] == summary["p95"] == 1000.0


class _Recording(Probe):
    """Each hook, in order (``whole``: it takes an at-once run in one hook)."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    def input_dispatched(self, key: Any, seq: int, event: Any) -> Any:
        self.seen.append(("input", key, seq, event.type))
        return ("token", seq)

    def action_started(self, key: Any, execution_id: str, action: str, reentered: bool) -> Any:
        self.seen.append(("action", execution_id, reentered))
        return ("action", execution_id)

    def action_finished(
        self, key: Any, execution_id: str, action: str, error: BaseException | None, token: Any
    ) -> None:
        self.seen.append(("finished", execution_id, type(error).__name__, token))

    def output_dispatched(self, key: Any, event: Any) -> None:
        self.seen.append(("output", event.output))

    def event_dispatched(self, key: Any, event: Any) -> None:
        self.seen.append(("event", event.type))

    def run_completed(self, key: Any, seq: int, token: Any) -> None:
        self.seen.append(("done", seq, token))


class _Whole(_Recording):
    __slots__ = ()

    def run_at_once(
        self,
        key: Any,
        seq: int,
        event: Any,
        execution_id: str,
        action: str,
        outputs: list[Any],
        token: Any,
    ) -> None:
        self.seen.append(
            (
                "whole",
                key,
                seq,
                event.type,
                execution_id,
                action,
                [o.output for o in outputs],
                token,
            )
        )


class _With(Observer):
    def __init__(self, probe: Probe) -> None:
        self.probe = probe


def _probed(probe: Probe, records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    core = AgentCore(AgentPlan.from_agent(Mixed()), observer=_With(probe))
    core.open()
    try:
        state = InMemoryKeyState()
        core.on_input("k", {"n": 0}, state)  # (the general way: the core finds its routes)
        probe.seen.clear()  # type: ignore[attr-defined]
        for record in records:
            core.on_input("k", record, state)
    finally:
        core.close()
    return probe.seen  # type: ignore[attr-defined,no-any-return]


def test_a_probe_that_takes_the_run_whole_gets_one_hook_and_others_each_hook(monkeypatch):
    monkeypatch.setattr(_at_once, "AT_ONCE", True)
    records = [{"n": 1, "do": "two"}, {"n": 2, "do": "fail"}]
    assert _probed(_Whole(), records) == [
        ("input", "k", 1, "InputEvent"),
        ("whole", "k", 1, "InputEvent", "r1/first", "first", [1, -1], ("token", 1)),
        ("input", "k", 2, "InputEvent"),  # handed over: the run's token is the action's
        ("finished", "r2/first", "ValueError", ("token", 2)),
        ("done", 2, ("token", 2)),
    ]
    assert _probed(_Recording(), records) == [
        ("input", "k", 1, "InputEvent"),
        ("action", "r1/first", False),
        ("finished", "r1/first", "NoneType", ("action", "r1/first")),
        ("output", 1),
        ("output", -1),
        ("done", 1, ("token", 1)),
        ("input", "k", 2, "InputEvent"),
        ("action", "r2/first", False),
        ("finished", "r2/first", "ValueError", ("action", "r2/first")),
        ("done", 2, ("token", 2)),
    ]


def test_the_default_run_at_once_calls_each_hook_in_order():
    probe = _Recording()
    event = InputEvent(input=1)
    out = OutputEvent(output=2)
    probe.run_at_once("k", 3, event, "r3/a", "a", [out], "t")
    assert probe.seen == [
        ("action", "r3/a", False),
        ("finished", "r3/a", "NoneType", ("action", "r3/a")),
        ("output", 2),
        ("done", 3, "t"),
    ]


def test_a_users_echo_module_counts_its_runs_with_two_clock_reads(tmp_path: Path):
    (tmp_path / "my_echo.py").write_text(
        textwrap.dedent("""
        from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


        class MyEcho(Agent):
            @action(InputEvent)
            @staticmethod
            def echo(event: InputEvent, ctx: RunnerContext) -> None:
                ctx.send_event(OutputEvent(output=event.input))
    """)
    )
    (tmp_path / "main.py").write_text(
        textwrap.dedent("""
        from my_echo import MyEcho
        from flink_agents_py.observability import AgentMetrics
        from flink_agents_py.plan import AgentPlan
        from flink_agents_py.runtime import AgentCore, InMemoryKeyState

        reads = [0]

        def clock():
            reads[0] += 1
            return reads[0] / 1000.0

        metrics = AgentMetrics(clock=clock)
        core = AgentCore(AgentPlan.from_agent(MyEcho()), observer=metrics)
        core.open()
        outs = core.on_input("k", 0, InMemoryKeyState()).outputs  # (finds its routes)
        before = reads[0]
        for n in range(1, 5):
            outs += core.on_input(f"k{n % 2}", n, InMemoryKeyState()).outputs
        core.close()
        snap = metrics.snapshot()
        run = snap["latency_ms"]["run"]
        print(outs, snap["runs_completed"], snap["outputs_emitted"], run["count"],
              run["min"], run["p50"], reads[0] - before)
    """)
    )
    root = Path(flink_agents_py.__file__).parents[1]  # the package this process tests
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN"))}
    env["PYTHONPATH"] = str(root)
    proc = subprocess.run(
        [sys.executable, "main.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["[0,", "1,", "2,", "3,", "4]", "5", "5", "5", "1.0", "1.0", "8"]


def _counted(whole: bool, outputs: list[Any], tracked_input: bool) -> dict[str, Any]:
    """A run reported through ``MetricsProbe.run_at_once`` (``whole``) or each hook."""
    metrics = AgentMetrics()
    metrics.clock = _Ticks()
    probe = metrics.probe
    assert probe is not None
    token = probe.input_dispatched("k", 0, InputEvent(input=1, id="r0"))
    if tracked_input:  # the key has a track when its run ends (a chat event's bookkeeping)
        probe.event_dispatched("k", ChatRequestEvent(id="r0/x", model="m", messages=[]))
    assert ("k" in metrics._keys) is tracked_input
    if whole:
        probe.run_at_once("k", 0, InputEvent(input=1), "r0/a", "a", outputs, token)
    else:
        started = token  # (the action starts with its run)
        probe.action_finished("k", "r0/a", "a", None, started)
        for output in outputs:
            probe.output_dispatched("k", output)
        probe.run_completed("k", 0, token)
    return metric_counts(metrics)


@pytest.mark.parametrize("tracked_input", [False, True])
def test_the_metrics_one_hook_keeps_a_chat_typed_outputs_and_a_tracked_keys_bookkeeping(
    monkeypatch, tracked_input
):
    """An ``OutputEvent`` typed as a chat event, a key with a track: counted as each hook."""
    from flink_agents_py.api import _events

    registry = _events._REGISTRY  # the class below takes the type over: given back after
    monkeypatch.setitem(registry, "ChatRequestEvent", registry["ChatRequestEvent"])

    class Odd(OutputEvent):
        EVENT_TYPE = "ChatRequestEvent"

    outputs = [OutputEvent(output=1, id="r0/a/e0"), Odd(output=2, id="r0/a/e1")]
    got = _counted(True, outputs, tracked_input)
    assert got == _counted(False, outputs, tracked_input)
    assert got["chats"] == ({"?": 1, "m": 1} if tracked_input else {"?": 1})
    assert got["outputs_emitted"] == 2 and got["runs_completed"] == 1
    assert got["latency_counts"]["run"] == 1 and got["latency_counts"]["action"] == {"a": 1}
