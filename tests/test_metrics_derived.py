"""Metrics the hooks no longer count per record, and the push's triggers, stay right.

``events_processed`` is the sum of ``events_processed{type}`` and ``runs_in_flight`` is the
runs started here less those of them completed: both are worked out when ``counters`` is
read (a snapshot, a push to Flink) instead of being counted at every event and run. A push
to Flink is due after ``flush_every`` completed runs or ``flush_interval_s`` seconds, kept
on the probe as the run count and the clock reading at which it falls due.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.observability import AgentMetrics, Distribution

pytestmark = pytest.mark.timeout(60)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Group:
    """A PyFlink metric group's shape (``bench._op_harness.FakeMetricGroup`` is the same)."""

    def __init__(
        self, registry: dict[str, Any], thread_mode: bool = False, scope: str = ""
    ) -> None:
        self.registry, self.thread_mode, self.scope = registry, thread_mode, scope

    def add_group(self, name: str, extra: str | None = None) -> Group:
        full = ".".join(p for p in (self.scope, name, extra) if p)
        return Group(self.registry, self.thread_mode, full)

    def _add(self, name: str, metric: Any) -> Any:
        self.registry[f"{self.scope}.{name}"] = metric
        return metric

    def counter(self, name: str) -> Any:
        return self._add(name, Counter())

    def meter(self, name: str, time_span_in_seconds: int = 60) -> Any:
        return self._add(name, Counter())

    def distribution(self, name: str) -> Any:
        return self._add(name, ThreadModeDistribution() if self.thread_mode else Counter())


class Counter:
    def __init__(self) -> None:
        self.count = 0

    def inc(self, n: int = 1) -> None:
        self.count += n

    def mark_event(self, n: int = 1) -> None:
        self.count += n

    def update(self, value: int) -> None:
        self.count += 1


class ThreadModeDistribution(Counter):
    """Looks like PyFlink's thread-mode distribution (which reports its last value only)."""


ThreadModeDistribution.__module__ = "pyflink.fn_execution.metrics.embedded.distribution_impl"


class Echo(Agent):
    @action(InputEvent)
    @staticmethod
    def echo(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"echo": event.input}))


def _input() -> InputEvent:
    return InputEvent(input={"n": 1})


def test_a_restored_run_completing_leaves_the_runs_started_here_in_flight():
    # two runs start here; a run restored from a checkpoint (never counted as started, so
    # no token) completes first: both runs started here are still in flight
    m = AgentMetrics()
    probe = m.probe
    assert probe is not None
    a, b = probe.input_dispatched("a", 1, _input()), probe.input_dispatched("b", 1, _input())
    assert m.counters["runs_in_flight"] == 2
    probe.run_completed("restored", 7, None)
    assert m.counters["runs_in_flight"] == 2 and m.counters["runs_completed"] == 1
    probe.run_completed("a", 1, a)
    assert m.counters["runs_in_flight"] == 1
    probe.run_completed("b", 1, b)
    snap = m.snapshot()
    assert snap["runs_in_flight"] == 0 and snap["runs_completed"] == 3
    assert snap["runs_started"] == 2 and snap["latency_ms"]["run"]["count"] == 2


def test_the_hooks_path_works_in_flight_runs_out_alike():
    class Seeing(AgentMetrics):  # overrides a callback: the hooks, not the probe
        def on_run_started(self, key: Any, run: str, seq: int) -> None:
            super().on_run_started(key, run, seq)

    m = Seeing()
    assert m.probe is None
    m.run_started("a", 1)
    m.run_started("b", 1)
    m.run_completed("restored", 7)  # its start not seen here
    assert m.counters["runs_in_flight"] == 2
    m.run_completed("a", 1)
    m.run_completed("b", 1)
    assert m.snapshot()["runs_in_flight"] == 0


def test_events_processed_is_the_sum_by_type_locally_and_on_flink():
    registry: dict[str, Any] = {}
    m = AgentMetrics(Group(registry), flush_every=10**6, flush_interval_s=3600)
    records = [{"key": f"k{i % 3}", "n": i} for i in range(9)]
    AgentsExecutionEnvironment.local(metrics=False, observer=m).from_list(records).apply(
        Echo()
    ).run()
    assert m.counters["events_processed"] == 18
    assert m.counters["outputs_emitted"] == 9 and m.counters["runs_in_flight"] == 0
    assert registry["flink_agents.events_processed"].count == 0  # not pushed yet
    m.flush()
    assert registry["flink_agents.events_processed"].count == 18
    assert registry["flink_agents.type.InputEvent.events_processed"].count == 9
    assert registry["flink_agents.events_processed_rate"].count == 18
    assert registry["flink_agents.runs_in_flight"].count == 0
    assert registry["flink_agents.runs_completed"].count == 9


