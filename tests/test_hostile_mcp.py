"""Hostile MCP servers: a listing that never ends, ... bounded, with errors naming the server.

The servers are ``support/hostile_mcp_server.py`` (written on the JSON-RPC wire, so they can
answer what an SDK server never would), run as stdio subprocesses by the resource itself.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from flink_agents_py.api import ResourceError
from flink_agents_py.integrations.mcp import (
    McpMessageTooDeep,
    McpMessageTooLarge,
    McpServer,
    McpToolError,
)

pytest.importorskip("mcp")
pytestmark = pytest.mark.timeout(300)

SERVER = str(Path(__file__).resolve().parent / "support" / "hostile_mcp_server.py")


def _server(mode: str, **kw: object) -> McpServer:
    server = McpServer(command=[sys.executable, SERVER, mode], connect_timeout_s=60,
                       timeout_s=60, **kw)
    server.bind(lambda name, rtype: None, "hostile")  # type: ignore[arg-type,return-value]
    return server


@pytest.mark.parametrize("mode", ["pager", "pager-new"])
def test_a_tool_listing_whose_pages_never_end_is_refused_by_name_not_timed_out(mode):
    server = _server(mode)
    started = time.monotonic()
    try:
        with pytest.raises(ResourceError) as e:
            server.open()
    finally:
        server.close()
    assert time.monotonic() - started < 40  # long before timeout_s
    text = str(e.value)
    assert "'hostile'" in text and "tools/list" in text and "never end" in text
    assert "did not answer" not in text


def test_a_long_listing_that_ends_is_listed_whole():
    server = _server("many-pages")
    try:
        assert len(server.list_tools()) == 300
    finally:
        server.close()


@pytest.mark.parametrize("mode", ["huge", "huge-image"])
def test_a_tool_result_over_the_servers_bound_is_a_named_tool_error(mode):
    server = _server(mode, max_result_chars=1_000_000)
    try:
        with pytest.raises(McpToolError) as e:
            server.call_tool("probe", {"x": "a"})
    finally:
        server.close()
    text = str(e.value)
    assert "'probe'" in text and "'hostile'" in text and "max_result_chars=1,000,000" in text
    assert len(text) < 1_000


def test_a_server_writing_a_line_that_never_ends_is_stopped_at_the_message_bound():
    """One message may hold at most ``max_message_bytes``: the server is stopped there."""
    server = _server("endless-line", max_message_bytes=8 << 20)
    started = time.monotonic()
    try:
        assert [t.name for t in server.list_tools()] == ["probe"]
        for _ in range(2):  # the next call starts a new session, which is bounded too
            with pytest.raises(McpMessageTooLarge) as e:
                server.call_tool("probe", {"x": "a"})
            text = str(e.value)
            assert "'hostile'" in text and "max_message_bytes=8,388,608" in text, text
            assert "a line on its stdout" in text and "session was ended" in text
    finally:
        server.close()
    assert time.monotonic() - started < 50  # not the request's timeout_s (60 s) twice


def test_a_tool_result_under_the_bound_is_the_tools_value():
    server = _server("huge")
    try:
        assert server.call_tool("probe", {}) == "B" * 3_000_000  # default bound: 10,000,000
    finally:
        server.close()


@pytest.mark.parametrize(("mode", "said"), [
    ("bad-schema", "answered tools/list with something that is not MCP"),
    ("list-error", "answered tools/list with an error"),
])
def test_a_server_answering_its_listing_wrongly_is_named_so_not_unreachable(mode, said):
    server = _server(mode)
    try:
        with pytest.raises(ResourceError) as e:
            server.open()
    finally:
        server.close()
    text = str(e.value)
    assert "'hostile'" in text and said in text and "cannot be reached" not in text
    assert len(text) < 5_000


USER_MODULE = '''
import sys

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, ChatRequestEvent,
                                 ChatResponseEvent, InputEvent, OutputEvent,
                                 ResourceDescriptor, ResourceType, RunnerContext, action)
from flink_agents_py.integrations.mcp import McpServer
from flink_agents_py.testing import model_from_turns, tool_call


def seen(request):  # the model's second turn: says what the tool answered
    return "the tool said: " + request.messages[-1].content


class Asker(Agent):
    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(ChatRequestEvent(model="model", messages=[ChatMessage(content="go")]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"error": event.error,
                                           "content": event.response.message.content}))


agent = Asker()
agent.add_resource("hostile", ResourceType.MCP_SERVER, ResourceDescriptor(
    McpServer, command=[sys.executable, sys.argv[1], "endless-line"],
    max_message_bytes=4 << 20, list_at_plan_build=False))
agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                   model_from_turns([tool_call("probe", x="a"), seen]))
agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
    ChatModelSetup, connection="conn", tools=["probe"]))
agent.add_resource("probe", ResourceType.TOOL, ResourceDescriptor(
    "flink_agents_py.integrations.mcp.McpTool", server="hostile", tool="probe"))
env = AgentsExecutionEnvironment.local()
result = env.from_list([{"key": "k"}, {"key": "j"}]).apply(agent).run()
for out in result.outputs:
    print("OUT", out)
'''


def test_a_users_agent_reads_the_bound_as_its_tools_error_and_goes_on(tmp_path):
    """From a user's directory: each record's chat gets the tool's failure, named, and ends."""
    import subprocess

    (tmp_path / "my_job.py").write_text(USER_MODULE)
    proc = subprocess.run([sys.executable, "my_job.py", SERVER], cwd=tmp_path,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    outs = [line for line in proc.stdout.splitlines() if line.startswith("OUT ")]
    assert len(outs) == 2, proc.stdout
    for line in outs:
        assert "'error': None" in line and "the tool said: Error: McpMessageTooLarge" in line
        assert "max_message_bytes=4,194,304" in line


class _EndlessHttpMcp:
    """A streamable-HTTP MCP server whose ``tools/call`` answer is a body that never ends."""

    def __init__(self) -> None:
        import json
        from http.server import BaseHTTPRequestHandler

        from flink_agents_py.testing import LocalHTTPServer

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _answer(self, status: int, body: dict | None = None) -> None:
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - no stream the server starts
                self._answer(405)

            def do_DELETE(self) -> None:  # noqa: N802
                self._answer(200)

            def do_POST(self) -> None:  # noqa: N802
                msg = json.loads(self.rfile.read(int(self.headers["content-length"])))
                if "id" not in msg:  # a notification
                    return self._answer(202)
                rid, method = msg["id"], msg["method"]
                if method == "initialize":
                    return self._answer(200, {"jsonrpc": "2.0", "id": rid, "result": {
                        "protocolVersion": msg["params"]["protocolVersion"],
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "endless", "version": "0"}}})
                if method == "tools/list":
                    return self._answer(200, {"jsonrpc": "2.0", "id": rid, "result": {
                        "tools": [{"name": "probe", "inputSchema": {"type": "object"}}]}})
                self.send_response(200)  # tools/call: a JSON answer that never ends
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(1 << 40))
                self.end_headers()
                try:
                    self.wfile.write(b'{"jsonrpc": "2.0", "id": %d, "result": {"content": '
                                     b'[{"type": "text", "text": "' % rid)
                    while True:
                        self.wfile.write(b"H" * (1 << 20))
                except OSError:
                    return None

        self._httpd = LocalHTTPServer(Handler)
        self.url = f"{self._httpd.url}/mcp"

    def __enter__(self) -> _EndlessHttpMcp:
        self._httpd.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.__exit__(*exc)


