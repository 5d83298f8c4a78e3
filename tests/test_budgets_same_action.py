"""A budget checks every model call of a chat's action, not only its first.

A chat whose structured answer does not follow its schema is asked again in the same
action execution. That action's earlier calls are merged into the key's spend entry when
it ends; before, the next call read the entry as it was when the action started, so it went
(and said it was "within") although the earlier call had spent the budget.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.probes import count
from test_flow_control import run

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
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    TokenUsage,
    action,
)
from flink_agents_py.testing import check_replay_safety

pytestmark = pytest.mark.timeout(120)

_SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


class NotJsonFirst(ChatModelConnection):
    """Answers no JSON to a chat's first ``bad`` calls, then ``{"a": 1}``; 15 tokens each."""

    label: str = "not-json-first"
    bad: int = 1

    def chat(self, messages, **kwargs) -> ChatResponse:
        count(self.label)
        n = (len(messages) + 1) // 2  # this chat's nth call: each correction adds two turns
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT,
                                content="not json" if n <= self.bad else '{"a": 1}'),
            usage=TokenUsage(input_tokens=10, output_tokens=5))


class Structured(Agent):
    """One chat with an output schema per input; outputs the answer or the error."""

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(ChatRequestEvent(model="model", messages=[ChatMessage(content="q")],
                                        output_schema=_SCHEMA))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        r = event.response
        ctx.send_event(OutputEvent(output={
            "key": ctx.key, "error": event.error,
            "budget": r.metadata.get("budget") if r else None,
            "entry": ctx.short_term_memory.get("_budget.model")}))


def structured(budget: Budget, label: str, bad: int = 1) -> Structured:
    agent = Structured()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(NotJsonFirst, label=label, bad=bad))
    agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", budget=budget, output_retries=3))
    return agent


def _spent(out: dict[str, Any]) -> tuple[int, int]:
    spent = out["budget"]["spent"]
    return spent["input"], spent["output"]


def test_an_answer_asked_again_is_refused_once_the_first_spent_the_budget(probes):
    [out] = run(structured(Budget(max_tokens=15), "spent-first"), [{"key": "a"}]).outputs
    assert out["error"].startswith("BudgetExceededError: the budget of chat model 'model' for "
                                   "key 'a' is spent: tokens 15 of 15")
    assert probes["spent-first"] == 1  # the second call never reached the model


def test_each_call_asked_again_sees_the_spend_of_the_ones_before(probes):
    [out] = run(structured(Budget(max_tokens=100), "seen", bad=2), [{"key": "a"}]).outputs
    assert out["error"] is None
    assert _spent(out) == (30, 15)  # three calls, each seeing the ones before it
    assert (out["entry"]["input"], out["entry"]["output"]) == (30, 15)  # counted once each


def test_the_calls_of_one_action_replay_with_the_spend_they_saw(probes):
    report = check_replay_safety(structured(Budget(max_tokens=40), "replayed", bad=2),
                                 [{"key": "a"}, {"key": "b"}])
    report.assert_ok()
