"""A budget on a setup holds when the setup is reached as another setup's fallback.

Before, a setup's budget was checked only for chats that named it: reached through another
setup's budget (``on_exceeded="fallback"``) or its provider ``fallbacks``, it answered every
time, its spend never counted (three answers from ``small`` against a one-call budget). Now
the fallback's own budget is checked as a chat naming it would be, its spend counted in its
own ``_budget.<setup>`` entry, and its decision is in ``metadata["fallback_budget"]``.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

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
    OutputEvent,
    ProviderError,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    TokenUsage,
    action,
)
from flink_agents_py.runtime import SqliteJournal
from flink_agents_py.testing import check_replay_safety


class Metered(ChatModelConnection):
    """Answers with the question and 10 input, 5 output tokens."""

    def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT,
                                                content=f"re: {messages[-1].content}"),
                            usage=TokenUsage(input_tokens=10, output_tokens=5))


class Down(ChatModelConnection):
    """A provider that is down (503): what a setup's ``fallbacks`` are for."""

    def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        raise ProviderError("service unavailable", status_code=503, retryable=True)


class Asker(Agent):
    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(ChatRequestEvent(model="model", messages=[
            ChatMessage(content=str(event.input["n"]))]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        meta = event.response.metadata if event.response is not None else {}
        own = meta.get("fallback_budget") or {}
        ctx.send_event(OutputEvent(output={
            "by": meta.get("model_setup", "model") if event.error is None else None,
            "refused_by": next((s for s in ("'small'", "'model'")
                                if event.error and "BudgetExceededError" in event.error
                                and s in event.error), None),
            "small_spent": (own.get("spent") or {}).get("input"), "small_setup": own.get("setup"),
            "memory": ctx.short_term_memory.get("_budget") and sorted(
                ctx.short_term_memory.get("_budget").get_fields())}))


def _agent(kind: str, scope: str = "key") -> Asker:
    agent = Asker()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(Metered))
    agent.add_resource("down", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(Down))
    if kind == "budget":  # the model's own budget falls back to small
        model = ResourceDescriptor(ChatModelSetup, connection="conn", budget=Budget(
            max_tokens=15, on_exceeded="fallback", fallback="small"))
    else:  # the model's provider is down: its fallbacks go on to small
        model = ResourceDescriptor(ChatModelSetup, connection="down", fallbacks=["small"])
    agent.add_resource("model", ResourceType.CHAT_MODEL, model)
    agent.add_resource("small", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", budget=Budget(max_tokens=15, scope=scope)))
    return agent


def _run(agent: Agent, n: int, **options: Any) -> list[dict[str, Any]]:
    records = [{"key": "a", "n": i} for i in range(n)]
    env = AgentsExecutionEnvironment.local(max_in_flight=1, **options)
    return env.from_list(records).apply(agent).run().outputs


def test_a_budget_fallbacks_own_budget_holds():
    outputs = _run(_agent("budget"), 4)
    assert [(o["by"], o["refused_by"]) for o in outputs] == [
        ("model", None), ("small", None), (None, "'small'"), (None, "'small'")]
    assert outputs[1]["small_setup"] == "small" and outputs[1]["small_spent"] == 10
    assert outputs[1]["memory"] == ["model", "small"]  # each setup's spend in its own entry


@pytest.mark.parametrize("scope", ["key", "agent"])
def test_a_provider_fallbacks_own_budget_holds(scope):
    outputs = _run(_agent("provider", scope), 3)
    assert [(o["by"], o["refused_by"]) for o in outputs] == [
        ("small", None), (None, "'small'"), (None, "'small'")]
    assert outputs[0]["small_spent"] == 10


def test_a_fallbacks_budget_is_replay_safe_at_every_crash_point(tmp_path):
    inputs = [{"key": k, "n": i} for i, k in enumerate(["a", "a", "b", "a", "b"])]
    report = check_replay_safety(_agent("budget"), inputs, other_process=False)
    report.assert_ok()
    n = itertools.count()
    report = check_replay_safety(
        _agent("provider", "agent"), inputs, other_process=False, max_in_flight=1,
        journal_factory=lambda: SqliteJournal(str(tmp_path / f"j{next(n)}.db")))
    report.assert_ok()
