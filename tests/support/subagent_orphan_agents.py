"""The agents of ``test_subagent_orphans``: an action that ends (raises or returns) while a
sub-agent call it submitted is still running, never having awaited it.

``Leaving`` submits to ``kid`` and, once the child is at work (polling a remote run that
lingers, or waiting for an outside event that never comes), raises or returns; a second
record of the same key (``"next"``) shows whether the key is free again.
"""

from __future__ import annotations

from flink_agents_py.api import (
    Agent,
    InputEvent,
    InternalSubagent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)
from support.probes import count
from support.subagent_neighbour_agents import Lingering, polled, polling_child


class Waiting(Agent):
    """Waits for an outside event that never comes (no timeout), then outputs it."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        count("waiting")
        payload = await ctx.wait_for("never")
        ctx.send_event(OutputEvent(output=payload))


class Leaving(Agent):
    """``input["end"]``: ``"raise"`` or ``"return"`` once the child is at work; ``"next"``:
    output ``"next"`` (the key's later record). ``input["kid"]``: ``"polling"`` (an async
    remote run polled in the child), ``"waiting"`` (an outside event waited for) or
    ``"remote"`` (an async remote run the action submits itself)."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        end = event.input["end"]
        if end == "next":
            ctx.send_event(OutputEvent(output="next"))
            return
        await ctx.submit_subagent(event.input["kid"], {})  # LEFT: never awaited
        if event.input["kid"] == "polling":
            await ctx.durable_execute_async(polled, 3)
        if end == "raise":
            raise RuntimeError("the parent failed")
        ctx.send_event(OutputEvent(output="returned"))


def leaving() -> Agent:
    parent = Leaving()
    parent.add_resource("polling", ResourceType.AGENT, ResourceDescriptor(
        InternalSubagent, agent=polling_child(), input_schema='{"type":"object"}'))
    parent.add_resource("remote", ResourceType.AGENT, ResourceDescriptor(
        Lingering, status_poll_interval_millis=5))
    parent.add_resource("waiting", ResourceType.AGENT, ResourceDescriptor(
        InternalSubagent, agent=Waiting, input_schema='{"type":"object"}'))
    return parent
