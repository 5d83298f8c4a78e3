"""A Flink Agents program's MCP server declaration (its docs' form), on the local runner.

``ResourceDescriptor(clazz=ResourceName.MCP_SERVER, endpoint=..., timeout=...)``; the chat
model setup names the server's prompt and tool like local ones.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.providers import free_port

from flink_agents_py.compat import (
    Agent,
    AgentsExecutionEnvironment,
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    Event,
    EventType,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceName,
    ResourceType,
    RunnerContext,
    action,
    chat_model_connection,
    chat_model_setup,
    mcp_server,
)
from flink_agents_py.testing import tool_call, tool_calls

pytest.importorskip("mcp")
pytestmark = pytest.mark.timeout(120)

SERVER_SCRIPT = str(Path(__file__).resolve().parent / "test_mcp_fixture_server.py")


@pytest.fixture(scope="module")
def endpoint():
    port = free_port()
    proc = subprocess.Popen([sys.executable, SERVER_SCRIPT, "http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("the MCP HTTP test server did not start")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _review_model(request: Any) -> Any:
    """Calls the server's ``add`` once, then answers with the prompt and the sum."""
    results = [m for m in request.messages if m.role == "tool"]
    if not results:
        return tool_calls(tool_call("add", "c1", a=2, b=3))
    return f"{request.messages[0].content} | sum={results[0].content}"


class McpReviewAgent(Agent):
    @mcp_server
    @staticmethod
    def review_mcp_server() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=ResourceName.MCP_SERVER,
                                  endpoint=os.environ["COMPAT_MCP_ENDPOINT"], timeout=30)

    @chat_model_connection
    @staticmethod
    def offline() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=ResourceName.ChatModel.SCRIPTED_CONNECTION,
                                  function=f"{__name__}:_review_model")

    @chat_model_setup
    @staticmethod
    def review_model() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=ResourceName.ChatModel.OLLAMA_SETUP,
                                  connection="offline", model="qwen3:8b",
                                  prompt="review_prompt", tools=["add"])

    @action(EventType.InputEvent)
    @staticmethod
    def ask(event: Event, ctx: RunnerContext) -> None:
        product = InputEvent.from_event(event).input
        ctx.send_event(ChatRequestEvent(
            model="review_model", messages=[ChatMessage(role=MessageRole.USER, content="go")],
            prompt_args={"product": product}))

    @action(EventType.ChatResponseEvent)
    @staticmethod
    def answer(event: Event, ctx: RunnerContext) -> None:
        response = ChatResponseEvent.from_event(event)
        ctx.send_event(OutputEvent(output=response.response.content if response.response
                                   else response.error))


def test_an_mcp_server_declared_by_resource_name_serves_its_prompt_and_tool(endpoint,
                                                                             monkeypatch):
    # ResourceName.MCP_SERVER did not exist (AttributeError), nor endpoint= / timeout=
    monkeypatch.setenv("COMPAT_MCP_ENDPOINT", endpoint)
    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": 1, "value": "tea"}]).apply(McpReviewAgent()).to_list()
    env.execute()
    assert out == [{1: "You review tea. Answer in one word. | sum=5"}]


class McpRemoteAgent(Agent):
    """Flink Agents' MCP remote e2e agent: its action fetches an MCP tool and calls it."""

    @mcp_server
    @staticmethod
    def math_mcp_server() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=ResourceName.MCP_SERVER,
                                  endpoint=os.environ["COMPAT_MCP_ENDPOINT"])

    @action(EventType.InputEvent)
    @staticmethod
    def process(event: Event, ctx: RunnerContext) -> None:
        data = InputEvent.from_event(event).input
        add = ctx.get_resource("add", ResourceType.TOOL)
        by_dict = add.call({"a": data["a"], "b": data["b"]})
        by_keywords = add.call(a=data["a"], b=1)
        lookup = ctx.get_resource("lookup", ResourceType.TOOL).call(sku="tea")
        try:
            add.call({"a": "x", "b": 1})
        except Exception as e:  # noqa: BLE001 - what the program sees
            failed = type(e).__name__
        ctx.send_event(OutputEvent(output={"sum": int(by_dict[0]), "items": by_dict,
                                           "kw": by_keywords, "lookup": lookup,
                                           "failed": failed}))


def test_an_mcp_tool_fetched_in_an_action_is_called_as_flink_agents_calls_it(endpoint,
                                                                              monkeypatch):
    # McpTool had no call (AttributeError failing the action)
    monkeypatch.setenv("COMPAT_MCP_ENDPOINT", endpoint)
    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": {"a": 2, "b": 3}}]).apply(
        McpRemoteAgent()).to_list()
    env.execute()
    [[result]] = [list(o.values()) for o in out]
    assert result["sum"] == 5 and result["items"] == ["5"] and result["kw"] == ["3"]
    assert isinstance(result["lookup"], list) and len(result["lookup"]) == 1
    assert "tea" in result["lookup"][0]
    assert result["failed"] == "McpToolError"


def test_an_mcp_server_built_as_the_tool_use_page_builds_it(endpoint, monkeypatch):
    # Flink Agents' tool use page: ``MCPServer(endpoint=...)`` returned by an ``@mcp_server``
    # method, and given to the environment with ``add_resource``. ``MCPServer`` was missing.
    from flink_agents_py.compat import MCPServer

    class DeclaredAgent(Agent):
        @mcp_server
        @staticmethod
        def my_mcp_server() -> MCPServer:
            return MCPServer(endpoint=endpoint)

        @action(EventType.InputEvent)
        @staticmethod
        def process(event: Event, ctx: RunnerContext) -> None:
            data = InputEvent.from_event(event).input
            ctx.send_event(OutputEvent(
                output=ctx.get_resource("add", ResourceType.TOOL).call(data)))

    class BareAgent(Agent):
        @action(EventType.InputEvent)
        @staticmethod
        def process(event: Event, ctx: RunnerContext) -> None:
            data = InputEvent.from_event(event).input
            ctx.send_event(OutputEvent(
                output=ctx.get_resource("add", ResourceType.TOOL).call(data)))

    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": {"a": 2, "b": 3}}]).apply(
        DeclaredAgent()).to_list()
    env.execute()
    assert out == [{"k": ["5"]}]
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.add_resource("my_mcp_server", MCPServer(endpoint=endpoint))
    out = env.from_list([{"key": "k", "value": {"a": 4, "b": 3}}]).apply(BareAgent()).to_list()
    env.execute()
    assert out == [{"k": ["7"]}]
