"""Spend budgets per key (issue 30, part 2), on the local runner.

A setup's ``budget`` counts each key's tokens and cost in the key's keyed state (short-term
memory ``_budget.<setup>``); when it is spent the policy decides: fail the chat with
``BudgetExceededError``, switch to a fallback setup, or hold the key's run until the window
ends. Each decision is recorded with the model call and replays the same (checked by the
crash checker, which restores the state through its JSON form at every point).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from support.probes import count
from test_flow_control import asker, run

from flink_agents_py.api import (
    Budget,
    BudgetExceededError,
    ChatMessage,
    ChatModelConnection,
    ChatResponse,
    MessageRole,
    ModelPrice,
    ResourceDescriptor,
    TokenUsage,
)
from flink_agents_py.testing import check_replay_safety

pytestmark = pytest.mark.timeout(120)


class Metered(ChatModelConnection):
    """Answers ``<reply>: <question>`` and reports 10 input and 5 output tokens."""

    label: str = "metered"
    reply: str = "ok"

    def chat(self, messages, **kwargs) -> ChatResponse:
        count(self.label)
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT,
                                                content=f"{self.reply}: {messages[-1].content}"),
                            usage=TokenUsage(input_tokens=10, output_tokens=5))


def budget_agent(budget: Budget):
    return asker({"conn": ResourceDescriptor(Metered, label="big", reply="big"),
                  "cheap_conn": ResourceDescriptor(Metered, label="cheap", reply="cheap")},
                 {"model": {"connection": "conn", "budget": budget},
                  "cheap": {"connection": "cheap_conn"}})


def by_key(outputs: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return [o for o in outputs if o["key"] == key]


def test_a_spent_budget_fails_the_chat_with_budget_exceeded_error(probes):
    records = [{"key": "a", "q": i} for i in range(3)] + [{"key": "b", "q": 0}]
    res = run(budget_agent(Budget(max_tokens=30)), records)
    assert res.errors == []
    a = by_key(res.outputs, "a")
    assert [o["content"] for o in a] == ["big: 0", "big: 1", None]
    assert a[2]["error"] == ("BudgetExceededError: the budget of chat model 'model' for key "
                             "'a' is spent: tokens 30 of 30")
    assert a[1]["metadata"]["budget"]["spent"]["input"] == 20
    assert a[1]["metadata"]["budget"]["spent"]["output"] == 10
    [b] = by_key(res.outputs, "b")  # another key has a budget of its own
    assert b["content"] == "big: 0" and b["metadata"]["budget"]["decision"] == "within"
    assert probes["big"] == 3  # the refused chat never reached the model


def test_cost_by_the_price_table_and_a_fallback_model_when_spent(probes):
    budget = Budget(max_cost=0.002, on_exceeded="fallback", fallback="cheap",
                    prices={"model": ModelPrice(input_per_million=100, output_per_million=200)})
    res = run(budget_agent(budget), [{"key": "a", "q": i} for i in range(3)])
    a = res.outputs
    # each big call costs (10 * 100 + 5 * 200) / 1e6 = 0.002
    assert [o["content"] for o in a] == ["big: 0", "cheap: 1", "cheap: 2"]
    assert [o["metadata"]["budget"]["decision"] for o in a] == ["within", "fallback", "fallback"]
    assert a[1]["metadata"]["budget"]["reached"] == "cost 0.002 of 0.002"
    assert a[2]["metadata"]["budget"]["spent"]["cost"] == pytest.approx(0.002)  # cheap is free
    assert a[2]["metadata"]["budget"]["spent"]["input"] == 30  # its tokens count
    assert probes["big"] == 1 and probes["cheap"] == 2


def test_the_event_log_shows_each_keys_spend_and_decision(probes):
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.observability import EventLog, MemorySink

    sink = MemorySink()
    agent = budget_agent(Budget(max_tokens=15, on_exceeded="fallback", fallback="cheap"))
    (AgentsExecutionEnvironment.local(event_log=EventLog(sink=sink))
     .from_list([{"key": "a", "q": 0}, {"key": "a", "q": 1}, {"key": "b", "q": 0}])
     .apply(agent).run())
    calls = [r for r in sink.records
             if r["kind"] == "call_finished" and r.get("call_kind") == "chat_model"]
    seen = sorted((r["key"], r["budget"]["decision"], r["budget"]["spent"]["input"],
                   r.get("model_setup")) for r in calls)
    assert seen == [("a", "fallback", 20, "cheap"), ("a", "within", 10, None),
                    ("b", "within", 10, None)]


def test_hold_waits_for_the_window_to_end(probes):
    budget = Budget(max_input_tokens=10, window_s=0.6, on_exceeded="hold")
    t0 = time.monotonic()
    res = run(budget_agent(budget), [{"key": "a", "q": 0}, {"key": "a", "q": 1},
                                     {"key": "b", "q": 0}])
    a = by_key(res.outputs, "a")
    assert [o["content"] for o in a] == ["big: 0", "big: 1"]
    assert a[1]["metadata"]["budget"]["decision"] == "held"
    assert a[1]["metadata"]["budget"]["held_s"] > 0.3
    assert a[1]["metadata"]["budget"]["spent"]["input"] == 10  # a new window
    assert time.monotonic() - t0 >= 0.5
    assert by_key(res.outputs, "b")[0]["metadata"]["budget"]["decision"] == "within"


def test_a_sliding_window_counts_the_last_window_s(probes):
    budget = Budget(max_tokens=15, window_s=0.4, sliding=True, on_exceeded="hold")
    res = run(budget_agent(budget), [{"key": "a", "q": i} for i in range(3)])
    meta = [o["metadata"]["budget"] for o in res.outputs]
    assert [m["decision"] for m in meta] == ["within", "held", "held"]
    assert all(len(m["spent"]["calls"]) == 1 for m in meta)  # older calls slid out


@pytest.mark.parametrize("kwargs, problem", [
    ({"on_exceeded": "fallback"}, "needs fallback"),
    ({"on_exceeded": "hold"}, "needs window_s"),
    ({"max_tokens": -1}, "greater than or equal to 0"),
])
def test_a_budget_that_cannot_work_is_refused_naming_why(kwargs, problem):
    with pytest.raises(ValueError, match=problem):
        Budget(**kwargs)


def test_budget_decisions_replay_from_their_records_after_every_restore(probes):
    budget = Budget(max_tokens=30, on_exceeded="fallback", fallback="cheap",
                    prices={"model": ModelPrice(input_per_million=1)})
    report = check_replay_safety(budget_agent(budget),
                                 [{"key": "a", "q": i} for i in range(4)] + [{"key": "b", "q": 0}])
    report.assert_ok()


def test_budget_exceeded_error_keeps_its_fields_when_pickled():
    import pickle

    e = pickle.loads(pickle.dumps(BudgetExceededError("model", "a", "tokens 30 of 30")))
    assert (e.setup, e.key, e.reached) == ("model", "a", "tokens 30 of 30")
