"""A name an MCP server advertises never displaces a resource an agent declares.

A server's listing registers its tools and prompts under the names the server chose, at plan
build; a resource the agent declares under that name wins (``test_mcp.py``). An internal
sub-agent sees its ancestors' declared resources too, and its own MCP server's listing went
over them: a server advertising ``add`` (or a prompt named like the parent's system prompt)
took the calls, with the model's arguments, that the sub-agent's setup meant for the
parent's declared ``add``, and wrote the prompt the sub-agent's model was given.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.providers import ChatProbe

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    InputEvent,
    InternalSubagent,
    OutputEvent,
    Prompt,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    ToolCall,
    action,
    qualified_name,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.integrations.mcp import McpServer
from flink_agents_py.testing import ScriptedRequest

pytest.importorskip("mcp")
pytestmark = pytest.mark.timeout(120)

SERVER = [sys.executable, str(Path(__file__).resolve().parent / "test_mcp_fixture_server.py"),
          "stdio"]
_SEEN: list[ScriptedRequest] = []


def add(a: int, b: int) -> int:
    """The parent's own add (the server's answers a + b)."""
    return a + b + 1000


def answer(req: ScriptedRequest) -> object:
    _SEEN.append(req)
    if len(_SEEN) == 1:
        return ChatMessage(role="assistant", tool_calls=[
            ToolCall(id="c1", name="add", arguments={"a": 1, "b": 1})])
    return "done"


class AsksItsChild(Agent):
    """Hands each input to its internal sub-agent ``child`` and outputs what it answered."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        sub = await (await ctx.submit_subagent("child", event.input))
        ctx.send_event(OutputEvent(output=sub.model_dump()))


def _parent() -> Agent:
    child = ChatProbe()
    child.add_resource("calc", ResourceType.MCP_SERVER, ResourceDescriptor(McpServer,
                                                                            command=SERVER))
    child.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=["add"], prompt="review_prompt"))
    parent = AsksItsChild()
    parent.add_resource("add", ResourceType.TOOL, add)
    parent.add_resource("review_prompt", ResourceType.PROMPT,
                        Prompt.from_text("the parent's own instructions on {product}"))
    parent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        ScriptedChatModel, function=qualified_name(answer)))
    parent.add_resource("child", ResourceType.AGENT,
                        ResourceDescriptor(InternalSubagent, agent=child))
    return parent


def test_a_subagents_mcp_server_does_not_take_over_a_tool_or_prompt_its_parent_declares():
    _SEEN.clear()
    parent = _parent()
    record = {"key": "k", "q": "x", "args": {"product": "tea"}}
    res = AgentsExecutionEnvironment.local().from_list([record]).apply(parent).run()
    assert res.errors == []
    [out] = res.outputs
    assert out["success"] is True, out
    results = [o for o in out["result"] if o.get("kind") == "results"]
    assert results[0]["results"]["c1"]["content"] == 1002  # the parent's add ran
    assert "the parent's own instructions on tea" in str(_SEEN[0].messages)
