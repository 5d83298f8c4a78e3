"""A budget counts what a provider reports, but a provider's answer never lowers a spend.

A broken or hostile provider (or a gateway rewriting its answers) may report negative token
counts; counted as they are, they took that much off the key's spend and the budget was never
reached. These tests pin that a negative count is counted as 0, per key and per agent.
"""

from __future__ import annotations

import pytest
from support.probes import count
from test_flow_control import asker, run

from flink_agents_py.api import (
    Budget,
    ChatMessage,
    ChatModelConnection,
    ChatResponse,
    MessageRole,
    ModelPrice,
    ResourceDescriptor,
    TokenUsage,
)

pytestmark = pytest.mark.timeout(120)


class NegativeFirst(ChatModelConnection):
    """Reports -1000 input and output tokens on its first answer, 10 and 10 after."""

    label: str

    def chat(self, messages, **kwargs) -> ChatResponse:
        tokens = -1000 if count(self.label) == 1 else 10
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content="ok"),
                            usage=TokenUsage(input_tokens=tokens, output_tokens=tokens))


@pytest.mark.parametrize("scope", ["key", "agent"])
def test_negative_usage_from_a_provider_does_not_lower_the_spend(scope, probes):
    budget = Budget(max_tokens=40, max_cost=1.0, scope=scope,
                    prices={"model": ModelPrice(input_per_million=1000, output_per_million=0)})
    agent = asker({"conn": ResourceDescriptor(NegativeFirst, label=f"neg-{scope}")},
                  {"model": {"connection": "conn", "budget": budget}})
    res = run(agent, [{"key": "a", "q": i} for i in range(5)], max_in_flight=1)
    first = res.outputs[0]["metadata"]["budget"]
    assert first["spent"]["input"] == 0 and first["spent"]["output"] == 0
    assert first["cost"] == 0.0 and first["spent"]["cost"] == 0.0
    # then 20 tokens a call: two calls reach 40, the third finds the budget spent
    assert [o["error"] is None for o in res.outputs] == [True, True, True, False, False]
    assert res.outputs[3]["error"].startswith("BudgetExceededError")
    assert probes[f"neg-{scope}"] == 3


class NoUsage(ChatModelConnection):
    """Answers 400 characters and reports no usage (``"usage": null`` on the wire)."""

    label: str

    def chat(self, messages, **kwargs) -> ChatResponse:
        count(self.label)
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content="x" * 400))


@pytest.mark.parametrize("scope", ["key", "agent"])
def test_an_answer_without_usage_spends_its_estimated_tokens(scope, probes):
    # before: it spent nothing, and the budget was never reached
    agent = asker({"conn": ResourceDescriptor(NoUsage, label=f"none-{scope}")},
                  {"model": {"connection": "conn",
                             "budget": Budget(max_tokens=300, scope=scope)}})
    res = run(agent, [{"key": "a", "q": "q" * 40} for _ in range(5)], max_in_flight=1)
    first = res.outputs[0]["metadata"]
    assert first["usage_estimated"] is True
    assert (first["budget"]["spent"]["input"], first["budget"]["spent"]["output"]) == (10, 100)
    # 110 tokens a call: 0, 110 and 220 are under 300; the fourth finds the budget spent
    assert [o["error"] is None for o in res.outputs] == [True, True, True, False, False]
    assert res.outputs[3]["error"].startswith("BudgetExceededError")
    assert probes[f"none-{scope}"] == 3


def test_without_a_budget_an_answer_without_usage_is_left_as_the_provider_gave_it(probes):
    agent = asker({"conn": ResourceDescriptor(NoUsage, label="none-free")},
                  {"model": {"connection": "conn"}})
    res = run(agent, [{"key": "a", "q": "hi"}])
    [out] = res.outputs
    assert out["error"] is None and "usage_estimated" not in out["metadata"]