def test_an_http_servers_answer_that_never_ends_is_cut_at_the_message_bound():
    with _EndlessHttpMcp() as srv:
        server = McpServer(url=srv.url, max_message_bytes=8 << 20, connect_timeout_s=60,
                           timeout_s=60)
        server.bind(lambda name, rtype: None, "endless")  # type: ignore[arg-type,return-value]
        started = time.monotonic()
        try:
            assert [t.name for t in server.list_tools()] == ["probe"]
            with pytest.raises(McpMessageTooLarge) as e:
                server.call_tool("probe", {})
        finally:
            server.close()
    text = str(e.value)
    assert "'endless'" in text and "an HTTP response" in text, text
    assert "max_message_bytes=8,388,608" in text
    assert time.monotonic() - started < 50  # not the request's timeout_s


@pytest.mark.parametrize(("mode", "error", "said"), [
    ("deep", McpMessageTooDeep, "nested too deeply to be read; its session was ended"),
    # the SDK's error, as for a server answering a JSON-RPC error
    ("deep-300", Exception, "answered with a message that is not MCP"),
    ("result-number", Exception, "answered with a message that is not MCP"),
])
def test_an_answer_the_sdk_cannot_read_fails_its_call_at_once_naming_the_server(mode, error,
                                                                                said):
    """The SDK reported such an answer and dropped it: the call waited its whole
    ``timeout_s`` and failed as a server that "did not answer". Now it fails when the
    answer comes; a message nested deeper than this process's JSON reader goes ends the
    session (as one over ``max_message_bytes`` does), and the next call starts the server
    again."""
    server = _server(mode)
    try:
        server.open()
        with pytest.raises(error) as err:
            server.call_tool("probe", {"x": "1"})
        assert said in str(err.value) and "hostile" in str(err.value), err.value
        assert "did not answer" not in str(err.value)
    finally:
        server.close()


def test_a_listing_of_small_pages_that_holds_too_much_in_all_is_refused(monkeypatch):
    """Each page is under ``max_message_bytes``, but the items of all pages are kept while
    the server is open: 1,000 pages of one tool with a 60 MB description each would have
    been 60 GB. A listing over ``MAX_LISTED_BYTES`` in all is refused, naming the server
    (here 1 MB pages, the page bound lowered to 100 so that the test stays small either
    way)."""
    from flink_agents_py.integrations.mcp import _session

    monkeypatch.setattr(_session, "MAX_LIST_PAGES", 100)
    monkeypatch.setattr(_session, "MAX_LISTED_BYTES", 16 << 20)
    server = _server("fat-pages")
    try:
        with pytest.raises(ResourceError) as e:
            server.open()
    finally:
        server.close()
    text = str(e.value)
    assert "'hostile'" in text and "tools/list" in text, text
    assert "holds more than 16,777,216 bytes (after 16 pages" in text, text
