"""A tool named like another tool's stand-in keeps its own name on the wire.

A provider takes tool names of ``^[a-zA-Z0-9_-]{1,64}$`` only, so a name that does not fit
(``a b``, as an MCP server may name a tool) is offered under a stand-in: its safe form
(``a_b``), or, when that is taken, the safe form and a digest of the name. A tool (another
server's) named exactly like that digest form was offered under the same name as the first
one: the provider saw two tools of one name, and the model's call of the tool so named ran
the other one. Each tool now has a name on the wire no other tool of the request has.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.providers import (
    WireServer,
    anthropic_reply,
    openai_reply,
    outputs_of,
    probe_agent,
    run_probe,
)

from flink_agents_py.api import FunctionTool, ResourceDescriptor, ResourceType
from flink_agents_py.integrations.chat_models import AnthropicChatModel, OpenAIChatModel
from flink_agents_py.integrations.chat_models._wire import _digest

NAMES = ["a b", "a_b", "a_b_" + _digest("a b")]  # the last: the first one's digest form


def _openai(srv: WireServer) -> ResourceDescriptor:
    return ResourceDescriptor(OpenAIChatModel, base_url=f"{srv.url}/v1",
                              api_key_env="FAP_TEST_OPENAI_KEY", default_model="gpt-test")


def _anthropic(srv: WireServer) -> ResourceDescriptor:
    return ResourceDescriptor(AnthropicChatModel, base_url=srv.url,
                              api_key_env="FAP_TEST_ANTHROPIC_KEY", default_model="claude-test")


def _which(tool: str) -> Any:
    def run(item: str = "") -> str:
        """Say which tool ran.

        Args:
            item: ignored.
        """
        return tool
    return run


def _calls_each_offered(req: dict[str, Any]) -> tuple[int, Any]:
    body = req["body"]
    anthropic = "max_tokens" in body and "model" in body and "system" in body or \
        body.get("model") == "claude-test"
    offered = [t["name"] if anthropic else t["function"]["name"] for t in body["tools"]]
    if len(set(offered)) != len(offered):
        return 400, {"error": {"message": f"tools: duplicate names {offered}"}, "type": "error"}
    if req["n"] > 0:
        return 200, (anthropic_reply([{"type": "text", "text": "done"}]) if anthropic
                     else openai_reply("done"))
    picks = [(f"call_{i}", n, {"item": "x"}) for i, n in enumerate(offered)]
    if anthropic:
        return 200, anthropic_reply([{"type": "tool_use", "id": i, "name": n, "input": a}
                                     for i, n, a in picks], stop_reason="tool_use")
    return 200, openai_reply(None, picks)


@pytest.mark.parametrize("conn", [_openai, _anthropic], ids=["openai", "anthropic"])
def test_a_tool_named_like_a_stand_in_is_offered_and_called_under_its_own_name(
        conn, monkeypatch):
    monkeypatch.setenv("FAP_TEST_OPENAI_KEY", "k-openai-test-key")
    monkeypatch.setenv("FAP_TEST_ANTHROPIC_KEY", "k-anthropic-test-key")
    with WireServer(_calls_each_offered) as srv:
        agent = probe_agent(conn(srv), tools=NAMES)
        for name in NAMES:
            agent.add_resource(name, ResourceType.TOOL,
                               FunctionTool.from_function(_which(name), name=name))
        res = run_probe(agent, [{"key": "k", "q": "go"}])
    [ans] = outputs_of(res, "answer")
    assert ans["error"] is None and ans["content"] == "done", ans
    [calls] = outputs_of(res, "calls")
    assert [c["name"] for c in calls["calls"]] == NAMES
    [results] = outputs_of(res, "results")
    assert [r["content"] for r in results["results"].values()] == NAMES
