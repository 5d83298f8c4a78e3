"""Spend budgets per key and per agent (issue 30, part 2), on the local runner.

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
    delay_s: float = 0.0

    def chat(self, messages, **kwargs) -> ChatResponse:
        count(self.label)
        if self.delay_s:
            time.sleep(self.delay_s)  # a slow provider: many calls in flight at once
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT,
                                                content=f"{self.reply}: {messages[-1].content}"),
                            usage=TokenUsage(input_tokens=10, output_tokens=5))


def budget_agent(budget: Budget, delay_s: float = 0.0):
    return asker({"conn": ResourceDescriptor(Metered, label="big", reply="big", delay_s=delay_s),
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


# -- agent budgets (scope="agent"): one budget for all keys, a share per subtask -----------

def test_an_agent_budget_is_shared_by_all_keys_even_with_many_calls_in_flight(probes):
    # 30 keys at once against a slow model: calls in flight count as the mean spend of the
    # answered ones, so exactly 10 calls of 15 tokens fit in 150 tokens, not 30
    budget = Budget(max_tokens=150, scope="agent",
                    prices={"model": ModelPrice(input_per_million=1000, output_per_million=2000)})
    res = run(budget_agent(budget, delay_s=0.05), [{"key": f"k{i}", "q": i} for i in range(30)])
    assert res.errors == []
    answered = [o for o in res.outputs if o["error"] is None]
    refused = [o for o in res.outputs if o["error"] is not None]
    assert len(answered) == 10 and probes["big"] == 10
    assert {o["metadata"]["budget"]["scope"] for o in answered} == {"agent"}
    assert max(o["metadata"]["budget"]["spent"]["input"] for o in answered) == 100
    assert len(refused) == 20 and all(o["error"].startswith(
        "BudgetExceededError: the budget of chat model 'model' of the agent (this subtask's "
        "share; refused for key 'k") and o["error"].endswith("is spent: tokens 150 of 150")
        for o in refused)
    # the metrics: what was spent by the price table, what is left of the share
    assert res.metrics["cost_micros"] == {"model": 10 * 20_000}  # (10*1000 + 5*2000)/1e6 each
    assert res.metrics["budget_remaining_tokens"] == {"model": 0}


def test_a_held_agent_budget_resumes_one_window_at_a_time(probes):
    budget = Budget(max_tokens=15, window_s=0.4, scope="agent", on_exceeded="hold")
    t0 = time.monotonic()
    res = run(budget_agent(budget), [{"key": k, "q": 0} for k in "abc"])
    meta = sorted((o["metadata"]["budget"] for o in res.outputs),
                  key=lambda m: m.get("held_s", 0))
    assert [m["decision"] for m in meta] == ["within", "held", "held"]
    assert all(m["spent"]["input"] == 10 for m in meta)  # each call in a window of its own
    assert meta[2]["held_s"] > meta[1]["held_s"] > 0.2
    assert time.monotonic() - t0 >= 0.7  # two windows ended
    assert probes["big"] == 3


def test_an_agent_budget_switches_every_key_to_the_fallback_when_spent(probes):
    budget = Budget(max_tokens=30, scope="agent", on_exceeded="fallback", fallback="cheap")
    res = run(budget_agent(budget), [{"key": f"k{i}", "q": i} for i in range(6)],
              max_in_flight=1)
    assert [o["metadata"]["budget"]["decision"] for o in res.outputs] == [
        "within", "within", "fallback", "fallback", "fallback", "fallback"]
    assert [o["content"].split(":")[0] for o in res.outputs] == ["big"] * 2 + ["cheap"] * 4
    assert probes["big"] == 2 and probes["cheap"] == 4


def test_each_subtask_holds_an_equal_share_of_an_agent_budget():
    budget = Budget(max_tokens=301, max_cost=1.0, scope="agent")
    share = budget.share(2)
    assert (share.max_tokens, share.max_cost, share.max_input_tokens) == (150.5, 0.5, None)
    assert budget.share(1) is budget


def test_after_a_restore_a_subtask_starts_from_the_spend_its_keys_recorded():
    from flink_agents_py.runtime._budgets import AgentSpend

    budget = Budget(max_tokens=100, window_s=60, scope="agent")
    recorded = {"input": 60, "output": 30, "cost": 0.0, "window_start": 1000.0, "calls": []}
    fresh = AgentSpend(budget, parallelism=1)
    fresh.adopt(recorded, now=1010.0)  # same window: more than counted here, so taken
    assert (fresh.state["input"], fresh.state["output"]) == (60, 30)
    fresh.adopt({**recorded, "input": 10}, now=1011.0)  # less: ignored
    assert fresh.state["input"] == 60
    ended = AgentSpend(budget, parallelism=1)
    ended.adopt(recorded, now=1070.0)  # its window has ended: nothing carried over
    assert ended.state["input"] == 0


def test_an_agent_budget_on_sliding_windows_is_refused_naming_why():
    with pytest.raises(ValueError, match="scope='agent' takes fixed windows"):
        Budget(max_tokens=1, window_s=1, sliding=True, scope="agent")


def test_budget_exceeded_error_of_an_agent_budget_keeps_its_scope_when_pickled():
    import pickle

    e = pickle.loads(pickle.dumps(BudgetExceededError("model", "a", "cost 1 of 1", "agent")))
    assert e.scope == "agent" and "of the agent" in str(e)


class Remembering(ChatModelConnection):
    """Answers a question it was asked before from its cache, as the local model does."""

    seen: set[str] = set()

    def chat(self, messages, **kwargs) -> ChatResponse:
        question = messages[-1].content
        cached = question in self.seen
        self.seen.add(question)
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content="ok"),
                            usage=TokenUsage(input_tokens=10, output_tokens=5),
                            metadata={"cached": True} if cached else {})


def test_the_event_log_says_which_answers_came_from_the_connections_cache():
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.observability import EventLog, MemorySink

    sink = MemorySink()
    agent = asker({"conn": ResourceDescriptor(Remembering)}, {"model": {"connection": "conn"}})
    (AgentsExecutionEnvironment.local(event_log=EventLog(sink=sink))
     .from_list([{"key": "a", "q": 0}, {"key": "b", "q": 0}, {"key": "c", "q": 1}])
     .apply(agent).run())
    calls = sorted((r["key"], r.get("cached", False)) for r in sink.records
                   if r["kind"] == "call_finished" and r.get("call_kind") == "chat_model")
    # the same question twice: one of the two was answered from the cache
    assert [c for _, c in calls].count(True) == 1
    assert dict(calls)["c"] is False
