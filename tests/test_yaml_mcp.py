"""A YAML agent whose chat model setup names the tools of its MCP server, run as a user runs it.

Before, the loader refused such a setup (``names tool 'add', which this agent does not
declare (tools: none)``): it checked tool names before the plan build, which alone lists the
server's tools. Now the names are checked by the plan build, and a name no server offers is
still refused there, at the agent's line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("mcp")
pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "test_mcp_fixture_server.py"

ACTIONS = '''
from flink_agents_py.api import ChatMessage, OutputEvent


async def ask(event, ctx):
    reply = await ctx.chat("m", [ChatMessage(content=event.input["q"])])
    ctx.send_event(OutputEvent(output=reply.message.content))
'''

RUN = '''
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.testing import model_from_turns, tool_call
from flink_agents_py.yaml import load_agent

agent = load_agent("agents.yaml")
agent.override_resource("conn", model_from_turns([tool_call("add", a=2, b=3), "five"]))
job = AgentsExecutionEnvironment.local().from_list([{"key": "a", "q": "2+3?"}])
result = job.apply(agent).run()
print(result.outputs, result.errors, result.metrics["tool_calls"])
'''


def yaml_doc(tool: str) -> str:
    return textwrap.dedent(f"""\
        agents:
          - name: calc
            actions: [{{name: ask, function: "calc_actions:ask", on: [InputEvent]}}]
            chat_model_connections:
              - {{name: conn, clazz: flink_agents_py.integrations.chat_models.OpenAIChatModel}}
            chat_model_setups:
              - {{name: m, connection: conn, tools: [{tool}]}}
            mcp_servers:
              - name: calc
                clazz: flink_agents_py.integrations.mcp.McpServer
                command: ["{sys.executable}", "{SERVER}", "stdio"]
        """)


def run_user(tmp_path: Path, tool: str) -> subprocess.CompletedProcess[str]:
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "calc_actions.py").write_text(ACTIONS)
    (tmp_path / "agents.yaml").write_text(yaml_doc(tool))
    (tmp_path / "run.py").write_text(RUN)
    return subprocess.run([sys.executable, "run.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=100, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_a_yaml_setup_names_a_tool_its_mcp_server_offers(tmp_path):
    proc = run_user(tmp_path, "add")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "['five'] [] {'add': 1}"


def test_a_tool_no_server_offers_is_refused_at_the_agents_line(tmp_path):
    proc = run_user(tmp_path, "sub")
    assert proc.returncode != 0
    assert "agents.yaml:2: agents[0]: agent 'calc' does not compile: chat_model resource 'm' " \
           "names tool 'sub', which is not declared (tools: add, call_count, explode, lookup, " \
           "slow_echo)\n" in proc.stderr, proc.stderr[-3000:]
