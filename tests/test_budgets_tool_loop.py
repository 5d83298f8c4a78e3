"""A budget spent between two model calls of one chat's tool rounds (docs/how-to/budgets.md).

Each call of a chat is checked against the spend of those before it, so a budget can run out
in the middle of a tool loop: under ``"fail"`` the chat fails there, naming the spend, and
the model is not called again; under ``"fallback"`` the fallback gets the conversation so far
(the tool calls and their results) and goes on with the tools it is offered.
"""

from __future__ import annotations

from typing import Any

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    Budget,
    ChatMessage,
    ChatModelSetup,
    ChatResponse,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    TokenUsage,
    ToolCall,
    action,
)
from flink_agents_py.testing import CallCounter, model_from_function


def price_of(item: str) -> dict:
    """The price of an item.

    Args:
        item: the item's name.
    """
    return {"item": item, "price": len(item)}


class Shop(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        reply = await ctx.chat("smart", [ChatMessage(content=event.input["question"])])
        ctx.send_event(
            OutputEvent(
                output={
                    "answer": reply.message.content,
                    "by": (reply.metadata or {}).get("model_setup"),
                }
            )
        )


def _rounds(request: Any) -> int:
    return sum(m.role == MessageRole.TOOL for m in request.messages)


def _tool_loop(request: Any) -> ChatResponse:
    """Three tool rounds, then an answer; each call reports 100 input tokens."""
    n = _rounds(request)
    message = (
        ChatMessage(
            role=MessageRole.ASSISTANT,
            tool_calls=[ToolCall(id=f"c{n}", name="price_of", arguments={"item": "apple"})],
        )
        if n < 3
        else ChatMessage(role=MessageRole.ASSISTANT, content="final")
    )
    return ChatResponse(message=message, usage=TokenUsage(input_tokens=100, output_tokens=5))


def _shop(budget: Budget, small: Any, calls: CallCounter) -> tuple[Shop, Any]:
    agent, smart = Shop(), model_from_function(_tool_loop)
    agent.add_resource("gpt", ResourceType.CHAT_MODEL_CONNECTION, smart)
    agent.add_resource("cheap", ResourceType.CHAT_MODEL_CONNECTION, small)
    agent.add_resource(
        "smart",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor(ChatModelSetup, connection="gpt", tools=["price_of"], budget=budget),
    )
    agent.add_resource(
        "small",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor(ChatModelSetup, connection="cheap", tools=["price_of"]),
    )
    agent.add_resource("price_of", ResourceType.TOOL, calls.wrap(price_of))
    return agent, smart


def _run(agent: Shop) -> Any:
    return (
        AgentsExecutionEnvironment.local()
        .from_list([{"key": "a", "question": "apple?"}])
        .apply(agent)
        .run()
    )


def test_a_budget_spent_mid_tool_loop_fails_the_chat_there():
    calls = CallCounter()
    agent, smart = _shop(Budget(max_input_tokens=150), model_from_function(lambda r: "x"), calls)
    result = _run(agent)
    assert result.outputs == []
    [error] = result.errors
    assert "BudgetExceededError" in error.message and "input tokens 200 of 150" in error.message
    assert smart.calls == 2 and calls["price_of"] == 2  # the third model call never went


def test_a_budget_spent_mid_tool_loop_falls_back_with_the_conversation_so_far():
    calls = CallCounter()
    seen: list[int] = []

    def small(request: Any) -> Any:
        seen.append(_rounds(request))
        return _tool_loop(request)  # goes on with the loop: the same tools are offered

    agent, smart = _shop(
        Budget(max_input_tokens=150, on_exceeded="fallback", fallback="small"),
        model_from_function(small),
        calls,
    )
    result = _run(agent)
    assert result.errors == []
    assert result.outputs == [{"answer": "final", "by": "small"}]
    assert smart.calls == 2 and seen == [2, 3]  # the fallback got both tool rounds, then one
    assert calls["price_of"] == 3
