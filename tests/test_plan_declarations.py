"""Mistakes in declaring an agent in Python are named where they are made, not later.

Each of these passed (or crashed) the plan builder and went wrong at run time, or failed
with an error for a model the user never wrote: a trigger given as one string (its letters
became the triggers, the action never ran), a name that is not a string, a resource type
given as text, a resource declared under a type its class is not (every chat failed with a
bare ``AssertionError``), a tool whose arguments cannot be described, and a tool that is a
``functools.partial``.
"""

from __future__ import annotations

import functools

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatModelSetup,
    InputEvent,
    OutputEvent,
    PlanError,
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


@pytest.mark.parametrize(("rtype", "value", "expected"), [
    (ResourceType.CHAT_MODEL, CONNECTION,
     "chat_model resource 'c': ScriptedChatModel is a chat_model_connection resource (its "
     "RESOURCE_TYPE), not a chat_model: declare it as ResourceType.CHAT_MODEL_CONNECTION"),
    (ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(ChatModelSetup, connection="x"),
     "chat_model_connection resource 'c': ChatModelSetup is a chat_model resource (its "
     "RESOURCE_TYPE), not a chat_model_connection: declare it as ResourceType.CHAT_MODEL"),
    (ResourceType.TOOL, Prompt.from_text("hi"),
     "tool resource 'c': Prompt is a prompt resource (its RESOURCE_TYPE), not a tool"),
    (ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(clazz="collections.OrderedDict"),
     "chat_model_connection resource 'c': collections.OrderedDict is not a Resource "
     "subclass"),
])
def test_a_resource_declared_under_a_type_its_class_is_not_is_a_plan_error(rtype, value,
                                                                           expected):
    """It passed the plan, and every chat then failed with ``AssertionError: `` (nothing
    more) or ``'Prompt' object has no attribute 'metadata'``."""
    agent = Agent()
    agent.add_action("go", [InputEvent], go)
    agent.add_resource("c", rtype, value)
    with pytest.raises(PlanError) as info:
        AgentPlan.from_agent(agent)
    assert [p for p in info.value.problems if p.startswith(expected)], info.value.problems


class Opaque:
    """A class pydantic has no schema for."""


def custom_type(thing: Opaque) -> str:
    """Use a thing.

    Args:
        thing: the thing.
    """
    return "done"


def unresolvable(thing: NotDefinedAnywhere) -> str:  # noqa: F821 - the user's mistake
    """Use a thing.

    Args:
        thing: the thing.
    """
    return "done"


def plain(a: int, b: int = 2) -> int:
    """Add.

    Args:
        a: one.
        b: two.
    """
    return a + b


def _with_tool(tool, offered: bool = True) -> Agent:
    agent = Agent()
    agent.add_action("go", [InputEvent], go)
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, CONNECTION)
    agent.add_resource("t", ResourceType.TOOL, tool)
    agent.add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=["t"] if offered else []))
    return agent


@pytest.mark.parametrize(("fn", "expected"), [
    (custom_type, f"tool resource 't' ({__name__}:custom_type): its arguments cannot be "
                  "described to a model as JSON Schema at parameter 'thing' (Opaque) "
                  "(PydanticSchemaGenerationError"),
    (unresolvable, f"tool resource 't' ({__name__}:unresolvable): its arguments cannot be "
                   "described to a model as JSON Schema (NameError: name "
                   "'NotDefinedAnywhere' is not defined)"),
])
def test_a_tool_whose_arguments_cannot_be_described_is_a_plan_error(fn, expected):
    """It passed the plan; each chat offering it then failed with pydantic's error (or a
    ``NameError``), naming neither the tool nor the parameter."""
    for tool in (fn, ResourceDescriptor(clazz="flink_agents_py.api.FunctionTool",
                                        func=f"{__name__}:{fn.__name__}")):
        with pytest.raises(PlanError) as info:
            AgentPlan.from_agent(_with_tool(tool))
        [problem] = info.value.problems
        assert problem.startswith(expected), problem
        assert "give each parameter a type hint pydantic renders" in problem
    AgentPlan.from_agent(_with_tool(fn, offered=False))  # not offered to a model: no schema


def test_a_tool_that_describes_fine_still_runs():
    records = [{"key": "a", "n": 1}]
    result = AgentsExecutionEnvironment.local().from_list(records).apply(
        _with_tool(plain)).run()
    assert result.errors == [] and result.outputs == [records[0]]


@pytest.mark.parametrize("tool", [functools.partial(plain, b=3), type("Adder", (), {
    "__call__": lambda self, a: a})()])
def test_a_tool_without_a_qualified_name_names_the_fix_not_an_attribute_error(tool):
    with pytest.raises(PlanError, match=r"tool resource 't': a tool must be a function \(def "
                                        r"or async def\), got a \w+ object, which has no "
                                        r"module:qualname .* wrap it in a function"):
        AgentPlan.from_agent(_with_tool(tool))


def test_an_action_naming_an_event_class_is_a_plan_error():
    """An ``Event`` class takes ``*args``, so it passed the ``(event, ctx)`` check, and every
    record failed with ``OutputEvent() takes at most 1 positional argument(s)``."""
    agent = Agent()
    agent.add_action("x", [InputEvent], OutputEvent)
    with pytest.raises(PlanError) as info:
        AgentPlan.from_agent(agent)
    assert info.value.problems == [
        "action 'x' names the class OutputEvent, not a function: name the function taking "
        "(event, ctx) that the action runs"]


def _setup_agent(**arguments) -> Agent:
    agent = Agent()
    agent.add_action("go", [InputEvent], go)
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, CONNECTION)
    agent.add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", **arguments))
    return agent


@pytest.mark.parametrize(("arguments", "expected"), [
    ({"subagents": "kid"}, ["chat_model resource 'm': subagents must be a list of sub-agent "
                            "names, got the string 'kid' (write subagents=['kid'])"]),
    ({"tools": [1, None]}, ["chat_model resource 'm': tools.0: Input should be a valid string "
                            "(got 1)",
                            "chat_model resource 'm': tools.1: Input should be a valid string "
                            "(got None)"]),
    ({"subagents": [7]}, ["chat_model resource 'm': subagents.0: Input should be a valid "
                          "string (got 7)"]),
])
def test_a_setups_names_of_the_wrong_kind_are_one_problem_each(arguments, expected):
    """``subagents="kid"`` was read letter by letter (sub-agents 'k', 'i' and 'd' not
    declared), and a name that is not a string was also reported as "not declared"."""
    with pytest.raises(PlanError) as info:
        AgentPlan.from_agent(_setup_agent(**arguments))
    assert info.value.problems == expected


def test_a_connection_that_is_not_a_string_is_one_problem():
    agent = Agent()
    agent.add_action("go", [InputEvent], go)
    agent.add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(ChatModelSetup,
                                                                         connection=5))
    with pytest.raises(PlanError) as info:
        AgentPlan.from_agent(agent)
    assert info.value.problems == [
        "chat_model resource 'm': connection: Input should be a valid string (got 5)"]
