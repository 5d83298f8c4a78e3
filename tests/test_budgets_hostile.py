"""Budgets against hostile numbers: a provider's absurd usage, prices and windows that do not
end, and a key's spend entry from a clock that is behind or from an edit.

Each case failed before: a usage beyond 64 bits failed every chat *after* the model was
called and was never counted (five calls against a one-call budget); an infinite price was
accepted and did the same; an infinite window held a key for ever; a window starting a day
ahead (a restore on a machine whose clock is behind) refused the key for the whole day; an
entry beyond 64 bits failed with a serialization error instead of ``BudgetStateError``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest
from pydantic import ValidationError

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    Budget,
    ChatMessage,
    ChatModelConnection,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponse,
    ChatResponseEvent,
    InputEvent,
    MessageRole,
    ModelPrice,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    TokenUsage,
    action,
)

CALLS: list[str] = []


class Reporting(ChatModelConnection):
    """Answers "ok" and reports the usage the question names (``{"in": "n"}``: digits, as a
    record cannot hold a number beyond 64 bits; default 10)."""

    def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        CALLS.append(messages[-1].content)
        said = json.loads(messages[-1].content)
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content="ok"),
                            usage=TokenUsage(input_tokens=int(said.get("in", 10)), output_tokens=5))


class Asker(Agent):
    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(ChatRequestEvent(model="model", messages=[
            ChatMessage(content=json.dumps(event.input.get("usage", {})))]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        spent = event.response.metadata["budget"]["spent"] if event.response else None
        ctx.send_event(OutputEvent(output={"error": event.error, "spent": spent}))


def _asker(budget: Budget) -> Asker:
    agent = Asker()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(Reporting))
    agent.add_resource("model", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn", budget=budget))
    return agent


def _run(budget: Budget, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    CALLS.clear()
    env = AgentsExecutionEnvironment.local(max_in_flight=1)
    return env.from_list(records).apply(_asker(budget)).run().outputs


@pytest.mark.parametrize("usage", [10**30, 10**400, 2**63])
def test_a_usage_beyond_what_state_holds_is_counted_as_the_most_it_can_be(usage):
    outputs = _run(Budget(max_tokens=100), [{"key": "a", "usage": {"in": str(usage)}}] * 4)
    assert len(CALLS) == 1  # the first call spent the budget; the others were refused
    assert outputs[0]["error"] is None and outputs[0]["spent"]["input"] == 2**53
    assert all("BudgetExceededError" in o["error"] and "'model'" in o["error"]
               for o in outputs[1:])


def test_token_usage_keeps_a_huge_or_infinite_count_as_its_bound():
    assert TokenUsage(input_tokens=10**30, output_tokens=float("inf")) == TokenUsage(
        input_tokens=2**53, output_tokens=2**53)
    assert TokenUsage(input_tokens=7).input_tokens == 7
    with pytest.raises(ValidationError):
        TokenUsage(input_tokens=float("nan"))


@pytest.mark.parametrize("price", [float("inf"), 1e308, float("nan"), -1.0])
def test_a_price_with_no_finite_cost_is_refused_where_it_is_declared(price):
    with pytest.raises(ValidationError, match="input_per_million"):
        ModelPrice(input_per_million=price)


def test_the_highest_price_still_gives_a_finite_cost_for_the_largest_usage():
    budget = Budget(max_cost=1.0, prices={"model": ModelPrice(input_per_million=1e12,
                                                              output_per_million=1e12)})
    cost = budget.cost("model", TokenUsage(input_tokens=10**30, output_tokens=10**30))
    assert 0 < cost < float("inf")


@pytest.mark.parametrize("scope", ["key", "agent"])
def test_the_highest_price_times_the_largest_usage_leaves_a_readable_entry(scope):
    # one call's cost (2^53 tokens at 1e12 per million: ~9e21) is beyond 64 bits: the entry
    # written after it could not be read back, and every later chat of the key failed
    budget = Budget(max_cost=1e30, scope=scope, prices={
        "model": ModelPrice(input_per_million=1e12, output_per_million=1e12)})
    outputs = _run(budget, [{"key": "a", "usage": {"in": str(10**30)}}] * 3)
    assert [o["error"] for o in outputs] == [None] * 3
    assert outputs[-1]["spent"]["cost"] <= 2**62 and outputs[-1]["spent"]["input"] <= 2**62


@pytest.mark.parametrize("sliding", [False, True])
def test_token_sums_saturate_instead_of_leaving_64_bits(sliding):
    # a key near the end of what a spend holds (as after ~2^9 calls of 2^53 tokens each)
    # keeps chatting with no token limit: its entry stays one keyed state holds
    near = 2**62 - 5
    entry = {"input": near, "output": near, "cost": 0.0,
             "window_start": time.time() - 1 if sliding else None,
             "calls": [[time.time() - 1, near, near, 0.0]] if sliding else []}
    budget = Budget(max_cost=5.0, window_s=3600 if sliding else None, sliding=sliding,
                    prices={"model": ModelPrice(input_per_million=0.0)})
    [out] = _with_entry(entry, budget)
    assert out["error"] is None
    assert out["spent"]["input"] == 2**62 and out["spent"]["output"] == 2**62


@pytest.mark.parametrize("window", [float("inf"), 1e300, float("nan")])
def test_a_window_that_never_ends_is_refused_where_it_is_declared(window):
    with pytest.raises(ValidationError, match="window_s"):
        Budget(max_tokens=10, window_s=window, on_exceeded="hold")


def _with_entry(entry: dict[str, Any], budget: Budget) -> list[dict[str, Any]]:
    """One chat of key ``a`` whose restored memory holds ``entry`` as ``_budget.model``."""
    records = [{"key": "a", "usage": {"in": "1"}}, {"key": "a"}]
    first = AgentsExecutionEnvironment.local().from_list(records[:1]).apply(_asker(budget))
    first.run()
    snapshot = json.loads(json.dumps(first.snapshot()))
    [key] = snapshot["keys"]
    key["memory"]["_budget"]["model"] = entry  # as an edited or skewed savepoint holds it
    again = AgentsExecutionEnvironment.local().from_list(records).apply(_asker(budget))
    return again.restore(snapshot).run().outputs  # the second record, from the snapshot on


@pytest.mark.parametrize("sliding", [False, True])
def test_a_window_starting_a_day_ahead_of_the_clock_does_not_hold_the_key_for_a_day(sliding):
    ahead = time.time() + 86_400  # written by a machine whose clock was a day ahead
    entry = {"input": 100, "output": 0, "cost": 0.0, "window_start": ahead,
             "calls": [[ahead, 100, 0, 0.0]] if sliding else []}
    [out] = _with_entry(entry, Budget(max_tokens=50, window_s=60, sliding=sliding))
    assert out["error"] is None and out["spent"]["input"] == 10  # a new window, from now


def test_a_window_starting_within_one_window_ahead_still_counts():
    entry = {"input": 100, "output": 0, "cost": 0.0, "window_start": time.time() + 30}
    [out] = _with_entry(entry, Budget(max_tokens=50, window_s=60))
    assert "BudgetExceededError" in out["error"]


def test_an_entry_beyond_64_bits_is_a_budget_state_error_naming_the_entry():
    [out] = _with_entry({"input": 2**70, "output": 0, "cost": 0.0}, Budget(max_tokens=50))
    assert "BudgetStateError" in out["error"]
    assert "'_budget.model'" in out["error"] and "64-bit" in out["error"]


USER_SCRIPT = """
import json
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, Budget, ChatMessage, ChatModelConnection, ChatModelSetup,
                                 ChatResponse, InputEvent, MessageRole, OutputEvent,
                                 ResourceDescriptor, ResourceType, TokenUsage, action)

