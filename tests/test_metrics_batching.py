"""Agent metrics reach a PyFlink metric group in batches: every value is counted in Python and
pushed after ``flush_every`` completed runs or ``flush_interval_s`` seconds, and at close, with
the values per-update calls would have left (no call into Java per event).

Fake metric groups stand in for PyFlink's (duck-typed, as the operator uses them); they count
every call, as each is a call into Java in thread mode.
"""

from __future__ import annotations

from typing import Any

import pytest
from support import observability_scenario as scenario

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.observability import AgentMetrics, HostObservability

pytestmark = pytest.mark.timeout(60)


class Calls:
    """Counts calls made on the fake metrics (each one a call into Java in thread mode)."""

    n = 0


class FakeCounter:
    def __init__(self) -> None:
        self.count = 0

    def inc(self, n: int = 1) -> None:
        Calls.n += 1
        self.count += n


class FakeMeter:
    def __init__(self) -> None:
        self.count = 0

    def mark_event(self, n: int = 1) -> None:
        Calls.n += 1
        self.count += n


class FakeDistribution:
    def __init__(self) -> None:
        self.values: list[int] = []

    def update(self, value: int) -> None:
        Calls.n += 1
        assert isinstance(value, int), "PyFlink distributions take whole numbers"
        self.values.append(value)


class ThreadModeDistribution(FakeDistribution):
    """Looks like PyFlink's thread-mode distribution, which reports its last value only."""


ThreadModeDistribution.__module__ = "pyflink.fn_execution.metrics.embedded.distribution_impl"


class ProcessModeDistribution(FakeDistribution):
    """Looks like PyFlink's process-mode (Beam) distribution."""


ProcessModeDistribution.__module__ = "pyflink.fn_execution.metrics.process.distribution_impl"


class FakeGroup:
    """Registers metrics by full scope (``a.b.name``; key-value groups as ``key.value``)."""

    def __init__(self, registry: dict[str, Any], scope: str = "",
                 distribution: type[FakeDistribution] = FakeDistribution) -> None:
        self.registry, self.scope, self.dist = registry, scope, distribution

    def _add(self, name: str, metric: Any) -> Any:
        full = f"{self.scope}.{name}" if self.scope else name
        assert full not in self.registry, f"{full} registered twice"
        self.registry[full] = metric
        return metric

    def add_group(self, name: str, extra: str | None = None) -> FakeGroup:
        scope = ".".join(p for p in (self.scope, name, extra) if p)
        return FakeGroup(self.registry, scope, self.dist)

    def counter(self, name: str) -> FakeCounter:
        return self._add(name, FakeCounter())

    def meter(self, name: str, span: int = 60) -> FakeMeter:
        return self._add(name, FakeMeter())

    def distribution(self, name: str) -> FakeDistribution:
        return self._add(name, self.dist())


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _scalar(registry: dict[str, Any], name: str) -> int:
    return int(registry[f"flink_agents.{name}"].count)


def _labelled_name(name: str) -> str:
    return "events_processed" if name == "events_processed_by_type" else name


LABEL_KEYS = {"events_processed_by_type": "type", "actions_executed": "action",
              "actions_failed": "action", "actions_reentered": "action", "chats": "model",
              "chats_failed": "model", "chat_calls": "model", "chat_calls_failed": "model",
              "input_tokens": "model", "output_tokens": "model", "tool_calls": "tool",
              "tool_calls_failed": "tool", "subagent_calls": "subagent",
              "subagent_calls_failed": "subagent"}


def assert_flink_equals_local(metrics: AgentMetrics, registry: dict[str, Any],
                              last_only: bool = False) -> None:
    """What a reporter reads from ``registry`` is what per-update calls would have left."""
    for name, value in metrics.counters.items():
        assert _scalar(registry, name) == value, name
    assert _scalar(registry, "events_processed_rate") == metrics.counters["events_processed"]
    assert _scalar(registry, "runs_completed_rate") == metrics.counters["runs_completed"]
    for name, by in metrics.labelled.items():
        for label, value in by.items():
            got = registry.get(f"flink_agents.{LABEL_KEYS[name]}.{label}.{_labelled_name(name)}")
            assert got is not None and got.count == value, (name, label)
    label_keys = {"run_latency_ms": None, "action_latency_ms": "action",
                  "chat_latency_ms": "model", "chat_call_latency_ms": "model",
                  "tool_latency_ms": "tool", "subagent_latency_ms": "subagent"}
    for name, dists in metrics.latency.items():
        for label, d in dists.items():
            scope = "flink_agents" + (f".{label_keys[name]}.{label}" if label else "")
            want = [int(round(v)) for v in d.newest(d.count)]  # all: fewer than the window
            flink = registry[f"{scope}.{name}"]
            assert flink.values == (want[-1:] if last_only else want), (name, label)
            assert registry[f"{scope}.{name}_total"].count == sum(want), (name, label)


