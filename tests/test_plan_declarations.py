"""Mistakes in declaring an agent in Python are named where they are made, not later.

Each of these passed (or crashed) the plan builder and went wrong at run time, or failed
with an error for a model the user never wrote: a trigger given as one string (its letters
became the triggers, the action never ran), a name that is not a string, a resource type
given as text, a resource declared under a type its class is not (every chat failed with a
bare ``AssertionError``), a tool whose arguments cannot be described, and a tool that is a
``functools.partial``.
"""

from __future__ import annotations

import pytest

from flink_agents_py.api import (
    Agent,
    InputEvent,
    OutputEvent,
    Prompt,
    ResourceDescriptor,
    ResourceType,
    UsageError,
    action,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.plan import AgentPlan


def go(event, ctx) -> None:
    ctx.send_event(OutputEvent(output=event.input))


def script(messages, **kwargs):
    return "ok"


CONNECTION = ResourceDescriptor(ScriptedChatModel, function=f"{__name__}:script")


def test_triggers_given_as_one_string_or_class_name_the_list_to_write():
    agent = Agent()
    with pytest.raises(UsageError, match=r"got the string 'InputEvent' alone: write "
                                         r"add_action\('x', \['InputEvent'\], fn\)"):
        agent.add_action("x", "InputEvent", go)
    with pytest.raises(UsageError, match=r"write add_action\('x', \[InputEvent\], fn\)"):
        agent.add_action("x", InputEvent, go)
    assert agent.declared_actions() == []


def test_a_blank_trigger_is_refused_where_it_is_written():
    with pytest.raises(TypeError, match="must name an event type, got ''"):
        Agent().add_action("x", [""], go)
    with pytest.raises(TypeError, match="must name an event type, got ' '"):
        action(" ")


@pytest.mark.parametrize("call", ["add_action", "add_resource"])
@pytest.mark.parametrize("name", [5, "", None])
def test_a_name_that_is_not_a_non_empty_string_is_a_usage_error_at_the_call(call, name):
    agent = Agent()
    with pytest.raises(UsageError, match=rf"{call}\(name, \.\.\.\): the name must be a "
                                         r"non-empty string, got"):
        if call == "add_action":
            agent.add_action(name, [InputEvent], go)
        else:
            agent.add_resource(name, ResourceType.PROMPT, Prompt.from_text("hi"))


def test_a_resource_type_given_as_its_value_is_that_type_and_a_wrong_one_lists_them():
    agent = Agent()
    agent.add_action("go", [InputEvent], go)
    agent.add_resource("p", "prompt", Prompt.from_text("hi"))
    assert AgentPlan.from_agent(agent).resources[ResourceType.PROMPT]["p"].type \
        is ResourceType.PROMPT
    with pytest.raises(UsageError, match=r"add_resource\('q', resource_type, \.\.\.\): the "
                                         r"resource type must be a ResourceType .*got "
                                         r"'prompts'; the types: CHAT_MODEL_CONNECTION"):
        agent.add_resource("q", "prompts", Prompt.from_text("hi"))
