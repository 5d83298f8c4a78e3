"""A labelled metric keeps a bounded number of labels: names drawn from data cannot grow it.

Event types, model names and tool names label the agent metrics, each label a counter or a
distribution in memory and, on Flink, a metric group of its own; some come from data (a
dynamic event's type taken from a record, a provider's reported model, a tool a model
called). Past ``MAX_LABELS`` distinct labels a metric counts further ones under
``"(other)"``: nothing is lost from the totals, and the groups stop growing.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_metrics_derived import Group

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, Event, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.observability import AgentMetrics, _labels

pytestmark = pytest.mark.timeout(60)


class Sorter(Agent):
    """Sends an event whose type is the record's ``kind`` (nothing listens to it)."""

    @action(InputEvent)
    @staticmethod
    def sort(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(Event(type=event.input["kind"], attributes={"n": event.input["n"]}))
        ctx.send_event(OutputEvent(output=event.input["n"]))


class Hooked(AgentMetrics):
    """Overrides a callback: the core calls the hooks, not the probe."""

    def on_run_started(self, key: Any, run: str, seq: int) -> None:
        super().on_run_started(key, run, seq)


@pytest.mark.parametrize("direct", [True, False], ids=["probe", "hooks"])
def test_event_types_from_records_stop_adding_labels_at_the_bound(monkeypatch, direct):
    monkeypatch.setattr(_labels, "MAX_LABELS", 10)
    registry: dict[str, Any] = {}
    kind = AgentMetrics if direct else Hooked
    m = kind(Group(registry), flush_every=10**6, flush_interval_s=3600)
    assert (m.probe is None) is not direct
    records = [{"key": f"k{i % 4}", "n": i, "kind": f"kind-{i}"} for i in range(40)]
    out = AgentsExecutionEnvironment.local(metrics=False, observer=m).from_list(
        records).apply(Sorter()).run()
    assert sorted(out.outputs) == list(range(40))
    by_type = m.snapshot()["events_processed_by_type"]
    assert len(by_type) == 10 + 1
    assert by_type["InputEvent"] == by_type["OutputEvent"] == 40
    assert "(other)" in by_type and sum(by_type.values()) == 3 * 40  # none lost
    assert m.counters["events_processed"] == 120
    m.flush()
    groups = {name for name in registry if name.startswith("flink_agents.type.")}
    assert len(groups) == 11  # one Flink metric group per kept label, "(other)" included
    assert registry["flink_agents.type.(other).events_processed"].count == by_type["(other)"]


def test_a_model_name_per_call_keeps_the_latency_distributions_bounded(monkeypatch):
    monkeypatch.setattr(_labels, "MAX_LABELS", 5)
    m = AgentMetrics()
    for i in range(30):
        m._observe("chat_call_latency_ms", 12.5, f"model-{i}")
        m._inc("input_tokens", 3, f"model-{i}")
    lat = m.latency["chat_call_latency_ms"]
    assert len(lat) == 6 and lat["(other)"].count == 25
    tokens = m.labelled["input_tokens"]
    assert len(tokens) == 6 and sum(tokens.values()) == 90
