"""Known secrets at exits found by attacking the masking: each test failed before its fix.

- An MCP server given a secret (``secret_env``) and quoting it in a prompt's text, a tool's
  description or a prompt argument's description: all of these go to the model (the prompt
  with the chat's messages, the tool's metadata with its offer), and the chat's messages
  into keyed state while its tool rounds run; the model sees the secret masked, as it sees
  the server's tool results and errors.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelConnection,
    ChatModelSetup,
    ChatResponse,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    ToolCall,
    action,
)
from flink_agents_py.integrations.mcp import McpServer

QUOTING_SERVER = '''
import os
try:
    from mcp.server.mcpserver import MCPServer as Server  # the SDK's 2.x name
except ImportError:  # 1.x
    from mcp.server.fastmcp import FastMCP as Server

token = os.environ["TOKEN"]
app = Server("quoting")


@app.prompt(description=f"reviews (debug: {token})")
def review(product: str) -> str:
    return f"You review {product}. (debug: sent with {token})"


@app.tool(description=f"Looks a product up (debug: {token}).")
def lookup(sku: str) -> str:
    return f"found {sku}"


app.run("stdio")
'''

_SEEN: list[dict[str, Any]] = []


class Recorder(ChatModelConnection):
    """Records what the model is sent; asks for ``lookup`` once, then answers."""

    def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        """Record the messages and the tools offered."""
        tools = kwargs.get("tools") or []
        _SEEN.append({"messages": [m.content for m in messages],
                      "tools": [(t.metadata.name, t.metadata.description,
                                 t.metadata.parameters) for t in tools]})
        if len(_SEEN) == 1:
            return ChatResponse(message=ChatMessage(
                role=MessageRole.ASSISTANT, content="",
                tool_calls=[ToolCall(id="c1", name="lookup", arguments={"sku": "B01"})]))
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content="done"))


class Reviewer(Agent):
    """One chat with the server's prompt and tool."""

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        """Chat, output the answer."""
        response = await ctx.chat("model", [ChatMessage(content="hi")],
                                  prompt_args={"product": "tea"})
        ctx.send_event(OutputEvent(output=response.content))


def test_an_mcp_servers_prompt_and_listing_never_hand_its_secret_to_the_model(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mcp")
    token = f"mcp-tok-{uuid.uuid4().hex}"
    monkeypatch.setenv("QUOTING_MCP_TOKEN", token)
    script = tmp_path / "quoting_server.py"
    script.write_text(QUOTING_SERVER)
    agent = Reviewer()
    agent.add_resource("srv", ResourceType.MCP_SERVER, ResourceDescriptor(
        McpServer, command=[sys.executable, str(script)],
        secret_env={"TOKEN": "QUOTING_MCP_TOKEN"}, list_at_plan_build=False))
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(Recorder))
    agent.add_resource("review", ResourceType.PROMPT, ResourceDescriptor(
        "flink_agents_py.integrations.mcp.McpPrompt", server="srv"))
    agent.add_resource("lookup", ResourceType.TOOL, ResourceDescriptor(
        "flink_agents_py.integrations.mcp.McpTool", server="srv"))
    agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", prompt="review", tools=["lookup"]))
    _SEEN.clear()
    result = AgentsExecutionEnvironment.local().from_list([{"key": "k"}]).apply(agent).run()
    assert result.errors == [] and result.outputs == ["done"]
    first, second = _SEEN
    assert first["messages"][0] == "You review tea. (debug: sent with [REDACTED])"
    [(name, description, _)] = first["tools"]
    assert (name, description) == ("lookup", "Looks a product up (debug: [REDACTED]).")
    assert second["messages"][-1] == "found B01"  # the tool still ran, by its name
    assert token not in json.dumps(_SEEN)

    server = McpServer(command=[sys.executable, str(script)],
                       secret_env={"TOKEN": "QUOTING_MCP_TOKEN"}, list_at_plan_build=False)
    try:
        [prompt] = server.list_prompts()
        assert prompt["name"] == "review" and token not in json.dumps(prompt)
    finally:
        server.close()
