"""An MCP server that dies mid-call, answers a malformed result, or advertises huge texts.

The server is a small stdio server written with the ``mcp`` SDK (``MCPServer``, FastMCP in
1.x) into the test's temporary directory; the malformed result (which an SDK server never
sends) comes from a few lines of JSON-RPC on the wire in the same script (``raw``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from flink_agents_py.api import ResourceError
from flink_agents_py.integrations.mcp import McpServer, McpServerExited, McpToolError

pytest.importorskip("mcp")
pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]
SECRET = "tok-HOSTILE-SERVER-81f2"

SERVER = '''
import json, os, sys
from pathlib import Path

Path(sys.argv[1], f"{os.getpid()}.pid").write_text("")
if sys.argv[2] == "raw":  # a server on the wire: a tools/call result that is not MCP
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
                {"name": "badresult", "inputSchema": {"type": "object"}},
                {"name": "bigschema", "inputSchema": {"type": "object", "properties": {
                    f"p{i}": {"type": "string", "description": "S" * 100}
                    for i in range(2_000)}}}]}})
        else:
            send({"jsonrpc": "2.0", "id": mid,
                  "result": {"content": "not a list " + "x" * 50_000}})
    sys.exit(0)
try:
    from mcp.server.mcpserver import MCPServer as Server
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:
    from mcp.server.fastmcp import FastMCP as Server
    from mcp.server.fastmcp.exceptions import ToolError
app = Server("hostile")

@app.tool()
def die() -> str:
    """Exit mid-call."""
    os._exit(3)

@app.tool()
def echo_secret() -> str:
    """Say the token."""
    return "the token is " + os.environ.get("TOKEN", "")

@app.tool()
def bigerr() -> str:
    """Fail with a long text holding the token."""
    raise ToolError(os.environ.get("TOKEN", "") + " " + "E" * 100_000)

@app.tool(description="D" * 200_000 + " the end")
def bigdesc() -> str:
    return "ok"

app.run()
'''


def _wait(cond: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")  # a zombie has exited
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def _pids(tmp: Path) -> list[int]:
    return sorted(int(p.stem) for p in tmp.glob("*.pid"))


def _server(tmp: Path, mode: str = "sdk", **kw: object) -> McpServer:
    script = tmp / "server.py"
    script.write_text(SERVER)
    server = McpServer(command=[sys.executable, str(script), str(tmp), mode],
                       connect_timeout_s=60, timeout_s=60, **kw)
    server.bind(lambda name, rtype: None, "hostile")  # type: ignore[arg-type,return-value]
    return server


def test_a_server_that_dies_mid_call_is_named_and_started_again(tmp_path):
    server = _server(tmp_path)
    try:
        assert server.call_tool("echo_secret", {}) == "the token is "
        [first] = _pids(tmp_path)
        with pytest.raises(McpServerExited) as e:
            server.call_tool("die", {})
        text = str(e.value)
        assert "'die'" in text and "'hostile'" in text and "exit code 3" in text
        assert "Connection closed" not in text
        assert server.call_tool("echo_secret", {}) == "the token is "  # a new server
        assert len(_pids(tmp_path)) == 2
        _wait(lambda: not _running(first))
    finally:
        server.close()
    _wait(lambda: not any(_running(p) for p in _pids(tmp_path)))


def test_a_server_that_dies_while_idle_is_started_again_for_the_next_async_call(tmp_path):
    import asyncio

    server = _server(tmp_path)
    try:
        server.open()
        [first] = _pids(tmp_path)
        os.kill(first, 9)
        _wait(lambda: not _running(first))
        # the session ends when its transport ends (seen by the stdio reader); the next call
        # does not reuse it
        _wait(lambda: not server._conn.alive)  # type: ignore[union-attr]
        assert asyncio.run(server.acall_tool("echo_secret", {})) == "the token is "
        assert len(_pids(tmp_path)) == 2
    finally:
        server.close()
    _wait(lambda: not any(_running(p) for p in _pids(tmp_path)))


def test_a_malformed_tool_result_is_a_tool_error_naming_tool_and_server(tmp_path):
    server = _server(tmp_path, "raw")
    try:
        with pytest.raises(McpToolError) as e:
            server.call_tool("badresult", {})
    finally:
        server.close()
    text = str(e.value)
    assert "'badresult'" in text and "'hostile'" in text and "not MCP" in text
    assert "content" in text and "valid list" in text
    assert "pydantic.dev" not in text and len(text) < 1_500


def test_a_huge_tool_description_is_cut_with_a_marker(tmp_path):
    server = _server(tmp_path, max_tool_description_chars=1_000)
    try:
        meta = server.tool_metadata("bigdesc")
    finally:
        server.close()
    assert len(meta.description) < 1_100
    assert meta.description.startswith("DDD") and meta.description.endswith("the end")
    assert "characters cut" in meta.description


def test_a_huge_input_schema_refuses_that_tool_only(tmp_path):
    server = _server(tmp_path, "raw")
    try:
        with pytest.raises(ResourceError, match=r"'bigschema'.*max_tool_schema_chars \(65,536\)"):
            server.tool_metadata("bigschema")
        assert server.tool_metadata("badresult").parameters == {"type": "object"}
    finally:
        server.close()
    roomy = _server(tmp_path, "raw", max_tool_schema_chars=1_000_000)
    try:
        assert len(roomy.tool_metadata("bigschema").parameters["properties"]) == 2_000
    finally:
        roomy.close()


def test_blocking_call_tool_clips_errors_and_masks_secrets(tmp_path, monkeypatch):
    from flink_agents_py.api import register_secret

    register_secret(SECRET)
    monkeypatch.setenv("MY_HOSTILE_TOKEN", SECRET)
    server = _server(tmp_path, secret_env={"TOKEN": "MY_HOSTILE_TOKEN"})
    try:
        value = server.call_tool("echo_secret", {})
        with pytest.raises(McpToolError) as e:
            server.call_tool("bigerr", {})
    finally:
        server.close()
    assert value.startswith("the token is ") and SECRET not in value
    assert SECRET not in str(e.value) and len(str(e.value)) < 5_000
    assert "characters cut" in str(e.value)


def test_a_users_script_outside_the_repository_survives_a_dying_server(tmp_path):
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "user.py").write_text(textwrap.dedent('''
        import json, sys
        from flink_agents_py.integrations.mcp import McpServer, McpServerExited

        srv = McpServer(command=[sys.executable, "server.py", ".", "sdk"], timeout_s=60)
        out = {}
        try:
            srv.call_tool("die", {})
        except McpServerExited as e:
            out["error"] = str(e)
        out["after"] = srv.call_tool("echo_secret", {})
        srv.close()
        print(json.dumps(out))
    '''))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "user.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=100)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "'die'" in out["error"] and "exit code 3" in out["error"]
    assert out["after"] == "the token is "
    assert len(_pids(tmp_path)) == 2
    _wait(lambda: not any(_running(p) for p in _pids(tmp_path)))
