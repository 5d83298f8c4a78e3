"""Mistakes of a newcomer's second hour, each met writing agents from the README and docs.

Each test pins a message that left the reader without what was wrong or where: an action's
wrong signature (always "is it missing @staticmethod?"), a misspelt tool, fallback or
resource name with no near name offered (though the docs promise one), and an error row
pointing at the standard library or pydantic instead of the user's own line.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatModelSetup,
    InputEvent,
    OutputEvent,
    PlanError,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
    tool,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.plan import AgentPlan

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve()


def _problem(agent: Agent) -> str:
    with pytest.raises(PlanError) as caught:
        AgentPlan.from_agent(agent)
    return str(caught.value)


def _line(fn: object) -> int:
    return fn.__code__.co_firstlineno  # type: ignore[attr-defined]


# -- an action's signature -----------------------------------------------------------------
class OneParameter(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent) -> None:
        pass


class NotStatic(Agent):
    @action(InputEvent)
    def on_input(self, event: InputEvent, ctx: RunnerContext) -> None:
        pass


class OneTooMany(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext, extra: int) -> None:
        pass


class Swapped(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(ctx: RunnerContext, event: InputEvent) -> None:
        ctx.send_event(OutputEvent(output=1))


class SwappedUnannotated(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(ctx, event) -> None:  # noqa: ANN001 - as a newcomer writes it
        ctx.send_event(OutputEvent(output=1))


class Fine(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event, ctx, *rest, extra=1) -> None:  # noqa: ANN001
        ctx.send_event(OutputEvent(output=event.input))


def test_an_action_taking_one_parameter_is_not_told_to_add_staticmethod():
    # before: "action 'on_input' must take (event, ctx); is it missing @staticmethod?"
    # for a static method plainly there, and no word of where the function is
    text = _problem(OneParameter())
    assert (
        f"action 'on_input' (OneParameter.on_input, {HERE}:"
        f"{_line(OneParameter.on_input)}) must take (event, ctx), but takes (event): "
        "add the parameter it lacks"
    ) in text
    assert "@staticmethod" not in text


def test_a_method_without_staticmethod_is_told_so_with_what_it_takes():
    text = _problem(NotStatic())
    assert "but takes (self, event, ctx): is it missing @staticmethod?" in text
    assert f"NotStatic.on_input, {HERE}:" in text


def test_a_parameter_too_many_is_named():
    text = _problem(OneTooMany())
    assert "but takes (event, ctx, extra): give extra a default, or remove it" in text


@pytest.mark.parametrize("agent", [Swapped, SwappedUnannotated])
def test_the_context_first_is_refused_when_the_plan_is_built(agent):
    # before: the plan compiled, and every record failed with "'InputEvent' object has no
    # attribute 'send_event'" at pydantic's __getattr__
    text = _problem(agent())
    assert "must take (event, ctx), but takes (ctx, event), the context first: swap them" in text


def test_an_action_that_takes_event_and_ctx_still_compiles_and_runs():
    result = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(Fine()).run()
    assert result.outputs == [{"key": "a"}] and result.errors == []


def test_an_action_with_no_trigger_says_how_to_name_one():
    class NoTrigger(Agent):
        @action()
        @staticmethod
        def on_input(event, ctx) -> None:  # noqa: ANN001
            pass

    assert "has no trigger event type: name one, e.g. @action(InputEvent)" in _problem(NoTrigger())


def test_a_yaml_action_with_a_wrong_signature_says_what_it_takes(tmp_path, monkeypatch):
    from flink_agents_py.yaml import YamlError, load_agent

    (tmp_path / "my_steps.py").write_text("def one(event):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    doc = tmp_path / "agents.yaml"
    doc.write_text(
        "agents:\n  - name: a\n    actions:\n"
        "      - {name: go, function: 'my_steps:one', on: [InputEvent]}\n"
    )
    with pytest.raises(YamlError) as caught:
        load_agent(doc)
    assert "'my_steps:one' must take (event, ctx), but takes (event): add the parameter" in str(
        caught.value
    )


# -- a misspelt name gets the near one -----------------------------------------------------
def _lookup(item: str) -> dict:
    """Look an item up.

    Args:
        item: the item.
    """
    return {"item": item}


def _agent_naming(tools: list[str], fallbacks: list[str]) -> Agent:
    agent = Fine()
    agent.add_resource(
        "conn",
        ResourceType.CHAT_MODEL_CONNECTION,
        ResourceDescriptor(ScriptedChatModel, default_reply="ok"),
    )
    agent.add_resource("lookup_item", ResourceType.TOOL, _lookup)
    agent.add_resource(
        "small", ResourceType.CHAT_MODEL, ResourceDescriptor(ChatModelSetup, connection="conn")
    )
    agent.add_resource(
        "llm",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor(ChatModelSetup, connection="conn", tools=tools, fallbacks=fallbacks),
    )
    return agent


def test_a_misspelt_tool_or_fallback_gets_did_you_mean():
    # the docs promised "the near one" for a tool; only connections and prompts had it
    text = _problem(_agent_naming(["lookup_itme"], ["smal"]))
    assert (
        "names tool 'lookup_itme', which is not declared (tools: lookup_item; did you "
        "mean 'lookup_item'?)"
    ) in text
    assert (
        "names 'smal' in its fallbacks, which is not a declared chat_model resource "
        "(declared: llm, small; did you mean 'small'?)" in text
    )


def test_a_name_near_nothing_gets_no_guess():
    text = _problem(_agent_naming(["weather"], []))
    assert "names tool 'weather', which is not declared (tools: lookup_item)" in text


def test_a_misspelt_resource_asked_for_at_run_time_gets_did_you_mean():
    class Asks(Agent):
        @action(InputEvent)
        @staticmethod
        def on_input(event, ctx) -> None:  # noqa: ANN001
            ctx.get_resource("lookup_itme", ResourceType.TOOL)

    agent = Asks()
    agent.add_resource("lookup_item", ResourceType.TOOL, _lookup)
    [error] = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(agent).run().errors
    assert error.message == (
        "no tool resource named 'lookup_itme' (declared: lookup_item); did you mean 'lookup_item'?"
    )


# -- an error row names the user's line ----------------------------------------------------
def test_an_error_row_points_at_the_users_line_not_the_library(tmp_path):
    # before: "(at .../lib/python3.11/json/decoder.py:353, in raw_decode)" and
    # "(at .../site-packages/pydantic/main.py:280, in __init__)"
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "my_agent.py").write_text(
        textwrap.dedent("""
        import json

        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import Agent, Event, InputEvent, OutputEvent, action


        class Scored(Event):
            score: int


        class Parse(Agent):
            @action(InputEvent)
            @staticmethod
            def on_input(event, ctx):
                if event.input["kind"] == "json":
                    ctx.send_event(OutputEvent(output=json.loads(event.input["text"])))
                else:
                    ctx.send_event(Scored(score=event.input["text"]))


        records = [{"key": "a", "kind": "json", "text": "{bad"},
                   {"key": "b", "kind": "event", "text": "ten"}]
        for error in AgentsExecutionEnvironment.local().from_list(records).apply(
                Parse()).run().errors:
            print(str(error).splitlines()[-1])
    """)
    )
    proc = subprocess.run(
        [sys.executable, "my_agent.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=100,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )
    assert proc.returncode == 0, proc.stderr
    mine = tmp_path.resolve() / "my_agent.py"
    assert sorted(proc.stdout.splitlines()) == sorted(
        [
            f"key 'a', input 0, r0/on_input: JSONDecodeError: Expecting property name enclosed "
            f"in double quotes: line 1 column 2 (char 1) (at {mine}:17, in on_input)",
            f"      For further information visit https://errors.pydantic.dev/"
            f"{_pydantic_docs()}/v/int_parsing (at {mine}:19, in on_input)",
        ]
    )


def _pydantic_docs() -> str:
    import pydantic

    return ".".join(pydantic.VERSION.split(".")[:2])


def test_a_traceback_only_in_libraries_still_names_the_last_frame_outside_the_package():
    from flink_agents_py.runtime.internal import error_line

    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/srv/app/jobs/steps.py", line 3, in go\n'
        '  File "/usr/lib/python3.11/json/__init__.py", line 346, in loads\n'
        '  File "/opt/venv/lib/python3.11/site-packages/flink_agents_py/x.py", '
        "line 1, in f\n"
        "ValueError: x"
    )
    row = {
        "key": "a",
        "seq": 0,
        "execution_id": "r0/go",
        "action": "go",
        "error_type": "ValueError",
        "message": "x",
        "traceback": traceback,
    }
    assert error_line(row).endswith("(at /srv/app/jobs/steps.py:3, in go)")
    only_libraries = {
        **row,
        "traceback": traceback.replace("/srv/app/jobs/steps.py", "/usr/lib/python3.11/steps.py"),
    }
    assert error_line(only_libraries).endswith(
        "(at /usr/lib/python3.11/json/__init__.py:346, in loads)"
    )
    cell = {  # a notebook cell is the user's code, though its name is no path
        **row,
        "traceback": traceback.replace("/srv/app/jobs/steps.py", "<ipython-input-3-1f2e>"),
    }
    assert error_line(cell).endswith("(at <ipython-input-3-1f2e>:3, in go)")


# -- a tool written as a method ------------------------------------------------------------
class _Chats(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event, ctx) -> None:  # noqa: ANN001
        from flink_agents_py.api import ChatMessage

        reply = await ctx.chat("llm", [ChatMessage(content="x")])
        ctx.send_event(OutputEvent(output=reply.message.content))


def _with_model(agent: Agent) -> Agent:
    from flink_agents_py.testing import model_from_function, tool_call

    def script(request):  # noqa: ANN001, ANN202
        if not request.tool_results:
            return tool_call("lookup", item="x")
        return "saw " + request.tool_results[0].content

    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(script))
    agent.add_resource(
        "llm",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor(ChatModelSetup, connection="conn", tools=["lookup"]),
    )
    return agent


def test_a_tool_taking_self_is_refused_when_the_plan_is_built():
    # before: the plan compiled, the model was offered a 'self' argument, and every call
    # failed with "self: Field required" inside the chat, the action's output saying so
    class Methods(_Chats):
        @tool
        def lookup(self, item: str) -> str:  # noqa: ANN001
            """Look an item up.

            Args:
                item: the item.
            """
            return item.upper()

    text = _problem(_with_model(Methods()))
    assert (
        "tool resource 'lookup' (" in text
        and "Methods.lookup): its first parameter is 'self'" in text
    )
    assert "declare it with @staticmethod and drop 'self'" in text


def test_a_static_tool_on_the_class_still_runs():
    class Static(_Chats):
        @tool
        @staticmethod
        def lookup(item: str) -> str:
            """Look an item up.

            Args:
                item: the item.
            """
            return item.upper()

    result = (
        AgentsExecutionEnvironment.local()
        .from_list([{"key": "a"}])
        .apply(_with_model(Static()))
        .run()
    )
    assert result.outputs == ["saw X"] and result.errors == []


# -- YAML names and import paths -----------------------------------------------------------
def test_a_misspelt_name_in_yaml_gets_did_you_mean(tmp_path, monkeypatch):
    from flink_agents_py.yaml import YamlError, load_agent

    (tmp_path / "my_app.py").write_text(
        "def script(request):\n    return 'ok'\n\n\n"
        "def lookup(item: str) -> str:\n    return item\n\n\n"
        "def go(event, ctx):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    doc = tmp_path / "agents.yaml"
    doc.write_text(
        textwrap.dedent("""\
        agents:
          - name: a
            actions: [{name: go, function: 'my_app:go', on: [InputEvent]}]
            chat_model_connections:
              - name: conn
                clazz: flink_agents_py.integrations.chat_models.ScriptedChatModel
                function: my_app:script
            chat_model_setups:
              - {name: llm, connection: con, tools: [lookpu]}
            tools:
              - {name: lookup, function: 'my_app:lookup'}
        """)
    )
    with pytest.raises(YamlError) as caught:
        load_agent(doc)
    text = str(caught.value)
    assert (
        "agents.yaml:9: agents[0].chat_model_setups[0].connection: names connection 'con', "
        "which this agent does not declare (chat_model_connections: conn; did you mean "
        "'conn'?)"
    ) in text
    assert (
        "names tool 'lookpu', which this agent does not declare (tools: lookup; did you "
        "mean 'lookup'?)" in text
    )


def test_a_misspelt_function_path_gets_did_you_mean(tmp_path, monkeypatch):
    from flink_agents_py.api import ResourceError
    from flink_agents_py.api.internal import import_qualified

    (tmp_path / "my_fakes.py").write_text("def script(request):\n    return 'ok'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ResourceError) as caught:
        import_qualified("my_fakes:scirpt")
    assert str(caught.value) == (
        "'my_fakes' has no attribute path 'scirpt' (did you mean 'script'?)"
    )
    with pytest.raises(ResourceError) as caught:
        import_qualified("my_fakes:answer")
    assert str(caught.value) == "'my_fakes' has no attribute path 'answer'"
