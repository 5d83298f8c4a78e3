"""What a model reads of an MCP tool's ``isError`` result that has no text block.

Before this fix only the text blocks of an error result were read: a server putting its
error payload in ``structuredContent`` (``{"code": "RATE_LIMITED", "retry_after": 30}``,
with ``content: []``, as the MCP spec allows) or in a resource block was reported as "the
MCP tool failed without saying why", so the model could not act on it. Similar reports:
langchain-mcp-adapters #619 (structuredContent dropped from ``isError`` results), the
Anthropic SDK's structured-only MCP error payloads, the OpenAI Agents SDK's MCP error
content precedence.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("mcp")
pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]

# a stdio server on the wire: each tool answers one fixed tools/call result
SERVER = textwrap.dedent('''
    import json, sys

    RESULTS = {
        "limited": {"content": [], "isError": True,
                    "structuredContent": {"code": "RATE_LIMITED", "retry_after": 30}},
        "logged": {"isError": True, "content": [{"type": "resource", "resource": {
            "uri": "file:///var/log/job.log", "text": "disk full"}}]},
        "both": {"isError": True, "content": [{"type": "text", "text": "quota exceeded"}],
                 "structuredContent": {"code": "QUOTA"}},
        "silent": {"isError": True, "content": []},
    }

    def send(o):
        sys.stdout.write(json.dumps(o) + "\\n"); sys.stdout.flush()

    for line in sys.stdin:
        m = json.loads(line)
        mid, method = m.get("id"), m.get("method")
        if mid is None:
            continue
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": m["params"]["protocolVersion"],
                "capabilities": {"tools": {}}, "serverInfo": {"name": "raw", "version": "1"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
                {"name": n, "inputSchema": {"type": "object"}} for n in RESULTS]}})
        else:
            send({"jsonrpc": "2.0", "id": mid, "result": RESULTS[m["params"]["name"]]})
''')

USER = textwrap.dedent('''
    import json, sys
    from flink_agents_py.integrations.mcp import McpServer, McpTool, McpToolError

    srv = McpServer(command=[sys.executable, "server.py"], timeout_s=60)
    out = {}
    try:
        for name in ("limited", "logged", "both", "silent"):
            try:
                srv.call_tool(name, {})
            except McpToolError as e:
                out[name] = str(e)
            tool = McpTool(server="srv", tool=name)  # Flink Agents' MCPTool.call form
            tool.bind(lambda n, t: srv, name)
            try:
                tool.call()
            except McpToolError as e:
                out[name + "_items"] = str(e)
    finally:
        srv.close()
    print(json.dumps(out))
''')


@pytest.fixture(scope="module")
def said(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("mcp_errors")
    (home / "server.py").write_text(SERVER)
    (home / "user.py").write_text(USER)
    proc = subprocess.run([sys.executable, "user.py"], cwd=home, capture_output=True,
                          text=True, timeout=100, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    result: dict[str, str] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("form", ["", "_items"])
def test_a_structured_only_error_is_told_with_its_payload(said: dict[str, str],
                                                         form: str) -> None:
    assert json.loads(said["limited" + form]) == {"code": "RATE_LIMITED", "retry_after": 30}


@pytest.mark.parametrize("form", ["", "_items"])
def test_an_error_in_a_resource_block_is_told(said: dict[str, str], form: str) -> None:
    assert "disk full" in said["logged" + form]


@pytest.mark.parametrize("form", ["", "_items"])
def test_text_still_wins_and_silence_is_still_named(said: dict[str, str], form: str) -> None:
    assert said["both" + form] == "quota exceeded"
    assert said["silent" + form] == "the MCP tool failed without saying why"
