"""MCP servers: tools listed and called in chats, prompts, plan-build listing and checks.

The server is ``test_mcp_fixture_server.py`` (the mcp SDK's FastMCP/MCPServer), run as a stdio
subprocess by the resource itself, and once per module over streamable HTTP on a free
loopback port.
"""

from __future__ import annotations

import contextlib
import json
import logging
import pickle
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.providers import ChatProbe, free_port, only_answer, outputs_of

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    InputEvent,
    InternalSubagent,
    MessageRole,
    OutputEvent,
    PlanError,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    ToolCall,
    action,
    qualified_name,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.integrations.mcp import McpPrompt, McpServer, McpTool, McpToolError
from flink_agents_py.plan import AgentPlan
from flink_agents_py.testing import ScriptedRequest

pytest.importorskip("mcp")
pytestmark = pytest.mark.timeout(120)

SERVER_SCRIPT = str(Path(__file__).resolve().parent / "test_mcp_fixture_server.py")
STDIO = [sys.executable, SERVER_SCRIPT, "stdio"]
_SEEN: dict[str, list[ScriptedRequest]] = {}
_PLANS: dict[str, list[Any]] = {}


@pytest.fixture(scope="module")
def http_url():
    with http_server() as url:
        yield url


@contextlib.contextmanager
def http_server():
    """The fixture server over streamable HTTP on a free port: its URL, until the block ends."""
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


def planned(req: ScriptedRequest) -> Any:
    """Answers from ``_PLANS[label]`` in turn (label: the last user message); records requests."""
    label = next(m.content for m in reversed(req.messages) if m.role == MessageRole.USER)
    _SEEN.setdefault(label, []).append(req)
    return _PLANS[label].pop(0)


def calls(*specs: tuple[str, str, dict]) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT,
                       tool_calls=[ToolCall(id=i, name=n, arguments=a) for i, n, a in specs])


def agent_with(server: ResourceDescriptor | None, tools: list[str], plan: list[Any],
               label: str, extra: dict[str, Any] | None = None, **setup: Any) -> Agent:
    _PLANS[label] = list(plan)
    _SEEN.pop(label, None)
    agent = ChatProbe()
    if server is not None:
        agent.add_resource("calc", ResourceType.MCP_SERVER, server)
    for name, (rtype, value) in (extra or {}).items():
        agent.add_resource(name, rtype, value)
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        ScriptedChatModel, function=qualified_name(planned)))
    agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=tools, **setup))
    return agent


def run(agent: Agent, record: dict[str, Any]) -> Any:
    return AgentsExecutionEnvironment.local().from_list([record]).apply(agent).run()


def results_by_call(res: Any) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for o in outputs_of(res, "results"):
        out.update(o["results"])
    return out


# ------------------------------------------------------------------------ streamable HTTP
def test_http_server_tools_are_registered_at_plan_build_and_called_in_a_chat(http_url):
    agent = agent_with(ResourceDescriptor(McpServer, url=http_url), ["add", "lookup", "explode"], [
        calls(("c1", "add", {"a": 2, "b": 3}), ("c2", "lookup", {"sku": "tea-1"}),
              ("c3", "explode", {"reason": "on purpose"})),
        "done",
    ], "http-tools")
    plan = AgentPlan.from_agent(agent)
    tools = plan.resources[ResourceType.TOOL]
    assert {"add", "lookup", "slow_echo", "explode", "call_count"} <= set(tools)
    assert tools["add"].descriptor.clazz.endswith("McpTool")
    assert tools["add"].descriptor.arguments == {"server": "calc", "tool": "add"}
    assert plan.resources[ResourceType.PROMPT]["review_prompt"].descriptor.arguments == {
        "server": "calc", "prompt": "review_prompt"}
    assert AgentPlan.from_json(plan.to_json()).resources[ResourceType.TOOL]["add"] == tools["add"]

    res = run(agent, {"key": "k", "q": "http-tools"})
    ans = only_answer(res)
    assert ans["error"] is None and ans["content"] == "done"
    got = results_by_call(res)
    assert (got["c1"]["ok"], got["c1"]["content"]) == (True, 5)
    assert got["c2"]["content"] == {"sku": "tea-1", "price": 7.5, "tags": ["tea", "green"]}
    assert not got["c3"]["ok"] and got["c3"]["error"].startswith("McpToolError: ")
    first, second = _SEEN["http-tools"]
    offered = {t.name: t for t in first.tools}
    assert list(offered) == ["add", "lookup", "explode"]
    assert offered["add"].description.startswith("Add two integers.")
    assert offered["add"].parameters["properties"]["a"]["type"] == "integer"
    assert offered["add"].parameters["required"] == ["a", "b"]
    tool_msgs = {m.tool_call_id: m.content for m in second.tool_results}
    assert tool_msgs["c1"] == "5" and json.loads(tool_msgs["c2"])["price"] == 7.5
    assert tool_msgs["c3"].startswith("Error: McpToolError")


