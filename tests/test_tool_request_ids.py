"""A ToolRequestEvent an action builds: each call's result comes back under its own id.

``ToolResponseEvent.responses`` is keyed by call id, so two calls with one id would leave one
result behind the other's. A model's answer is fixed by the chat action (unique synthetic
ids); a request an action builds itself is refused where it is built, naming the id.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatModelSetup,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    ToolCall,
    ToolRequestEvent,
    ToolResponseEvent,
    action,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel


def doubled(a: int) -> int:
    """Return twice a.

    Args:
        a: a number.
    """
    return 2 * a


class AsksTools(Agent):
    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(ToolRequestEvent(model="model", tool_calls=[
            {"id": cid, "type": "function", "function": {"name": "doubled", "arguments": {"a": a}}}
            for cid, a in event.input["calls"]]))

    @action(ToolResponseEvent)
    @staticmethod
    def answer(event: ToolResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={
            "key": ctx.key, "results": {cid: r.content for cid, r in event.responses.items()}}))


def _agent() -> Agent:
    agent = AsksTools()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(ScriptedChatModel, default_reply="?"))
    agent.add_resource("model", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn", tools=["doubled"]))
    agent.add_resource("doubled", ResourceType.TOOL, doubled)
    return agent


def _run(records: list[dict[str, Any]]) -> Any:
    return (AgentsExecutionEnvironment.local().from_list(records, key_selector=lambda r: r["k"])
            .apply(_agent()).run())


def test_a_request_with_a_repeated_call_id_fails_its_action_naming_the_id_and_others_run():
    res = _run([{"k": "dup", "calls": [["c1", 1], ["c2", 2], ["c1", 3]]},
                {"k": "ok", "calls": [["c1", 1], ["c2", 2]]}])
    assert res.outputs == [{"key": "ok", "results": {"c1": 2, "c2": 4}}]
    [error] = res.errors
    assert error.key == "dup" and error.action == "ask"
    assert "tool_calls[0] and tool_calls[2] share the id 'c1'" in error.message


def test_the_event_refuses_repeated_ids_where_it_is_built_and_keeps_distinct_ones():
    with pytest.raises(ValidationError, match="share the id 'a'"):
        ToolRequestEvent(model="m", tool_calls=[ToolCall(id="a", name="t"),
                                                ToolCall(id="a", name="u")])
    idless = ToolRequestEvent(model="m", tool_calls=[ToolCall(id="", name="t"),
                                                     ToolCall(id="", name="u")])
    assert [c.id for c in idless.tool_calls] == ["call#0", "call#1"]  # (test_tool_call_ids)
    event = ToolRequestEvent(model="m", tool_calls=[ToolCall(id="a", name="t"),
                                                    ToolCall(id="b", name="t")])
    assert [c.id for c in event.tool_calls] == ["a", "b"]
