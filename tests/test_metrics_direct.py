"""``AgentMetrics``' direct hooks count exactly what the ``TrackingObserver`` callbacks count.

``AgentMetrics`` handles the core's hooks itself (no ``CallInfo`` per durable call, no
callback per hook); a subclass overriding a callback gets the full ``TrackingObserver`` path.
Both must give a reporter the same names and values: same counters and labels, and the same
number of latency values per distribution (the values themselves are timings).
"""

from __future__ import annotations

from typing import Any

import pytest
from support import subagent_tool_agents as sa
from support.metric_counts import metric_counts
from support.observability_scenario import RECORDS, orchestrator

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.observability import AgentMetrics

pytestmark = pytest.mark.timeout(60)


class ViaCallbacks(AgentMetrics):
    """Overrides a callback, so every hook takes ``TrackingObserver``'s path."""

    def on_output(self, key: Any, output: Any, parent: str) -> None:
        super().on_output(key, output, parent)


def slow_side_effect(n: int) -> int:
    import time

    time.sleep(0.02)
    return n


class FireAndForget(Agent):
    @action(InputEvent)
    @staticmethod
    def go(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.durable_execute_async(slow_side_effect, 1)  # never awaited: abandoned
        ctx.send_event(OutputEvent(output="sent"))


@pytest.mark.parametrize("agent,records", [
    (orchestrator, RECORDS),  # chats with a tool round, a tool and a sub-agent
    (lambda: orchestrator(child=sa.Picky()), RECORDS[:2]),  # failed delegations
    (FireAndForget, [{"key": "a"}, {"key": "b"}]),  # abandoned calls
], ids=["chats-tools-subagents", "failures", "abandoned"])
def test_direct_hooks_count_what_the_callbacks_count(agent, records):
    direct, full = AgentMetrics(), ViaCallbacks()
    assert direct._direct and not full._direct
    for m in (direct, full):
        AgentsExecutionEnvironment.local(metrics=False, observer=m).from_list(
            records).apply(agent()).run()
    got, want = metric_counts(direct), metric_counts(full)
    assert got == want
    assert got["runs_completed"] == len(records) and got["calls_in_flight"] == 0
    assert got["durable_calls_executed"] > 0
    assert direct.open_calls() == 0 and not direct._keys  # nothing kept after the runs


def test_a_chat_model_call_is_labelled_by_its_chat_setup_and_counts_tokens():
    m = AgentMetrics()
    AgentsExecutionEnvironment.local(metrics=False, observer=m).from_list(
        RECORDS).apply(orchestrator()).run()
    snap = m.snapshot()
    assert set(snap["chat_calls"]) == set(snap["chats"]) == set(snap["latency_ms"]["chat"])
    assert set(snap["latency_ms"]["chat_call"]) == set(snap["chat_calls"])