def test_http_declared_tool_renamed_without_plan_build_listing(http_url):
    server = ResourceDescriptor(McpServer, url=http_url, list_at_plan_build=False)
    extra = {"plus": (ResourceType.TOOL, ResourceDescriptor(McpTool, server="calc", tool="add"))}
    agent = agent_with(server, ["plus"], [calls(("c1", "plus", {"a": 40, "b": 2})), "ok"],
                       "renamed", extra)
    plan = AgentPlan.from_agent(agent)
    assert list(plan.resources[ResourceType.TOOL]) == ["plus"]  # nothing listed, nothing added
    res = run(agent, {"key": "k", "q": "renamed"})
    assert only_answer(res)["content"] == "ok"
    assert results_by_call(res)["c1"]["content"] == 42
    [tool] = _SEEN["renamed"][0].tools
    assert tool.name == "plus" and tool.description.startswith("Add two integers.")


def test_http_server_prompt_is_a_setup_prompt(http_url):
    agent = agent_with(ResourceDescriptor(McpServer, url=http_url), [], ["fine"], "prompted",
                       prompt="review_prompt")
    res = run(agent, {"key": "k", "q": "prompted", "args": {"product": "green tea", "x": 1}})
    assert only_answer(res)["content"] == "fine"
    [req] = _SEEN["prompted"]
    assert [(m.role, m.content) for m in req.messages] == [
        ("user", "You review green tea. Answer in one word."), ("user", "prompted")]


def test_http_server_used_directly(http_url):
    server = McpServer(url=http_url)
    try:
        assert "add" in [t.name for t in server.list_tools()]
        assert server.call_tool("add", {"a": 1, "b": 1}) == 2
        assert [p["name"] for p in server.list_prompts()] == ["review_prompt"]
        prompt = McpPrompt(server="calc", prompt="review_prompt")
        prompt.bind(lambda n, t: server, "p")
        assert prompt.format_string(product="tea") == "You review tea. Answer in one word."
        copy = pickle.loads(pickle.dumps(server))  # a Flink worker's copy: config, no session
        try:
            assert copy._conn is None and copy.url == http_url
            assert copy.call_tool("add", {"a": 2, "b": 2}) == 4
        finally:
            copy.close()
    finally:
        server.close()


def test_two_servers_offering_one_tool_name_is_a_plan_problem_unless_declared(http_url):
    agent = agent_with(ResourceDescriptor(McpServer, url=http_url), [], [], "two")
    agent.add_resource("calc2", ResourceType.MCP_SERVER, ResourceDescriptor(
        McpServer, url=http_url, register_prompts=False))
    with pytest.raises(PlanError) as e:
        AgentPlan.from_agent(agent)
    assert ("MCP servers 'calc' and 'calc2' both offer the tool 'add'; declare a tool resource "
            "of that name to pick one") in e.value.problems
    assert not any("review_prompt" in p for p in e.value.problems)


def add(a: int, b: int) -> int:
    """A local add that wins over the server's."""
    return a + b + 1000


def test_a_declared_resource_wins_over_an_advertised_one(http_url):
    agent = agent_with(ResourceDescriptor(McpServer, url=http_url), ["add"],
                       [calls(("c1", "add", {"a": 1, "b": 1})), "ok"], "declared",
                       {"add": (ResourceType.TOOL, add)})
    plan = AgentPlan.from_agent(agent)
    assert plan.resources[ResourceType.TOOL]["add"].descriptor.clazz.endswith("FunctionTool")
    res = run(agent, {"key": "k", "q": "declared"})
    assert results_by_call(res)["c1"]["content"] == 1002


def test_an_unreachable_server_is_not_a_plan_problem(caplog):
    url = f"http://127.0.0.1:{free_port()}/mcp"
    agent = agent_with(ResourceDescriptor(McpServer, url=url, plan_timeout_s=10), [], [], "down")
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.mcp"):
        plan = AgentPlan.from_agent(agent)
    assert ResourceType.TOOL not in plan.resources or not plan.resources[ResourceType.TOOL]
    assert any("could not be listed" in r.getMessage() for r in caplog.records)
    # a setup naming a tool the server would have offered is then an undeclared tool
    bad = agent_with(ResourceDescriptor(McpServer, url=url, plan_timeout_s=10), ["add"], [],
                     "down2")
    with pytest.raises(PlanError, match="names tool 'add', which is not declared") as e:
        AgentPlan.from_agent(bad)
    # the problem says where the tool went: the server registered none, and what to do
    assert "MCP server 'calc' registered no tools: one that could not be listed" in str(e.value)
    assert "McpTool', server='calc', tool='add')" in str(e.value)


# ------------------------------------------------------------------------ stdio
def test_stdio_server_tools_run_concurrently_in_one_session():
    agent = agent_with(ResourceDescriptor(McpServer, command=STDIO), ["add", "slow_echo",
                                                                       "call_count"], [
        calls(("c1", "slow_echo", {"text": "slow", "delay_s": 0.3}),
              ("c2", "add", {"a": 1, "b": 2})),
        calls(("c3", "call_count", {})),
        "counted",
    ], "stdio")
    res = run(agent, {"key": "k", "q": "stdio"})
    assert only_answer(res)["content"] == "counted"
    got = results_by_call(res)
    assert (got["c1"]["content"], got["c2"]["content"]) == ("slow", 3)
    assert got["c3"]["content"] == 2  # one server process answered both earlier calls
    sent = {m.tool_call_id: m.content for m in _SEEN["stdio"][1].tool_results}
    assert sent == {"c1": "slow", "c2": "3"}  # a text result as its text, not quoted


