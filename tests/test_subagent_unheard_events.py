"""An event a sub-agent's child sends that no action of the child takes.

At the agent's own level such an event is dropped with one WARNING (``is an @action(X)
missing?``). Inside an internal sub-agent it was dropped silently: a child whose actions
listen for an event it never gets (no ``@action(InputEvent)``, or a forgotten
``@action(Step)``) made every call a success with an empty result, and nothing said why.
Now the child's flow warns the same way, naming the sub-agent, once per child agent and
event type.
"""

from __future__ import annotations

import logging

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    Event,
    InputEvent,
    InternalSubagent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)


class Drafted(Event):
    text: str = ""


class Polished(Event):
    text: str = ""


class ListensForPolished(Agent):
    """Has no ``@action(InputEvent)``: its calls' input triggers nothing."""

    @action(Polished)
    @staticmethod
    def publish(event: Polished, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=event.text))


class SendsDrafted(Agent):
    """Sends ``Drafted``, which none of its actions takes."""

    @action(InputEvent)
    @staticmethod
    def draft(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(Drafted(text="draft"))


class Editor(Agent):
    @action(InputEvent)
    @staticmethod
    async def edit(event: InputEvent, ctx: RunnerContext) -> None:
        result = await (await ctx.submit_subagent(event.input["writer"], {"topic": "tides"}))
        ctx.send_event(OutputEvent(output=result.result))


def editor() -> Agent:
    agent = Editor()
    agent.add_resource("no_input", ResourceType.AGENT, ResourceDescriptor(
        InternalSubagent, agent=ListensForPolished))
    agent.add_resource("lost_step", ResourceType.AGENT, ResourceDescriptor(
        InternalSubagent, agent=SendsDrafted))
    return agent


def test_events_a_child_drops_are_warned_about_once_naming_the_sub_agent(caplog):
    records = [{"key": k, "writer": w} for k in ("a", "b") for w in ("no_input", "lost_step")]
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        result = AgentsExecutionEnvironment.local().from_list(records).apply(editor()).run()
    assert result.errors == [] and result.outputs == [[]] * 4  # as before: empty results
    warned = sorted(r.getMessage() for r in caplog.records
                    if "trigger no action" in r.getMessage())
    assert warned == [
        "events of type 'Drafted' trigger no action of sub-agent 'lost_step' (agent "
        f"{__name__}:SendsDrafted; its actions: draft) and are dropped: the first sent by "
        "action 'draft' (r1/edit/c0/b/draft); is an @action(Drafted) missing?",
        "events of type 'InputEvent' trigger no action of sub-agent 'no_input' (agent "
        f"{__name__}:ListensForPolished; its actions: publish) and are dropped: is an "
        "@action(InputEvent) missing?",
    ]