calls = []


class Lying(ChatModelConnection):  # a provider that reports an absurd usage
    def chat(self, messages, **kwargs):
        calls.append(1)
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content="ok"),
                            usage=TokenUsage(input_tokens=10**30, output_tokens=1))


class Asker(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event, ctx):
        try:
            await ctx.chat("model", [ChatMessage(content="hi")])
            got = "answered"
        except Exception as e:
            got = "refused" if "BudgetExceededError" in str(e) else repr(e)
        ctx.send_event(OutputEvent(output=got))


agent = Asker()
agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(Lying))
agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
    ChatModelSetup, connection="conn", budget=Budget(max_tokens=1000)))
result = AgentsExecutionEnvironment.local(max_in_flight=1).from_list(
    [{"key": "k"}] * 3).apply(agent).run()
print(json.dumps({"outputs": result.outputs, "calls": len(calls)}))
"""


def test_a_users_budget_stops_a_provider_that_reports_absurd_usage(tmp_path):
    (tmp_path / "lying.py").write_text(USER_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "lying.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "outputs": ["answered", "refused", "refused"], "calls": 1}


@pytest.mark.parametrize("scope", ["key", "agent"])
@pytest.mark.parametrize("field", ["max_input_tokens", "max_output_tokens", "max_tokens",
                                   "max_cost"])
def test_a_zero_limit_under_hold_is_refused_where_it_is_declared(field, scope):
    # a limit of 0 is spent before any call and stays spent in every new window: under
    # "hold" each chat through the setup was held window after window, for ever, with
    # nothing said (the key's later records queued behind it); "fail" and "fallback" with
    # 0 are meaningful (never call this model, always the fallback) and stay allowed
    with pytest.raises(ValidationError, match=f"{field}=0.*hold"):
        Budget(**{field: 0}, window_s=1, on_exceeded="hold", scope=scope)
    Budget(**{field: 0}, on_exceeded="fail", scope=scope)
    Budget(**{field: 0}, on_exceeded="fallback", fallback="small", scope=scope)
