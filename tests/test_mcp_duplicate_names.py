"""An MCP server listing one tool (or prompt) name twice is refused, naming server and name.

The listing was turned into a dict by name, so the second ``lookup`` silently replaced the
first: the model was told about one tool and its calls went to whichever the server took.
The servers are ``support/hostile_mcp_server.py`` (on the JSON-RPC wire: an SDK server never
lists a name twice), modes ``twin-tools``, ``twin-pages`` and ``twin-prompts``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flink_agents_py.api import ResourceError
from flink_agents_py.integrations.mcp import McpServer

pytest.importorskip("mcp")
pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[1]
SERVER = str(ROOT / "tests" / "support" / "hostile_mcp_server.py")


def _server(mode: str) -> McpServer:
    server = McpServer(command=[sys.executable, SERVER, mode], connect_timeout_s=60, timeout_s=60)
    server.bind(lambda name, rtype: None, "catalog")  # type: ignore[arg-type,return-value]
    return server


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("twin-tools", "two tools named 'lookup' in its tools/list"),
        ("twin-pages", "two tools named 'lookup' in its tools/list"),  # across pages too
        ("twin-prompts", "two prompts named 'greet' in its prompts/list"),
    ],
)
def test_opening_a_server_that_lists_a_name_twice_fails_naming_server_and_name(mode, said):
    server = _server(mode)
    try:
        with pytest.raises(ResourceError) as e:
            server.list_tools()
    finally:
        server.close()
    text = str(e.value)
    assert "MCP server 'catalog'" in text and said in text, text
    assert "rename one of them on the server" in text
    assert "cannot be reached" not in text


def test_a_server_listing_each_name_once_still_lists_its_tools():
    server = _server("ok")
    try:
        assert [t.name for t in server.list_tools()] == ["probe"]
    finally:
        server.close()


USER_MODULE = """
import sys

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, InputEvent, OutputEvent, PlanError,
                                 ResourceDescriptor, ResourceType, RunnerContext, action)
from flink_agents_py.integrations.mcp import McpServer


class UsesTools(Agent):
    @action(InputEvent)
    @staticmethod
    def go(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=event.input))


agent = UsesTools()
agent.add_resource("catalog", ResourceType.MCP_SERVER, ResourceDescriptor(
    McpServer, command=[sys.executable, sys.argv[1], sys.argv[2]]))
try:
    AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(agent).collect()
except PlanError as e:
    print("REFUSED", e)
else:
    print("RAN")
"""


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("twin-tools", "two tools named 'lookup'"),
        ("twin-prompts", "two prompts named 'greet'"),
    ],
)
def test_a_users_agent_declaring_such_a_server_fails_at_plan_build(tmp_path, mode, said):
    """At plan build the listing registers the server's names: a name listed twice fails
    the build (it was a warning-free pick of the last one), from a user's own module."""
    (tmp_path / "my_agent.py").write_text(textwrap.dedent(USER_MODULE))
    out = subprocess.run(
        [sys.executable, "my_agent.py", SERVER, mode],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=150,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("REFUSED"), out.stdout + out.stderr[-3000:]
    assert "resource 'catalog'" in out.stdout and said in out.stdout, out.stdout