def test_a_push_is_due_after_flush_every_runs_or_the_interval():
    registry: dict[str, Any] = {}
    clock = Clock()
    m = AgentMetrics(Group(registry), clock=clock, flush_every=3, flush_interval_s=10)
    probe = m.probe
    assert probe is not None
    completed = registry["flink_agents.runs_completed"]

    def run(key: str, restored: bool = False) -> None:
        token = probe.input_dispatched(key, 1, _input()) if not restored else None
        probe.run_completed(key, 1, token)

    run("a")
    run("b", restored=True)  # a restored run's completion counts towards the batch too
    assert completed.count == 0
    run("c")
    assert completed.count == 3  # the third run pushed
    run("d")
    clock.now += 9.9
    run("e")
    assert completed.count == 3
    clock.now += 0.1  # the interval since the last push
    run("f")
    assert completed.count == 6
    assert registry["flink_agents.runs_in_flight"].count == 0
    assert registry["flink_agents.events_processed"].count == 5  # the restored run had none


def test_a_users_module_reads_the_worked_out_metrics(tmp_path):
    # the way a user runs it: their own agent module, run locally, metrics read off the result
    (tmp_path / "my_echo.py").write_text(
        textwrap.dedent("""
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action

        class Echo(Agent):
            @action(InputEvent)
            @staticmethod
            def echo(event: InputEvent, ctx: RunnerContext) -> None:
                ctx.send_event(OutputEvent(output=event.input))

        records = [{"key": k, "n": i} for i, k in enumerate("aabbc")]
        m = AgentsExecutionEnvironment.local().from_list(records).apply(Echo()).run().metrics
        print(m["events_processed"], m["runs_in_flight"], m["runs_started"],
              m["events_processed_by_type"])
    """)
    )
    proc = subprocess.run(
        [sys.executable, "my_echo.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split(None, 3) == ["10", "0", "5", "{'InputEvent': 5, 'OutputEvent': 5}\n"]


def test_a_fold_of_values_already_pushed_does_not_push_again():
    pushes: list[int] = []
    d = Distribution(window=4)
    d.before_fold = lambda: pushes.append(d.count)
    for v in range(8):  # the 8th update folds the 4 oldest, none pushed yet: a push first
        d.update(float(v))
    assert pushes == [8] and d.count == 8
    d.pushed = 8  # (what a push records)
    for v in range(8, 12):  # folds 4 more, all pushed: no push
        d.update(float(v))
    assert pushes == [8]
    for v in range(12, 16):  # folds values 8..11, not pushed: a push first
        d.update(float(v))
    assert pushes == [8, 16]
    assert d.count == 16 and d.total == sum(range(16)) and (d.min, d.max) == (0, 15)


@pytest.mark.parametrize("thread_mode", [True, False], ids=["thread-mode", "every-value"])
def test_flink_gets_one_push_per_batch_of_runs_and_every_value_in_its_totals(thread_mode):
    registry: dict[str, Any] = {}
    m = AgentMetrics(Group(registry, thread_mode), flush_every=1000, flush_interval_s=3600)
    pushes = 0
    flush = m.flush

    def counted() -> None:
        nonlocal pushes
        pushes += 1
        flush()

    m.flush = counted  # type: ignore[method-assign]
    for d in m.latency["run_latency_ms"].values():
        d.before_fold = counted
    probe = m.probe
    assert probe is not None
    clock = Clock()
    m.clock = clock
    for i in range(5000):  # a distribution folds every 2,048 values: pushed already
        token = probe.input_dispatched("k", i, _input())
        clock.now += 0.0014 + (i % 5) * 0.0002  # 1.4-2.2 ms
        probe.run_completed("k", i, token)
    assert pushes == 5
    m.flush()
    runs = m.latency["run_latency_ms"][None]
    # thread mode: the last value of each push; else every value, none lost to a fold
    assert registry["flink_agents.run_latency_ms"].count == (5 if thread_mode else 5000)
    want = sum(round((0.0014 + (i % 5) * 0.0002) * 1000) for i in range(5000))
    assert registry["flink_agents.run_latency_ms_total"].count == want  # each value rounded
    assert runs.count == 5000


@pytest.mark.parametrize("n", [3, 63, 64, 1000])
def test_whole_sum_rounds_each_value_half_to_even_as_round_does(n):
    from flink_agents_py.observability._flink_mirror import whole_sum

    ties = [0.5, 1.5, 2.5, -0.5, -1.5, 0.49999999999999994, 2.675, 1e-9, 7.0]
    values = [ties[i % len(ties)] + (i // len(ties)) * 0.25 for i in range(n)]
    assert whole_sum(values) == sum(map(round, values))
    assert whole_sum([]) == 0
