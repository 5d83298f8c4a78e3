"""Sub-agents and chats that run past a record's run limits while their caller copes.

Used by ``tests/test_run_limits_in_children.py``.
"""

from __future__ import annotations

from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    Event,
    InputEvent,
    InternalSubagent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents_py.testing import model_from_function, tool_call, tool_calls


def work(i: int) -> int:
    """A durable call's function."""
    return i


class Ping(Event):
    """An event its own action answers with another (a chain without end)."""


class Child(Agent):
    """Starts 8 durable calls (``"calls"``) or sends itself events for ever (``"chain"``)."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input.get("do") == "chain":
            ctx.send_event(Ping())
            return
        got = [await ctx.durable_execute_async(work, i) for i in range(8)]
        ctx.send_event(OutputEvent(output=got))

    @action(Ping)
    @staticmethod
    def again(event: Ping, ctx: RunnerContext) -> None:
        ctx.send_event(Ping())


class Parent(Agent):
    """Calls ``child`` and outputs what it got, failed or not (it handles the failure)."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        handle = await ctx.submit_subagent("child", {"do": event.input["do"]})
        result = await handle
        ctx.send_event(OutputEvent(output={"key": ctx.key, "ok": result.success}))


def parent() -> Parent:
    """``Parent`` with its ``child`` sub-agent."""
    agent = Parent()
    agent.add_resource(
        "child",
        ResourceType.AGENT,
        ResourceDescriptor(InternalSubagent, agent=Child, description="Works."),
    )
    return agent


def price_of(item: str) -> dict[str, str]:
    """The price of an item.

    Args:
        item: the item's name.
    """
    return {"item": item, "price": "1"}


def _always_a_tool(request: object) -> object:
    return tool_calls(tool_call("price_of", item="x"))


class Shop(Agent):
    """Chats with a model that asks for a tool every turn; outputs the chat's error if any."""

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        try:
            reply = await ctx.chat("model", [ChatMessage(content="price?")])
            got = reply.message.content
        except Exception as e:  # noqa: BLE001 - the caller copes with the chat's failure
            got = type(e).__name__
        ctx.send_event(OutputEvent(output={"key": ctx.key, "got": got}))


def shop() -> Shop:
    """``Shop`` with its model and tool."""
    agent = Shop()
    agent.add_resource(
        "conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(_always_a_tool)
    )
    agent.add_resource(
        "model",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor(ChatModelSetup, connection="conn", tools=["price_of"]),
    )
    agent.add_resource("price_of", ResourceType.TOOL, price_of)
    return agent
