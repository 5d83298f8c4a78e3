"""Observability on the Flink host: metric registration in a (fake) PyFlink metric group, the
per-subtask event log, and one small MiniCluster job (marked ``flink``).

The unit tests drive ``AgentOperator`` directly with fake keyed state, timers and metric
group objects (no JVM), as PyFlink would: ``open(runtime_context)``, ``process_element`` per
record, the end-of-input drain timer, ``close()``.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import pytest
from support import observability_scenario as scenario

from flink_agents_py.observability import (
    EventLog,
    build_traces,
    read_event_log,
    render_text,
)
from flink_agents_py.plan import AgentPlan

pytestmark = pytest.mark.timeout(120)

pytest.importorskip("pyflink")


# -- fakes of PyFlink's runtime objects ------------------------------------------------------
class FakeCounter:
    def __init__(self) -> None:
        self.count = 0

    def inc(self, n: int = 1) -> None:
        self.count += n

    def dec(self, n: int = 1) -> None:
        self.count -= n

    def get_count(self) -> int:
        return self.count


class FakeMeter:
    def __init__(self, span: int) -> None:
        self.span = span
        self.count = 0

    def mark_event(self, n: int = 1) -> None:
        self.count += n

    def get_count(self) -> int:
        return self.count


class FakeDistribution:
    def __init__(self) -> None:
        self.values: list[Any] = []

    def update(self, value: Any) -> None:
        assert isinstance(value, int), "PyFlink distributions take whole numbers"
        self.values.append(value)


class FakeMetricGroup:
    """Records every registration by its full scope (``a.b.name``; key-value groups as
    ``key.value``), like Flink's metric identifiers."""

    def __init__(self, registry: dict[str, Any], scope: str = "") -> None:
        self.registry = registry
        self.scope = scope

    def _name(self, name: str) -> str:
        return f"{self.scope}.{name}" if self.scope else name

    def _register(self, name: str, metric: Any) -> Any:
        full = self._name(name)
        assert full not in self.registry, f"{full} registered twice"
        self.registry[full] = metric
        return metric

    def add_group(self, name: str, extra: str | None = None) -> FakeMetricGroup:
        scope = self._name(name if extra is None else f"{name}.{extra}")
        return FakeMetricGroup(self.registry, scope)

    def counter(self, name: str) -> FakeCounter:
        return self._register(name, FakeCounter())

    def gauge(self, name: str, obj: Any) -> None:
        self._register(name, obj)

    def meter(self, name: str, time_span_in_seconds: int = 60) -> FakeMeter:
        return self._register(name, FakeMeter(time_span_in_seconds))

    def distribution(self, name: str) -> FakeDistribution:
        return self._register(name, FakeDistribution())


class FakeBackend:
    def __init__(self) -> None:
        self.key: Any = None


class FakeValueState:
    def __init__(self, backend: FakeBackend) -> None:
        self.backend = backend
        self.data: dict[Any, Any] = {}

    def value(self) -> Any:
        return self.data.get(self.backend.key)

    def update(self, value: Any) -> None:
        self.data[self.backend.key] = value

    def clear(self) -> None:
        self.data.pop(self.backend.key, None)


class FakeMapState:
    def __init__(self, backend: FakeBackend) -> None:
        self.backend = backend
        self.data: dict[Any, dict[Any, Any]] = collections.defaultdict(dict)

    def put(self, k: Any, v: Any) -> None:
        self.data[self.backend.key][k] = v

    def get(self, k: Any) -> Any:
        return self.data[self.backend.key].get(k)

    def remove(self, k: Any) -> None:
        self.data[self.backend.key].pop(k, None)


class FakeRuntimeContext:
    def __init__(self, backend: FakeBackend, metrics: FakeMetricGroup | None,
                 subtask: int = 0, attempt: int = 0) -> None:
        self.backend = backend
        self.metrics = metrics
        self.subtask = subtask
        self.attempt = attempt

    def get_state(self, descriptor: Any) -> FakeValueState:
        return FakeValueState(self.backend)

    def get_map_state(self, descriptor: Any) -> FakeMapState:
        return FakeMapState(self.backend)

    def get_metrics_group(self) -> FakeMetricGroup:
        if self.metrics is None:
            raise RuntimeError("metrics are disabled")
        return self.metrics

    def get_index_of_this_subtask(self) -> int:
        return self.subtask

    def get_attempt_number(self) -> int:
        return self.attempt


class FakeTimers:
    def __init__(self) -> None:
        self.event_time: set[int] = set()

    def current_processing_time(self) -> int:
        return 0

    def register_processing_time_timer(self, t: int) -> None:
        pass

    def register_event_time_timer(self, t: int) -> None:
        self.event_time.add(t)


