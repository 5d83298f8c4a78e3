"""MCP servers are ended with their session: no server process outlives a failed open.

The server is ``support/hanging_mcp_server.py``: a stdio server that never answers
``initialize`` or ``tools/list``, does not exit when its stdin closes and ignores SIGTERM.
Each test gives it a fresh folder on its command line and counts the live processes whose
command line names that folder (``/proc``), so a leaked server is seen whatever it did.
Also: secrets for a server (``secret_env`` of a stdio server, ``secret_headers`` of an HTTP
server) reach it and are masked when it echoes them.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    ResourceError,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents_py.integrations.mcp import McpServer
from flink_agents_py.plan import AgentPlan

pytest.importorskip("mcp")
pytestmark = pytest.mark.timeout(240)

HANGING = str(Path(__file__).resolve().parent / "support" / "hanging_mcp_server.py")


def server_processes(marker: Path) -> list[int]:
    """Live (not zombie) processes whose command line names ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if str(marker) in cmdline and HANGING in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def started(marker: Path) -> int:
    """How many servers wrote their pid file (started far enough to run)."""
    return len(list(marker.glob("*.pid")))


def wait_until_none_left(marker: Path, limit_s: float = 60.0) -> list[int]:
    deadline = time.monotonic() + limit_s
    while (left := server_processes(marker)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def hanging(marker: Path, mode: str, **kw) -> McpServer:
    kw.setdefault("list_at_plan_build", False)
    return McpServer(command=[sys.executable, HANGING, str(marker), mode], **kw)


class UsesServer(Agent):
    """Opens the MCP server for each record (each open fails: the record is an error)."""

    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.get_resource("hang", ResourceType.MCP_SERVER)
        ctx.send_event(OutputEvent(output="never"))


def test_a_server_that_never_lists_its_tools_is_ended_when_open_fails(tmp_path):
    srv = hanging(tmp_path, "no-list", connect_timeout_s=60, timeout_s=1)
    with pytest.raises(ResourceError, match="did not answer within 1 s"):
        srv.open()
    assert started(tmp_path) == 1
    assert server_processes(tmp_path) == []  # ended before open() raised, not later


def test_a_server_that_never_answers_initialize_is_ended_when_the_connect_times_out(tmp_path):
    srv = hanging(tmp_path, "no-init", connect_timeout_s=3)
    with pytest.raises(ResourceError, match="no MCP session .* within 3 s"):
        srv.open()
    assert wait_until_none_left(tmp_path, 30) == []


def test_listing_at_plan_build_that_times_out_leaves_no_server(tmp_path, caplog):
    agent = UsesServer()
    agent.add_resource("hang", ResourceType.MCP_SERVER, ResourceDescriptor(
        McpServer, command=[sys.executable, HANGING, str(tmp_path), "no-list"],
        plan_timeout_s=5))
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.mcp"):
        AgentPlan.from_agent(agent)
    assert any("could not be listed" in r.getMessage() for r in caplog.records)
    assert wait_until_none_left(tmp_path, 30) == []


def test_after_a_job_of_failed_opens_no_server_process_is_left(tmp_path):
    agent = UsesServer()
    agent.add_resource("hang", ResourceType.MCP_SERVER, ResourceDescriptor(
        McpServer, command=[sys.executable, HANGING, str(tmp_path), "no-list"],
        list_at_plan_build=False, connect_timeout_s=60, timeout_s=1))
    records = [{"key": f"k{i}"} for i in range(3)]
    res = AgentsExecutionEnvironment.local().from_list(records).apply(agent).run()
    assert res.outputs == []
    assert len(res.errors) == 3
    assert all("did not answer within 1 s" in e.message for e in res.errors)
    assert started(tmp_path) == 3  # one server per failed open ...
    assert server_processes(tmp_path) == []  # ... and none of them left


def test_secret_env_is_passed_to_the_server_and_masked_in_its_errors(tmp_path, monkeypatch):
    token = f"mcp-tok-{os.urandom(12).hex()}"
    monkeypatch.setenv("MY_MCP_TOKEN", token)
    srv = hanging(tmp_path, "leak-env", secret_env={"TOKEN": "MY_MCP_TOKEN"},
                  connect_timeout_s=60, timeout_s=30)
    with pytest.raises(ResourceError) as info:
        srv.open()
    message = str(info.value)
    assert "upstream refused token [REDACTED]" in message  # the server got it, and said it
    assert token not in message
    assert token not in repr(srv.model_dump()) and "MY_MCP_TOKEN" in repr(srv.model_dump())
    assert wait_until_none_left(tmp_path, 30) == []


def test_a_missing_secret_env_variable_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("MY_ABSENT_TOKEN", raising=False)
    srv = hanging(tmp_path, "no-list", secret_env={"TOKEN": "MY_ABSENT_TOKEN"},
                  connect_timeout_s=30)
    with pytest.raises(ResourceError, match=r"environment variable 'TOKEN' .*\$MY_ABSENT_TOKEN"):
        srv.open()
    assert started(tmp_path) == 0


class _EchoingHttpMcp:
    """A minimal streamable-HTTP MCP server (JSON answers) that records request headers and
    answers ``tools/list`` with an error quoting the ``Authorization`` header it got."""

    def __init__(self) -> None:
        import json as _json
        from http.server import BaseHTTPRequestHandler

        from flink_agents_py.testing import LocalHTTPServer

        seen: list[dict[str, str]] = []

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _answer(self, status, body=None):
                data = _json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                if body is not None:
                    self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # no server-initiated stream
                self._answer(405)

            def do_DELETE(self):
                self._answer(200)

            def do_POST(self):
                msg = _json.loads(self.rfile.read(int(self.headers["content-length"])))
                seen.append({k.lower(): v for k, v in self.headers.items()})
                if "id" not in msg:  # a notification
                    return self._answer(202)
                if msg["method"] == "initialize":
                    return self._answer(200, {"jsonrpc": "2.0", "id": msg["id"], "result": {
                        "protocolVersion": msg["params"]["protocolVersion"],
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "echo", "version": "0"}}})
                auth = self.headers.get("authorization")
                return self._answer(200, {"jsonrpc": "2.0", "id": msg["id"], "error": {
                    "code": -32603, "message": f"upstream rejected {auth}"}})

        self.seen = seen
        self._httpd = LocalHTTPServer(Handler)
        self.url = f"{self._httpd.url}/mcp"

    def __enter__(self):
        self._httpd.__enter__()
        return self

    def __exit__(self, *exc):
        self._httpd.__exit__(*exc)