def _run_scenario(metrics: AgentMetrics) -> Any:
    result = (AgentsExecutionEnvironment.local(metrics=False, observer=metrics)
              .from_list(scenario.RECORDS).apply(scenario.orchestrator()).run())
    assert result.errors == [] and len(result.outputs) == len(scenario.RECORDS)
    return result


@pytest.mark.parametrize("dist", [FakeDistribution, ThreadModeDistribution])
def test_a_flush_leaves_the_values_per_update_calls_would(dist: type[FakeDistribution]) -> None:
    registry: dict[str, Any] = {}
    metrics = AgentMetrics(FakeGroup(registry, distribution=dist), actions=["ask"],
                           flush_every=10_000, flush_interval_s=3600)
    _run_scenario(metrics)
    assert _scalar(registry, "runs_completed") == 0  # nothing pushed yet: batched
    metrics.flush()
    assert metrics.counters["runs_completed"] == 3 and metrics.labelled["chat_calls"] == {"om": 6}
    assert_flink_equals_local(metrics, registry, last_only=dist is ThreadModeDistribution)
    # a second flush with nothing new calls nothing
    before = Calls.n
    metrics.flush()
    assert Calls.n == before


def test_pushed_every_n_runs_every_t_seconds_and_at_close() -> None:
    registry: dict[str, Any] = {}
    clock = Clock()
    obs = HostObservability(flink_group=FakeGroup(registry), flush_every=3,
                            flush_interval_s=0.5)
    metrics = obs.metrics
    assert metrics is not None and obs.observer is metrics  # one observer: called directly
    metrics.clock = clock
    metrics.flush()  # start the interval at the fake clock's 0

    def run(i: int) -> None:
        metrics.on_run_started(f"k{i}", f"r{i}", i)
        clock.t += 0.01
        metrics.on_run_completed(f"k{i}", f"r{i}", i, 10.0)

    run(1)
    run(2)
    assert _scalar(registry, "runs_completed") == 0
    run(3)  # the third completed run: pushed
    assert _scalar(registry, "runs_completed") == 3 == _scalar(registry, "runs_started")
    assert registry["flink_agents.run_latency_ms"].values == [10, 10, 10]
    run(4)
    assert _scalar(registry, "runs_completed") == 3
    clock.t += 0.5  # the interval passed: the next check pushes
    metrics.on_run_started("k5", "r5", 5)
    assert _scalar(registry, "runs_completed") == 4
    assert _scalar(registry, "runs_in_flight") == 1 and _scalar(registry, "runs_started") == 5
    metrics.on_run_completed("k5", "r5", 5, 7.4)
    assert _scalar(registry, "runs_in_flight") == 1  # not yet...
    obs.close()  # ... until the host closes
    assert _scalar(registry, "runs_in_flight") == 0 and _scalar(registry, "runs_completed") == 5
    assert registry["flink_agents.run_latency_ms"].values == [10, 10, 10, 10, 7]
    assert registry["flink_agents.run_latency_ms_total"].count == 47
    assert_flink_equals_local(metrics, registry)