def test_contract_6_reserved_prefix_advertised_by_a_stdio_server_is_rejected_at_plan_build():
    agent = agent_with(ResourceDescriptor(McpServer, command=[*STDIO, "--reserved"]), [], [],
                       "reserved")
    with pytest.raises(PlanError) as e:
        AgentPlan.from_agent(agent)
    assert e.value.problems == [
        "MCP server 'calc' advertises tool '_subagent_sneaky', which starts with the reserved "
        "prefix '_subagent_' (that prefix names sub-agent callables); rename the tool on the "
        "server"]


def test_reserved_prefix_is_rejected_when_the_server_opens_if_not_listed_at_plan_build():
    server = ResourceDescriptor(McpServer, command=[*STDIO, "--reserved"],
                                list_at_plan_build=False)
    extra = {"add": (ResourceType.TOOL, ResourceDescriptor(McpTool, server="calc"))}
    agent = agent_with(server, ["add"], ["never asked"], "reserved-open", extra)
    AgentPlan.from_agent(agent)  # nothing listed: builds
    ans = only_answer(run(agent, {"key": "k", "q": "reserved-open"}))
    assert ans["content"] is None
    assert "ResourceError: MCP server 'calc'" in ans["error"]
    assert "advertises tool '_subagent_sneaky'" in ans["error"]
    assert "reserved prefix '_subagent_'" in ans["error"]
    assert "reserved-open" not in _SEEN  # the model was never asked


def test_server_needs_exactly_one_transport():
    with pytest.raises(ValueError, match="exactly one of"):
        McpServer()
    with pytest.raises(ValueError, match="exactly one of"):
        McpServer(command=["x"], url="http://h")


class AsksItsChild(Agent):
    """Hands each input to its internal sub-agent ``child`` and outputs what it answered."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        sub = await (await ctx.submit_subagent("child", event.input))
        ctx.send_event(OutputEvent(output={"kind": "sub", "sub": sub.model_dump()}))


def test_an_internal_subagent_names_a_tool_its_parents_mcp_server_lists():
    # as with a parent's connection (Flink Agents' ResourceCache parent chain): the child's
    # setup names "add", which only the parent's server lists; plan build listed the server
    # after compiling the child, so the child's plan refused the name as not declared
    _PLANS["child-mcp"] = [calls(("c1", "add", {"a": 2, "b": 40})), "forty-two"]
    _SEEN.pop("child-mcp", None)
    child = ChatProbe()
    child.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=["add"]))
    parent = AsksItsChild()
    parent.add_resource("calc", ResourceType.MCP_SERVER, ResourceDescriptor(McpServer,
                                                                             command=STDIO))
    parent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        ScriptedChatModel, function=qualified_name(planned)))
    parent.add_resource("child", ResourceType.AGENT,
                        ResourceDescriptor(InternalSubagent, agent=child))
    res = run(parent, {"key": "k", "q": "child-mcp"})
    assert res.errors == []
    [out] = res.outputs
    assert out["sub"]["success"] is True, out
    by_kind = {o["kind"]: o for o in out["sub"]["result"]}
    assert by_kind["results"]["results"]["c1"]["content"] == 42
    assert by_kind["answer"]["content"] == "forty-two"
    assert [t.name for t in _SEEN["child-mcp"][0].tools] == ["add"]


def test_a_call_whose_arguments_the_connection_could_not_read_is_told_not_sent(http_url):
    from flink_agents_py.api.internal import UNREADABLE_ARGUMENTS

    unreadable = {UNREADABLE_ARGUMENTS: "are not JSON: '```{\"a\": 2, \"b\": '"}
    agent = agent_with(ResourceDescriptor(McpServer, url=http_url), ["add"], [
        calls(("c1", "add", unreadable)), "done"], "http-unreadable")
    res = run(agent, {"key": "k", "q": "http-unreadable"})
    assert only_answer(res)["content"] == "done"
    got = results_by_call(res)["c1"]
    assert not got["ok"] and got["error"].startswith(
        "ValueError: tool 'add' was called with arguments that are not JSON"), got


def test_a_call_to_an_http_server_that_went_away_names_the_tool_and_the_server():
    # before: the SDK's bare "MCPError: Connection closed", naming neither, so with several
    # servers a user could not tell which one was down
    with http_server() as url:
        server = McpServer(url=url, timeout_s=20)
        assert server.call_tool("add", {"a": 1, "b": 1}) == 2
    try:  # the server process is gone now
        with pytest.raises(McpToolError) as raised:
            server.call_tool("add", {"a": 1, "b": 2})
    finally:
        server.close()
    assert "'add'" in str(raised.value) and url in str(raised.value)