def test_secret_headers_reach_an_http_server_and_are_masked_in_its_errors(monkeypatch):
    token = f"Bearer {os.urandom(16).hex()}"
    monkeypatch.setenv("MCP_AUTH", token)
    with _EchoingHttpMcp() as srv:
        server = McpServer(url=srv.url, secret_headers={"Authorization": "MCP_AUTH"},
                           headers={"x-team": "search"}, list_at_plan_build=False,
                           connect_timeout_s=60, timeout_s=60)
        with pytest.raises(ResourceError) as info:
            server.open()
        assert any(h.get("authorization") == token and h.get("x-team") == "search"
                   for h in srv.seen)
    assert "upstream rejected [REDACTED]" in str(info.value)
    assert token.split()[1] not in str(info.value)


NEVER_CLOSED = '''
"""Opens an MCP server and exits without closing it: python never_closed.py SERVER MARKER"""
import sys

from flink_agents_py.integrations.mcp import McpServer

server = McpServer(command=[sys.executable, sys.argv[1], sys.argv[2], "ok"],
                   list_at_plan_build=False, connect_timeout_s=60, timeout_s=60)
server.open()
print("OPEN", server.list_tools(), flush=True)
'''


def test_a_server_nobody_closed_ends_when_the_users_script_exits(tmp_path):
    import subprocess

    script = tmp_path / "user" / "never_closed.py"
    script.parent.mkdir()
    script.write_text(NEVER_CLOSED)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, str(script), HANGING, str(tmp_path)], env=env,
                          cwd=script.parent, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "OPEN []" in proc.stdout
    assert started(tmp_path) == 1
    assert server_processes(tmp_path) == []  # ended before the script's process did
