"""Misuse that used to be silent (or an unhelpful AttributeError) gets a clear error.

Covers ``ctx.chat`` in a non-async action, futures and sub-agent handles used without
``await``, an agent with no actions, a bare ``@action``, and replacing a declared resource
(a model or a tool) with a test double: by subclass redefinition, ``Agent.override_resource``
and the ``Agent.override(...)`` context.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    AgentsError,
    ChatMessage,
    ChatModelSetup,
    InputEvent,
    InternalSubagent,
    MessageRole,
    OutputEvent,
    PlanError,
    ResourceDescriptor,
    ResourceError,
    ResourceType,
    action,
    chat_model_connection,
    chat_model_setup,
    tool,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.plan import AgentPlan

pytestmark = pytest.mark.timeout(60)

ASK = [ChatMessage(role=MessageRole.USER, content="hi")]


def local(agent: Agent, records: list[Any]) -> Any:
    return AgentsExecutionEnvironment.local().from_list(records).apply(agent).run()


def with_model(agent: Agent, reply: str = "hello") -> Agent:
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(ScriptedChatModel, default_reply=reply))
    agent.add_resource("model", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn"))
    return agent


# -- ctx.chat in a non-async action -----------------------------------------------------------

class SyncChat(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: Any) -> None:
        ctx.chat("model", ASK)
        ctx.send_event(OutputEvent(output="sent"))


def test_chat_in_a_non_async_action_fails_the_action_clearly():
    result = local(with_model(SyncChat()), [{"key": "a"}])
    assert result.outputs == []  # its events are not delivered: the action failed
    [err] = result.errors
    assert err.action == "on_input" and err.error_type == "UsageError"
    assert "'on_input' is not async" in err.message
    assert "async def" in err.message and "await" in err.message


# -- ctx.wait_for / ctx.sleep without await: the same guard as ctx.chat ------------------------

class SyncWaits(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: Any) -> None:
        if event.input["what"] == "sleep":
            ctx.sleep(5)
        else:
            ctx.wait_for("approval-1", timeout_s=5)
        ctx.send_event(OutputEvent(output="went on"))


def test_wait_or_sleep_in_a_non_async_action_fails_the_action_clearly():
    started = time.monotonic()
    result = local(SyncWaits(), [{"key": "a", "what": "sleep"}, {"key": "b", "what": "wait"}])
    assert time.monotonic() - started < 5  # no wait was left open to time out
    assert result.outputs == []
    errs = {e.key: e for e in result.errors}
    assert errs["a"].error_type == errs["b"].error_type == "UsageError"
    assert "'on_input' is not async" in errs["a"].message
    # each call with the line that made it (before: "(ctx.sleep(...))", no place)
    lines = Path(__file__).read_text().splitlines()
    at = {what: f"{__file__.removesuffix('c')}:{lines.index(code) + 1}" for what, code in (
        ("sleep", "            ctx.sleep(5)"),
        ("wait", '            ctx.wait_for("approval-1", timeout_s=5)'))}
    assert f"(ctx.sleep(...) at {at['sleep']})" in errs["a"].message
    assert "await ctx.sleep(...)" in errs["a"].message
    assert f"(ctx.wait_for(...) at {at['wait']})" in errs["b"].message
    assert "async def" in errs["b"].message


class AsyncWaitsNoAwait(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: Any) -> None:
        if event.input["what"] == "sleep":
            ctx.sleep(5)  # SLEEP-NO-AWAIT
        else:
            ctx.wait_for("x", timeout_s=5)  # WAIT-NO-AWAIT
        ctx.send_event(OutputEvent(output="went on"))


def _line_of(marker: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line and "_line_of" not in line)


def test_wait_or_sleep_never_awaited_in_an_async_action_is_warned_about_with_its_line(caplog):
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        result = local(AsyncWaitsNoAwait(), [{"key": "a", "what": "sleep"},
                                             {"key": "b", "what": "wait"}])
    assert result.errors == [] and result.outputs == ["went on"] * 2
    warned = [r.getMessage() for r in caplog.records if "was never awaited" in r.getMessage()]
    assert len(warned) == 2, warned
    sleep_line, wait_line = _line_of("# SLEEP-NO-AWAIT"), _line_of("# WAIT-NO-AWAIT")
    [on_sleep] = [w for w in warned if f"{__file__}:{sleep_line}" in w]
    [on_wait] = [w for w in warned if f"{__file__}:{wait_line}" in w]
    assert "(sleep ''" in on_sleep and "(wait 'x')" in on_wait
    assert "did not wait for it" in on_wait and "await it" in on_wait


class AwaitsThem(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: Any) -> None:
        await ctx.sleep(0.01)
        reply = await ctx.chat("model", ASK)
        ctx.send_event(OutputEvent(output=reply.message.content))


def test_awaited_sleeps_and_chats_are_not_warned_about(caplog):
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        result = local(with_model(AwaitsThem()), [{"key": "a"}])
    assert result.errors == [] and result.outputs == ["hello"]
    assert not [r for r in caplog.records if "never awaited" in r.getMessage()]


# -- futures and handles used without await ----------------------------------------------------

class NoAwait(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: Any) -> None:
        what = event.input["what"]
        if what == "chat":
            ctx.send_event(OutputEvent(output=ctx.chat("model", ASK).message.content))
        elif what == "call":
            ctx.send_event(OutputEvent(output=ctx.durable_execute_async(len, "abc").real))
        else:
            handle = await ctx.submit_subagent("child", {"x": 1})
            ctx.send_event(OutputEvent(output=handle.success))


class Child(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output="child"))


def test_attribute_of_an_unawaited_future_says_await_it():
    agent = with_model(NoAwait()).add_resource("child", ResourceType.AGENT, ResourceDescriptor(
        InternalSubagent, agent=Child(), description="child"))
    result = local(agent, [{"key": "a", "what": "chat"}, {"key": "b", "what": "call"},
                           {"key": "c", "what": "handle"}])
    assert result.outputs == []
    errs = {e.key: e for e in result.errors}
    assert errs["a"].error_type == "AttributeError"
    assert errs["a"].message.startswith("ChatFuture has no attribute 'message': await it first")
    assert "r0/on_input" in errs["a"].message
    assert errs["b"].message.startswith("DurableCall has no attribute 'real': await it first")
    assert errs["c"].message.startswith(
        "SubagentHandle of sub-agent 'child' has no attribute 'success': await it first")


# -- an agent with no actions; a bare @action -------------------------------------------------

def test_agent_without_actions_is_a_plan_error():
    class Empty(Agent):
        @chat_model_connection
        @staticmethod
        def conn() -> ResourceDescriptor:
            return ResourceDescriptor(ScriptedChatModel)

    with pytest.raises(PlanError, match="declares no actions"):
        AgentPlan.from_agent(Empty())
    with pytest.raises(PlanError, match="declares no actions"):
        AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(Agent())


def test_bare_action_decorator_fails_at_class_definition():
    with pytest.raises(TypeError, match=r"@action needs the event types.*@action\(InputEvent\)"):
        class Bare(Agent):
            @action
            @staticmethod
            def on_input(event: InputEvent, ctx: Any) -> None:
                pass
    with pytest.raises(AgentsError):
        class Bare2(Agent):
            @action
            @staticmethod
            def on_input(event: InputEvent, ctx: Any) -> None:
                pass


# -- replacing a resource with a test double ----------------------------------------------------

def real_price(item: str) -> int:
    """The real price service.

    Args:
        item: the item.
    """
    raise RuntimeError("no network in tests")


def fake_price(item: str) -> int:
    """A fixed price.

    Args:
        item: the item.
    """
    return 42


class Shop(Agent):
    @chat_model_connection
    @staticmethod
    def conn() -> ResourceDescriptor:
        return ResourceDescriptor("my_company.llm.RealConnection", endpoint="https://llm")

    @chat_model_setup
    @staticmethod
    def model() -> ResourceDescriptor:
        return ResourceDescriptor(ChatModelSetup, connection="conn")

    @tool
    @staticmethod
    def price(item: str) -> int:
        """The real price.

        Args:
            item: the item.
        """
        return real_price(item)

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: Any) -> None:
        answer = await ctx.chat("model", ASK)
        tool_ = ctx.get_resource("price", ResourceType.TOOL)
        ctx.send_event(OutputEvent(output=[answer.message.content,
                                           tool_.function(item="x")]))


FAKE_CONN = ResourceDescriptor(ScriptedChatModel, default_reply="fake answer")


def test_override_resource_swaps_a_model_and_a_tool():
    agent = Shop().override_resource("conn", FAKE_CONN).override_resource("price", fake_price)
    result = local(agent, [{"key": "a"}])
    assert result.errors == [] and result.outputs == [["fake answer", 42]]
    metadata = AgentPlan.from_agent(agent).resources[ResourceType.TOOL]["price"].build().metadata
    assert metadata.name == "price"  # the model still sees the declared tool name


def test_override_context_restores_the_declared_resources():
    agent = Shop()
    with agent.override(conn=FAKE_CONN, price=fake_price):
        result = local(agent, [{"key": "a"}])
    assert result.outputs == [["fake answer", 42]]
    plan = AgentPlan.from_agent(agent)
    assert plan.resources[ResourceType.CHAT_MODEL_CONNECTION]["conn"].descriptor.clazz == \
        "my_company.llm.RealConnection"


def test_override_of_an_undeclared_name_is_an_error():
    with pytest.raises(ResourceError, match=r"'cnn'.*declared: .*conn"):
        Shop().override_resource("cnn", FAKE_CONN)
    with pytest.raises(ResourceError, match="'nope'"):
        with Shop().override(nope=FAKE_CONN):
            pass


def test_subclass_redefinition_replaces_the_resource():
    class TestShop(Shop):
        @chat_model_connection
        @staticmethod
        def conn() -> ResourceDescriptor:
            return FAKE_CONN

        @tool
        @staticmethod
        def price(item: str) -> int:
            """A fixed price.

            Args:
                item: the item.
            """
            return 7

    result = local(TestShop(), [{"key": "a"}])
    assert result.errors == [] and result.outputs == [["fake answer", 7]]


def test_duplicate_add_resource_points_at_override():
    agent = Shop().add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, FAKE_CONN)
    with pytest.raises(PlanError, match=r"declared more than once.*override"):
        AgentPlan.from_agent(agent)


# -- as a user runs it: their own module, outside the repository ------------------------------

def test_user_module_swaps_a_model_and_hears_about_misuse(tmp_path):
    import os
    import subprocess
    import sys
    import textwrap

    (tmp_path / "shop_agent.py").write_text(textwrap.dedent("""\
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent,
            OutputEvent, ResourceDescriptor, action, chat_model_connection, chat_model_setup)
        from flink_agents_py.integrations.chat_models import OpenAIChatModel, ScriptedChatModel


        class Shop(Agent):
            @chat_model_connection
            @staticmethod
            def llm():
                return ResourceDescriptor(OpenAIChatModel)  # needs OPENAI_API_KEY

            @chat_model_setup
            @staticmethod
            def model():
                return ResourceDescriptor(ChatModelSetup, connection="llm")

            @action(InputEvent)
            @staticmethod
            def on_input(event, ctx):  # forgot async
                ctx.chat("model", [ChatMessage(content="hi")])


        class Fixed(Shop):
            @action(InputEvent)
            @staticmethod
            async def on_input(event, ctx):
                r = await ctx.chat("model", [ChatMessage(content="hi")])
                ctx.send_event(OutputEvent(output=r.message.content))


        def run(agent):
            return AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(agent).run()


        fake = ResourceDescriptor(ScriptedChatModel, default_reply="scripted")
        for err in run(Shop().override_resource("llm", fake)).errors:
            print("ERROR", err.error_type, err.message)
        with Fixed().override(llm=fake) as agent:
            print("OUT", run(agent).outputs)
        """))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "OPENAI_API_KEY")}
    proc = subprocess.run([sys.executable, "shop_agent.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("ERROR UsageError action 'on_input' is not async")
    assert lines[1] == "OUT ['scripted']"


# -- ctx.chat with one text or one message instead of a list ----------------------------------

class OneText(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: Any) -> None:
        what = event.input["what"]
        one = {"text": "what is the weather", "message": ASK[0], "dict": ASK[0].model_dump()}
        response = await ctx.chat("model", one[what])
        ctx.send_event(OutputEvent(output=response.message.content))


def test_chat_with_one_text_or_message_instead_of_a_list_names_the_fix():
    result = local(with_model(OneText()), [{"key": k, "what": k}
                                           for k in ("text", "message", "dict")])
    assert result.outputs == []
    errs = {e.key: e for e in result.errors}
    assert errs["text"].error_type == "UsageError"
    assert "messages must be a list of ChatMessage" in errs["text"].message
    assert "got one str" in errs["text"].message
    assert "got one ChatMessage" in errs["message"].message
    assert "got one dict" in errs["dict"].message