class FakeCtx:
    def __init__(self, backend: FakeBackend, timers: FakeTimers) -> None:
        self.backend = backend
        self.timers = timers

    def get_current_key(self) -> Any:
        return self.backend.key

    def timer_service(self) -> FakeTimers:
        return self.timers


def run_operator(op: Any, records: list[dict[str, Any]], metrics: FakeMetricGroup | None,
                 attempt: int = 0) -> list[Any]:
    """Drive ``op`` like PyFlink: open, one element per record, the drain timer, close."""
    from flink_agents_py.flink import DRAIN_TIMESTAMP

    backend, timers = FakeBackend(), FakeTimers()
    op.open(FakeRuntimeContext(backend, metrics, subtask=3, attempt=attempt))
    out: list[Any] = []
    try:
        keys = []
        for r in records:
            backend.key = r["key"]
            keys.append(r["key"])
            out.extend(op.process_element(r, FakeCtx(backend, timers)))
        for k in dict.fromkeys(keys):  # the end of input: the drain timer of every key
            backend.key = k
            out.extend(op.on_timer(DRAIN_TIMESTAMP, FakeCtx(backend, timers)))
    finally:
        op.close()
    return out


SCALARS = ["events_processed", "outputs_emitted", "runs_started", "runs_completed",
           "durable_calls_executed", "durable_calls_replayed", "runs_in_flight",
           "calls_in_flight"]


def test_operator_registers_agent_metrics_in_its_metric_group(tmp_path):
    from flink_agents_py.flink import AgentOperator

    plan = AgentPlan.from_agent(scenario.orchestrator())
    registry: dict[str, Any] = {}
    op = AgentOperator(plan, event_log=EventLog(tmp_path / "events.jsonl"))
    outputs = run_operator(op, scenario.RECORDS, FakeMetricGroup(registry))
    assert sorted(o["answer"] for o in outputs) == [f"done question {i}" for i in range(3)]

    g = "flink_agents"
    # registered at open: scalars, gauges (counters that go both ways), meters, run latency,
    # and the per-action metrics of every action of the plan
    for name in SCALARS:
        assert isinstance(registry[f"{g}.{name}"], FakeCounter), name
    assert isinstance(registry[f"{g}.events_processed_rate"], FakeMeter)
    assert isinstance(registry[f"{g}.runs_completed_rate"], FakeMeter)
    assert isinstance(registry[f"{g}.run_latency_ms"], FakeDistribution)
    for action in plan.actions:
        for name in ("actions_executed", "actions_failed", "actions_reentered"):
            assert f"{g}.action.{action}.{name}" in registry
        assert f"{g}.action.{action}.action_latency_ms" in registry

    def count(name: str) -> int:
        return registry[f"{g}.{name}"].get_count()

    assert count("runs_started") == count("runs_completed") == 3
    assert count("runs_in_flight") == 0 and count("calls_in_flight") == 0
    assert count("outputs_emitted") == 3
    assert count("durable_calls_executed") == 12 and count("durable_calls_replayed") == 0
    assert count("events_processed") == 24 == count("events_processed_rate")
    assert count("action._tool_call_action.actions_executed") == 3
    assert count("action._chat_model_action.actions_executed") == 6
    assert count("type.ToolRequestEvent.events_processed") == 3
    assert count("model.om.chats") == 3
    assert count("model.om.chat_calls") == 6
    assert count("model.om.output_tokens") == 9
    assert count("tool.lookup.tool_calls") == 3
    assert count("subagent.child.subagent_calls") == 3
    assert len(registry[f"{g}.model.om.chat_call_latency_ms"].values) == 6
    assert len(registry[f"{g}.tool.lookup.tool_latency_ms"].values) == 3
    total = registry[f"{g}.subagent.child.subagent_latency_ms_total"].get_count()
    assert total == sum(registry[f"{g}.subagent.child.subagent_latency_ms"].values)
    # the operator's own snapshot says the same
    snap = op.observability.snapshot()
    assert snap["chat_calls"] == {"om": 6} and snap["tool_calls"] == {"lookup": 3}

    # the subtask wrote its own event log file
    records = read_event_log([tmp_path / "events-3.jsonl"])
    assert records[0]["kind"] == "log_opened"
    assert (records[0]["host"], records[0]["subtask"], records[0]["attempt"]) == ("flink", 3, 0)
    assert sum(r["kind"] == "run_completed" for r in records) == 3
    assert "anomalies: none" in render_text(build_traces(records))


def test_operator_without_metrics_or_metric_group(tmp_path):
    from flink_agents_py.flink import AgentOperator

    plan = AgentPlan.from_agent(scenario.orchestrator())
    registry: dict[str, Any] = {}
    op = AgentOperator(plan, metrics=False)
    assert len(run_operator(op, scenario.RECORDS[:1], FakeMetricGroup(registry))) == 1
    assert registry == {}
    # a runtime context without a metric group: the metrics stay local, the job goes on
    op = AgentOperator(plan)
    assert len(run_operator(op, scenario.RECORDS[:1], None)) == 1
    assert op.observability.snapshot()["runs_completed"] == 1


