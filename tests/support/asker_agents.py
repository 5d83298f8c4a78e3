"""An agent that asks a chat model (with tools) about each input, for the testing helpers'
tests: ``asker(connection, tools)`` and the ``price_of`` tool."""

from __future__ import annotations

from typing import Any

from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)

__all__ = ["Asker", "asker", "price_of"]


def price_of(item: str) -> dict[str, Any]:
    """The price of an item.

    Args:
        item: the item's name.
    """
    return {"item": item, "price": len(item)}


class Asker(Agent):
    """Asks model ``m`` about the input's ``q`` (with tools); emits the answer's text."""

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        r = await ctx.chat("m", [ChatMessage(content=event.input["q"])])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "answer": r.message.content}))


def asker(connection: Any, tools: list[Any] = ()) -> Asker:
    """An ``Asker`` whose model ``m`` uses ``connection`` and offers ``tools`` (by name)."""
    agent = Asker()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, connection)
    agent.add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=[t.__name__ for t in tools]))
    for t in tools:
        agent.add_resource(t.__name__, ResourceType.TOOL, t)
    return agent