def test_no_call_into_java_per_record() -> None:
    registry: dict[str, Any] = {}
    metrics = AgentMetrics(FakeGroup(registry, distribution=ThreadModeDistribution),
                           flush_every=1000, flush_interval_s=3600)
    Calls.n = 0
    for i in range(5000):
        key = f"k{i % 100}"
        metrics.on_run_started(key, f"r{i}", i)
        metrics.on_action_finished(key, f"r{i}/a0", "echo", f"r{i}", None, 0.02)
        metrics.on_output(key, {"n": i}, f"r{i}/a0")
        metrics.on_run_completed(key, f"r{i}", i, 0.05)
    # a push per 1000 runs (and one before a distribution folds its oldest values), a
    # handful of metrics each; per-update calls would be ~7 per record
    pushes = len(registry["flink_agents.action.echo.action_latency_ms"].values)  # last of each
    assert pushes <= 6 and Calls.n <= pushes * 12, (pushes, Calls.n)
    metrics.flush()
    assert _scalar(registry, "runs_completed") == 5000 == _scalar(registry, "outputs_emitted")
    assert registry["flink_agents.action.echo.actions_executed"].count == 5000


def test_more_values_than_the_window_between_pushes_are_all_pushed() -> None:
    registry: dict[str, Any] = {}
    metrics = AgentMetrics(FakeGroup(registry), flush_every=10**6, flush_interval_s=3600)
    for i in range(5000):
        metrics.on_run_started("k", f"r{i}", i)
        metrics.on_run_completed("k", f"r{i}", i, i % 7 + 0.4)
    metrics.flush()
    assert registry["flink_agents.run_latency_ms"].values == [i % 7 for i in range(5000)]
    assert registry["flink_agents.run_latency_ms_total"].count == sum(i % 7 for i in range(5000))
    summary = metrics.snapshot()["latency_ms"]["run"]
    assert summary["count"] == 5000 and summary["min"] == 0.4 and summary["max"] == 6.4


def test_process_mode_pushes_at_every_check() -> None:
    """Beam batches process-mode metrics per bundle itself, and a push at close (outside a
    bundle) would be lost: there every check pushes."""
    registry: dict[str, Any] = {}
    metrics = AgentMetrics(FakeGroup(registry, distribution=ProcessModeDistribution))
    metrics.on_run_started("k", "r1", 1)
    assert _scalar(registry, "runs_started") == 1
    metrics.on_run_completed("k", "r1", 1, 3.0)
    assert _scalar(registry, "runs_completed") == 1
    assert registry["flink_agents.run_latency_ms"].values == [3]


def test_bad_flush_settings_are_named() -> None:
    with pytest.raises(ValueError, match="flush_every"):
        AgentMetrics(flush_every=0)


def test_a_failing_push_never_fails_the_agent_and_is_retried(caplog) -> None:
    registry: dict[str, Any] = {}
    metrics = AgentMetrics(FakeGroup(registry), flush_every=1)
    counter = registry["flink_agents.runs_started"]
    broken = [True]

    def inc(n: int = 1) -> None:
        if broken[0]:
            raise RuntimeError("java.lang.IllegalStateException")
        counter.count += n

    counter.inc = inc
    metrics.on_run_started("k", "r1", 1)
    metrics.on_run_completed("k", "r1", 1, 1.0)  # both pushes fail: logged once
    assert sum("pushing agent metrics" in r.message for r in caplog.records) == 1
    broken[0] = False
    metrics.on_run_started("k", "r2", 2)
    metrics.on_run_completed("k", "r2", 2, 1.0)  # the next push
    assert counter.count == 2  # with what was counted while pushes failed


def test_metrics_hooks_are_called_directly_unless_a_subclass_overrides_one():
    from flink_agents_py.observability import AgentMetrics

    class Counting(AgentMetrics):
        def on_run_started(self, key, run, seq):  # a subclass callback: the full path
            super().on_run_started(key, run, seq)
            self.seen = getattr(self, "seen", 0) + 1

    class Raising(AgentMetrics):
        def run_started(self, key, seq):  # a subclass core hook may raise: wrap it
            raise RuntimeError("boom")

    plain, counting, raising = AgentMetrics(), Counting(), Raising()
    assert plain.hooks_never_raise and not raising.hooks_never_raise
    for m in (plain, counting):
        m.run_started("k", 0)
        m.action_started("k", "r0/in/ask", "ask", False)
        m.action_finished("k", "r0/in/ask", "ask", None)
        m.run_completed("k", 0)
    assert plain.counters == counting.counters and counting.seen == 1
    assert plain.counters["runs_started"] == 1 and plain.counters["runs_in_flight"] == 0