def test_restarted_attempt_appends_to_the_subtask_file(tmp_path):
    from flink_agents_py.flink import AgentOperator

    plan = AgentPlan.from_agent(scenario.orchestrator())
    log = EventLog(tmp_path / "ev-{subtask}.jsonl")
    for attempt in (0, 1):
        run_operator(AgentOperator(plan, event_log=log), scenario.RECORDS[:1],
                     FakeMetricGroup({}), attempt=attempt)
    headers = [r for r in read_event_log([tmp_path / "ev-3.jsonl"]) if r["kind"] == "log_opened"]
    assert [h["attempt"] for h in headers] == [0, 1]


def test_environment_passes_options_to_the_operator(tmp_path):
    from flink_agents_py.flink import FlinkExecutionEnvironment

    env = FlinkExecutionEnvironment(object(), event_log=str(tmp_path / "e.jsonl"), metrics=False)
    assert isinstance(env.event_log, EventLog)
    assert Path(env.event_log.sink.path).is_absolute()
    assert env.metrics is False


# -- a small MiniCluster job ------------------------------------------------------------------
@pytest.mark.flink
@pytest.mark.timeout(300)
def test_minicluster_job_writes_an_event_log_per_subtask_with_metrics_on(tmp_path):
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource
    from support import flink_agents_for_tests as fa

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import create_stream_environment

    env = create_stream_environment(parallelism=2)
    pickled = Types.PICKLED_BYTE_ARRAY()
    items = fa.CHAT_ITEMS
    ds = env.from_source(NumberSequenceSource(0, len(items) - 1),
                         WatermarkStrategy.no_watermarks(), "items").map(
        lambda n: {"key": f"k{n % fa.CHAT_KEYS}", "item": items[n]}, output_type=pickled)
    agents = AgentsExecutionEnvironment.flink(env, metrics=True,
                                              event_log=str(tmp_path / "events.jsonl"))
    applied = agents.from_datastream(ds).apply(fa.tool_chat_agent())
    both = applied.to_datastream().map(lambda o: ("out", o), output_type=pickled).union(
        applied.errors_datastream().map(lambda e: ("err", e), output_type=pickled))
    with both.execute_and_collect("observability") as rows:
        tagged = list(rows)
    outputs = [v for kind, v in tagged if kind == "out"]
    errors = [v for kind, v in tagged if kind == "err"]
    files = sorted(tmp_path.glob("events-*.jsonl"))
    records = read_event_log(files)
    # a run that failed (an error record) and one that never completed look alike in a count
    kinds = collections.Counter(r["kind"] for r in records)
    missing = sorted(set(items) - {o["item"] for o in outputs})
    assert not errors, errors
    assert sorted(o["item"] for o in outputs) == sorted(items), (missing, dict(kinds))
    assert [f.name for f in files] == ["events-0.jsonl", "events-1.jsonl"]  # one per subtask
    for i, f in enumerate(files):
        header = read_event_log([f])[0]
        assert (header["kind"], header["host"], header["subtask"]) == ("log_opened", "flink", i)
    # the subtasks (and any attempt) name one job: its runs are one job's in a trace
    assert len({read_event_log([f])[0]["lineage"] for f in files}) == 1
    assert kinds["run_completed"] == len(items)
    tools = [r["tool"] for r in records if r["kind"] == "call_finished" and r.get("tool")]
    assert sorted(set(tools)) == ["price_of", "stock_of"] and len(tools) == 2 * len(items)
    text = render_text(build_traces(records))
    assert text.count("-> tools: price_of, stock_of") == len(items)
    assert "anomalies: none" in text, text
    json.dumps(records)


def test_task_info_falls_back_to_the_java_task_info():
    from flink_agents_py.flink._task_context import _task_info

    class Info:
        def getIndexOfThisSubtask(self) -> int:
            return 5

        def getAttemptNumber(self) -> int:
            return 2

    class Java:
        def getTaskInfo(self) -> Info:
            return Info()

    class ThreadModeContext:  # PyFlink 2.3 thread mode: the Python getters fail
        _runtime_context = Java()

        def get_index_of_this_subtask(self) -> int:
            raise AttributeError("'pemja.PyJObject' has no attribute 'getIndexOfThisSubtask'")

        def get_attempt_number(self) -> int:
            raise AttributeError("getAttemptNumber")

    assert _task_info(ThreadModeContext()) == (5, 2)
    assert _task_info(FakeRuntimeContext(FakeBackend(), None, subtask=1, attempt=4)) == (1, 4)
    assert _task_info(object()) == (0, 0)
