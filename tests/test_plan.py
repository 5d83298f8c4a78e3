"""AgentPlan: compilation, JSON round trip, validation into one PlanError."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import ClassVar

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatModelSetup,
    ChatRequestEvent,
    DuplicateNameError,
    Event,
    InputEvent,
    OutputEvent,
    PlanError,
    Prompt,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    ToolRequestEvent,
    ToolResponseEvent,
    action,
    chat_model_connection,
    chat_model_setup,
    prompt,
    tool,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.plan import BUILTIN_ACTIONS, AgentPlan
from flink_agents_py.plan._action_checks import TriggerNameWarning


class Scored(Event):
    score: int


def lookup_price(item: str) -> float:
    """Price of an item.

    Args:
        item: the item's name.
    """
    return 1.5


class Shop(Agent):
    """A module-level agent (importable, so its plan can come back from JSON)."""

    @action(InputEvent, config={"bonus": 10})
    @staticmethod
    def score(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(Scored(score=event.input["n"] + ctx.action_config["bonus"]))

    @action(Scored)
    @staticmethod
    async def emit(event: Scored, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "score": event.score}))

    @chat_model_connection
    @staticmethod
    def conn() -> ResourceDescriptor:
        return ResourceDescriptor(ScriptedChatModel, default_reply="ok")

    @chat_model_setup
    @staticmethod
    def model() -> ResourceDescriptor:
        return ResourceDescriptor(ChatModelSetup, connection="conn", prompt="sys",
                                  tools=["lookup_price", "describe"])

    @prompt
    @staticmethod
    def sys() -> Prompt:
        return Prompt.from_text("You sell {thing}.")

    @tool
    @staticmethod
    def describe(item: str) -> str:
        """Describe an item."""
        return item


def _shop() -> Agent:
    return Shop().add_resource("lookup_price", ResourceType.TOOL, lookup_price).set_config(
        max_tool_rounds=3)


def test_from_agent_compiles_actions_resources_and_config():
    plan = AgentPlan.from_agent(_shop())
    assert [a.name for a in plan.actions_for("InputEvent")] == ["score"]
    assert [a.name for a in plan.actions_for("Scored")] == ["emit"]
    assert plan.actions["score"].config == {"bonus": 10}
    assert plan.actions["score"].function.is_async is False
    assert plan.actions["emit"].function.is_async is True
    assert plan.actions["emit"].triggers == ("Scored",)
    assert plan.actions_for("NoSuchType") == ()
    res = plan.resources
    assert set(res[ResourceType.CHAT_MODEL_CONNECTION]) == {"conn"}
    assert set(res[ResourceType.CHAT_MODEL]) == {"model"}
    assert set(res[ResourceType.PROMPT]) == {"sys"}
    assert set(res[ResourceType.TOOL]) == {"describe", "lookup_price"}
    assert res[ResourceType.CHAT_MODEL]["model"].descriptor.arguments["tools"] == [
        "lookup_price", "describe"]
    assert plan.config == {"max_tool_rounds": 3}


def test_builtin_actions_are_present():
    plan = AgentPlan.from_agent(Agent().add_action("noop", [InputEvent], _ok))
    assert set(BUILTIN_ACTIONS) <= set(plan.actions)
    def names(event_type: str) -> list[str]:
        return [a.name for a in plan.actions_for(event_type)]

    assert names(ChatRequestEvent.EVENT_TYPE) == ["_chat_model_action"]
    assert names(ToolResponseEvent.EVENT_TYPE) == ["_chat_model_action"]
    assert names(ToolRequestEvent.EVENT_TYPE) == ["_tool_call_action"]
    # built-ins resolve to the runtime's functions
    assert callable(plan.actions["_chat_model_action"].function.resolve())
    assert callable(plan.actions["_tool_call_action"].function.resolve())


def test_user_action_on_builtin_event_runs_alongside_builtin():
    def watch(event, ctx):
        pass

    plan = AgentPlan.from_agent(Agent().add_action("watch", [ToolResponseEvent], watch))
    assert sorted(a.name for a in plan.actions_for("ToolResponseEvent")) == [
        "_chat_model_action", "watch"]


def test_json_round_trip():
    plan = AgentPlan.from_agent(_shop())
    text = plan.to_json()
    assert isinstance(text, str)
    back = AgentPlan.from_json(text)
    assert back.model_dump() == plan.model_dump()
    assert AgentPlan.from_json(back.to_json()).model_dump() == plan.model_dump()
    # functions and resources come back by import
    assert back.actions["score"].function.resolve() is Shop.score
    assert back.resources[ResourceType.TOOL]["lookup_price"].build().function is lookup_price
    built_prompt = back.resources[ResourceType.PROMPT]["sys"].build()
    assert built_prompt.format_string(thing="tea") == "You sell tea."


def test_plan_from_json_runs_on_local_runner():
    back = AgentPlan.from_json(AgentPlan.from_agent(_shop()).to_json())
    out = (
        AgentsExecutionEnvironment.local()
        .from_list([{"key": "a", "n": 1}, {"key": "b", "n": 2}])
        .apply(back)
        .collect()
    )
    assert sorted(out, key=lambda o: o["key"]) == [
        {"key": "a", "score": 11}, {"key": "b", "score": 12}]


def test_non_agent_is_rejected():
    with pytest.raises(PlanError):
        AgentPlan.from_agent(object())  # type: ignore[arg-type]


# --------------------------------------------------------------------------- validation


def _problems(agent: Agent) -> list[str]:
    with pytest.raises(PlanError) as info:
        AgentPlan.from_agent(agent)
    problems = info.value.problems
    for p in problems:  # every problem is in the one message
        assert p in str(info.value)
    return problems


def _ok(event, ctx):
    pass


def _acting() -> Agent:
    """An agent with one action (an agent without any is a plan error of its own)."""
    return Agent().add_action("noop", [InputEvent], _ok)


def _single(problems: list[str], *needles: str) -> str:
    hits = [p for p in problems if all(n in p for n in needles)]
    assert len(hits) == 1, (needles, problems)
    return hits[0]


def test_duplicate_action_name_class_and_add_action():
    class A(Agent):
        @action(InputEvent)
        @staticmethod
        def handle(event, ctx):
            pass

    problems = _problems(A().add_action("handle", [InputEvent], _ok))
    assert len(problems) == 1
    _single(problems, "'handle'", "more than once")


def test_duplicate_action_name_via_add_action_twice():
    agent = Agent().add_action("x", [InputEvent], _ok)
    with pytest.raises(DuplicateNameError, match="Action 'x' already defined"):
        agent.add_action("x", [InputEvent], _ok)
    assert [name for name, _, _ in agent.declared_actions()] == ["x"]


def test_action_named_like_a_builtin():
    problems = _problems(Agent().add_action("_chat_model_action", [InputEvent], _ok))
    _single(problems, "'_chat_model_action'")


def test_duplicate_resource_name():
    agent = _acting().add_resource("p", ResourceType.PROMPT, Prompt.from_text("a"))
    with pytest.raises(DuplicateNameError, match=r"prompt 'p' already defined.*override"):
        agent.add_resource("p", ResourceType.PROMPT, Prompt.from_text("b"))
    # a plan built another way (the instance's list filled directly) still lists it
    agent._resources.append((ResourceType.PROMPT, "p", Prompt.from_text("b")))
    problems = _problems(agent)
    assert len(problems) == 1
    _single(problems, "'p'", "more than once")


def test_same_name_for_different_resource_types_is_fine():
    agent = (
        _acting()
        .add_resource("x", ResourceType.PROMPT, Prompt.from_text("a"))
        .add_resource("x", ResourceType.TOOL, lookup_price)
    )
    plan = AgentPlan.from_agent(agent)
    assert "x" in plan.resources[ResourceType.PROMPT] and "x" in plan.resources[ResourceType.TOOL]


def test_action_with_no_trigger():
    class A(Agent):
        @action()
        @staticmethod
        def lonely(event, ctx):
            pass

    problems = _problems(A().add_action("also_lonely", [], _ok))
    _single(problems, "'lonely'", "no trigger")
    _single(problems, "'also_lonely'", "no trigger")


def test_trigger_misspelling_a_known_event_type():
    # a string naming no Event subclass is a user event type (Flink Agents' idiom), unless it
    # is within a letter or two of a declared type: then it is taken for a typo
    class A(Agent):
        @action("InputEvnt")
        @staticmethod
        def on_nothing(event, ctx):
            pass

    problems = _problems(A())
    _single(problems, "'on_nothing'", "InputEvnt", "'InputEvent'")


def test_trigger_near_a_programs_own_event_type_is_a_warning():
    # Flink Agents takes any string: "order_shipped" may be a type of the program's own,
    # sent as Event(type=...), beside a class of type "order_shipped2"
    class Shipped(Event):
        EVENT_TYPE: ClassVar[str] = "order_shipped2"

    class A(Agent):
        @action("order_shipped")
        @staticmethod
        def on_adhoc(event, ctx):
            pass

        @action(Shipped)
        @staticmethod
        def on_class(event, ctx):
            pass

    with pytest.warns(TriggerNameWarning, match="'order_shipped', which names no event class "
                                                "but is close to 'order_shipped2'"):
        plan = AgentPlan.from_agent(A())
    assert plan.actions["on_adhoc"].triggers == ("order_shipped",)


def test_action_not_taking_event_and_ctx():
    class A(Agent):
        @action(InputEvent)
        def forgot_staticmethod(self, event, ctx):  # three parameters
            pass

        @action(InputEvent)
        @staticmethod
        def one_arg(event):
            pass

    problems = _problems(A().add_action("no_args", [InputEvent], lambda: None))
    _single(problems, "'forgot_staticmethod'", "(event, ctx)")
    _single(problems, "'one_arg'", "(event, ctx)")
    _single(problems, "'no_args'", "(event, ctx)")


def test_action_with_defaults_or_varargs_is_accepted():
    def flexible(event, ctx, extra=None):
        pass

    def star(*args):
        pass

    plan = AgentPlan.from_agent(
        Agent()
        .add_action("flexible", [InputEvent], flexible)
        .add_action("star", [InputEvent], star))
    assert {"flexible", "star"} <= set(plan.actions)


def test_reserved_tool_prefix_via_tool_decorator():
    class A(Agent):
        @tool(name="_subagent_helper")
        @staticmethod
        def helper(q: str) -> str:
            """Help."""
            return q

        @tool
        @staticmethod
        def _subagent_direct(q: str) -> str:
            """Direct."""
            return q

    problems = _problems(A())
    _single(problems, "'_subagent_helper'", "_subagent_")
    _single(problems, "'_subagent_direct'", "_subagent_")


def test_reserved_tool_prefix_via_add_resource_function():
    @tool(name="_subagent_spec_name")
    def fine_name(q: str) -> str:
        return q

    agent = (
        _acting()
        .add_resource("_subagent_by_name", ResourceType.TOOL, lookup_price)
        .add_resource("plain_name", ResourceType.TOOL, fine_name)
    )
    problems = _problems(agent)
    _single(problems, "'_subagent_by_name'")
    _single(problems, "'_subagent_spec_name'")


def test_chat_model_setup_naming_undeclared_connection_and_tool():
    agent = (
        _acting()
        .add_resource("lookup_price", ResourceType.TOOL, lookup_price)
        .add_resource("m", ResourceType.CHAT_MODEL,
                      ResourceDescriptor(ChatModelSetup, connection="ghost_conn",
                                         tools=["lookup_price", "ghost_tool"]))
    )
    problems = _problems(agent)
    assert len(problems) == 2
    _single(problems, "'m'", "'ghost_conn'")
    _single(problems, "'m'", "'ghost_tool'")


def test_tools_given_as_one_string_is_one_problem_naming_the_fix():
    agent = (
        _acting()
        .add_resource("lookup_price", ResourceType.TOOL, lookup_price)
        .add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                      ResourceDescriptor(ScriptedChatModel))
        .add_resource("m", ResourceType.CHAT_MODEL,
                      ResourceDescriptor(ChatModelSetup, connection="conn", tools="lookup_price"))
    )
    problems = _problems(agent)
    assert len(problems) == 1, problems
    _single(problems, "'m'", "tools must be a list", "tools=['lookup_price']")


def test_resource_that_is_not_a_descriptor():
    problems = _problems(_acting().add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, 42))
    _single(problems, "'conn'")


def test_every_problem_is_collected_into_one_plan_error():
    class Broken(Agent):
        @action(InputEvent)
        @staticmethod
        def dup(event, ctx):
            pass

        @action()
        @staticmethod
        def no_trigger(event, ctx):
            pass

        @action("ChatResponseEvnt")
        @staticmethod
        def unknown_trigger(event, ctx):
            pass

        @action(InputEvent)
        @staticmethod
        def bad_signature(event):
            pass

        @tool(name="_subagent_t1")
        @staticmethod
        def t1(q: str) -> str:
            return q

        @prompt
        @staticmethod
        def p() -> Prompt:
            return Prompt.from_text("a")

    agent = (
        Broken()
        .add_action("dup", [InputEvent], _ok)
        .add_resource("p", ResourceType.PROMPT, Prompt.from_text("b"))
        .add_resource("_subagent_t2", ResourceType.TOOL, lookup_price)
        .add_resource("m", ResourceType.CHAT_MODEL,
                      ResourceDescriptor(ChatModelSetup, connection="nope_conn",
                                         tools=["nope_tool"]))
    )
    problems = _problems(agent)
    _single(problems, "'dup'")
    _single(problems, "'no_trigger'")
    _single(problems, "'unknown_trigger'", "ChatResponseEvnt")
    _single(problems, "'bad_signature'")
    _single(problems, "'_subagent_t1'")
    _single(problems, "'p'")
    _single(problems, "'_subagent_t2'")
    _single(problems, "'nope_conn'")
    _single(problems, "'nope_tool'")
    assert len(problems) == 9


def test_local_job_apply_raises_plan_error():
    with pytest.raises(PlanError):
        AgentsExecutionEnvironment.local().from_list([1]).apply(
            Agent().add_action("x", [], _ok))


def test_a_reference_to_a_declared_but_refused_resource_is_one_problem_not_two():
    """A misspelt argument of a connection is the problem; the setup naming that connection
    is not also told the connection "is not declared" (it is)."""
    class Shop(Agent):
        @chat_model_connection
        @staticmethod
        def conn() -> ResourceDescriptor:
            return ResourceDescriptor(ScriptedChatModel, script="x")

        @chat_model_setup
        @staticmethod
        def model() -> ResourceDescriptor:
            return ResourceDescriptor(ChatModelSetup, connection="conn")

        @chat_model_setup
        @staticmethod
        def other() -> ResourceDescriptor:
            return ResourceDescriptor(ChatModelSetup, connection="nowhere")

        @action(InputEvent)
        @staticmethod
        def go(event: InputEvent, ctx: RunnerContext) -> None:
            pass

    with pytest.raises(PlanError) as e:
        AgentPlan.from_agent(Shop())
    problems = e.value.problems
    assert any("'conn'" in p and "takes no argument 'script'" in p for p in problems)
    assert not any("'conn', which is not declared" in p for p in problems), problems
    assert any("'nowhere', which is not declared" in p for p in problems)
    assert len(problems) == 2, problems


def test_a_plan_compiled_before_the_runtime_is_imported_carries_the_builtin_actions(tmp_path):
    """``AgentPlan.from_agent`` first thing in a fresh process (as Flink Agents' plan tests do).

    The runtime registers the built-in actions when imported; a plan compiled in a process
    that had not imported it yet carried none, so a ``ChatRequestEvent`` triggered nothing.
    """
    (tmp_path / "my_agent.py").write_text(textwrap.dedent("""
        import json, sys
        from flink_agents_py.plan import AgentPlan
        from flink_agents_py.api import Agent, ChatRequestEvent, InputEvent, action

        class Mine(Agent):
            @action(InputEvent)
            @staticmethod
            def start(event, ctx):
                pass

        plan = AgentPlan.from_json(AgentPlan.from_agent(Mine()).to_json())
        print(json.dumps({
            "actions": sorted(plan.actions),
            "chat": [a.name for a in plan.actions_for(ChatRequestEvent.EVENT_TYPE)]}))
    """))
    proc = subprocess.run([sys.executable, "my_agent.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"actions": sorted([*BUILTIN_ACTIONS, "start"]),
                   "chat": ["_chat_model_action"]}
