"""Credentials written into a resource's URL or command line are secrets (``api._secret_urls``).

A hosted MCP server reached at ``https://host/mcp?api_key=<key>``, a proxy at
``http://user:<password>@host``, a stdio server started with ``--api-key <key>``: the URL and
the command line name the server in every warning and error about it (``McpServer.where``)
and show in the descriptor's ``repr``. They showed the credential whole (a plain
``Authorization`` header was masked already); now it is registered as a secret when the
descriptor or the resource is made, in the process that makes it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from flink_agents_py.api import ResourceDescriptor, mask_secrets
from flink_agents_py.api._secret_urls import plan_credentials

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("value", "found"), [
    ("https://user:p%40ssw0rd-123@proxy.example/v1", ["p@ssw0rd-123"]),
    ("https://ghp_0123456789abcdef@github.com/org/repo.git", ["ghp_0123456789abcdef"]),
    ("https://host/mcp?api_key=k1-aaaaaaaa&x=1&token=t1-bbbbbbbb", ["k1-aaaaaaaa", "t1-bbbbbbbb"]),
    ("https://host/v1?api-key=k2-cccccccc", ["k2-cccccccc"]),
    ("https://acct.blob.example/c?sv=2022&sig=s1%2Fdddddddd", ["s1/dddddddd"]),
    ("https://host/cb#access_token=t2-eeeeeeee", ["t2-eeeeeeee"]),
    ("see http://host/x?key=k3-ffffffff for details", ["k3-ffffffff"]),
    ("https://host/v1?model=gpt&monkey=banana123", []),
    ("http://127.0.0.1:8000/mcp", []),
    ("http://[::1:bad/", []),
    (["npx", "server", "--api-key", "k4-gggggggg", "--token=t3-hhhhhhhh", "--verbose"],
     ["k4-gggggggg", "t3-hhhhhhhh"]),
    (["srv", "--token", "--verbose"], []),
    ({"nested": ["a", {"url": "https://u:pw-iiiiiiii@h/"}]}, ["pw-iiiiiiii"]),
    # texts under credential names, at any depth; not a field named just ``key``
    ({"password": "pw-jjjjjjjj", "dsn": "db", "db": {"api_key": "k5-kkkkkkkk"}},
     ["pw-jjjjjjjj", "k5-kkkkkkkk"]),
    ({"secret": ["s2-llllllll"], "key": "documents", "api_key_env": "MY_KEY",
      "eos_token": "<|im_end|>", "auth_token": "t4-mmmmmmmm",
      "secret_headers": {"x-api-key": "GATEWAY_KEY"}, "secret_env": {"TOKEN": "MY_TOKEN"}},
     ["s2-llllllll", "t4-mmmmmmmm"]),
    # connection strings: libpq's, ADO.NET's and ODBC's, Azure's, a JDBC URL's parameters
    ("host=db.example user=app password=pw-nnnnnnnn dbname=x", ["pw-nnnnnnnn"]),
    ("host=db password='pw o\\'pppppp' port=5432", ["pw o'pppppp"]),
    ("Server=tcp:db;Database=x;User Id=app;Pwd={pw;q}}qqqqq};", ["pw;q}qqqqq"]),
    ("DefaultEndpointsProtocol=https;AccountName=a;AccountKey=ak+r/rrrr==;",
     ["ak+r/rrrr=="]),
    ("jdbc:sqlserver://db:1433;user=app;password=pw-ssssssss;database=x", ["pw-ssssssss"]),
    ("https://host/v1;api_key=k6-tttttttt/x", ["k6-tttttttt/x"]),
    ("sort=key=name filter=status=open", []),
    # one header line (curl's -H argument), alone or in a command line
    (["curl", "-H", "X-Api-Key: k7-uuuuuuuu", "-H", "Accept: text/plain"], ["k7-uuuuuuuu"]),
    ("Authorization: Bearer t5-vvvvvvvv", ["Bearer t5-vvvvvvvv"]),
])
def test_the_credentials_a_url_or_a_command_line_carries(value, found):
    assert list(plan_credentials(value)) == found


def test_a_descriptor_made_with_a_url_credential_masks_it_everywhere():
    key = f"k-{uuid.uuid4().hex}"
    descriptor = ResourceDescriptor("my.module.Store", url=f"https://db.example/?api_key={key}")
    assert key not in repr(descriptor)
    assert mask_secrets(f"GET https://db.example/?api_key={key} failed") == \
        "GET https://db.example/?api_key=[REDACTED] failed"
    assert descriptor.arguments["url"].endswith(key)  # the value itself is unchanged


@pytest.mark.parametrize("form", [
    "host=db.example user=app password={pw} dbname=app",
    "Server=tcp:db;Database=app;User Id=app;Password={pw};",
    "jdbc:sqlserver://db:1433;user=app;password={pw};database=app",
    "DefaultEndpointsProtocol=https;AccountName=app;AccountKey={pw};"])
def test_a_connection_string_credential_is_masked_in_the_repr_and_in_errors(form):
    pw = f"pw-{uuid.uuid4().hex}"
    descriptor = ResourceDescriptor("my.module.Database", dsn=form.format(pw=pw))
    assert pw not in repr(descriptor)
    assert pw not in mask_secrets(f"could not connect: {form.format(pw=pw)}")
    assert descriptor.arguments["dsn"] == form.format(pw=pw)  # unchanged


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


USER_SCRIPT = '''
import json, logging, sys
logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelConnection, ChatModelSetup,
    ChatResponse, InputEvent, MessageRole, OutputEvent, ResourceDescriptor, ResourceType,
    RunnerContext, ToolCall, action)
from flink_agents_py.integrations.mcp import McpServer, McpTool


class Caller(ChatModelConnection):
    """Asks for the tool, then answers with what the tool said."""

    def chat(self, messages, **kwargs):
        if messages[-1].role != MessageRole.TOOL:
            return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content="",
                tool_calls=[ToolCall(id="c1", name="lookup", arguments={"sku": "B01"})]))
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT,
                                                content=messages[-1].content))


class Asker(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        response = await ctx.chat(event.input["model"], [ChatMessage(content="hi")])
        ctx.send_event(OutputEvent(output=response.content))


agent = Asker()
agent.add_resource("http", ResourceType.MCP_SERVER, ResourceDescriptor(
    McpServer, url=sys.argv[1], connect_timeout_s=3, plan_timeout_s=3))
agent.add_resource("stdio", ResourceType.MCP_SERVER, ResourceDescriptor(
    McpServer, command=[sys.executable, "-c", "import sys; sys.exit(3)", "--api-key",
                        sys.argv[2]], connect_timeout_s=3, plan_timeout_s=3))
agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(Caller))
for server in ("http", "stdio"):
    agent.add_resource(f"lookup_{server}", ResourceType.TOOL,
                       ResourceDescriptor(McpTool, server=server, tool="lookup"))
    agent.add_resource(server + "_model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=[f"lookup_{server}"]))
result = (AgentsExecutionEnvironment.local()
          .from_list([{"key": "a", "model": "http_model"}, {"key": "b", "model": "stdio_model"}])
          .apply(agent).run())
print(json.dumps({"outputs": result.outputs,
                  "errors": [e.model_dump(mode="json") for e in result.errors]}))
'''


def test_a_users_mcp_servers_with_credentials_in_url_and_command_line_never_show_them(
        tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    password, token, key = (f"{what}-{uuid.uuid4().hex}" for what in ("pw", "tok", "key"))
    url = f"http://agent:{password}@127.0.0.1:{_closed_port()}/mcp?api_key={token}"
    script = tmp_path / "my_agent.py"
    script.write_text(textwrap.dedent(USER_SCRIPT))
    done = subprocess.run([sys.executable, str(script), url, key], cwd=tmp_path,
                          capture_output=True, text=True, timeout=180,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    seen = done.stdout + done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    # both chats failed on their server, the error records naming it by URL / command line
    assert sorted(e["key"] for e in report["errors"]) == ["a", "b"]
    assert all("cannot be reached" in e["message"] for e in report["errors"])
    assert "could not be listed" in seen  # the plan-build warnings naming both were written
    assert "@127.0.0.1" in seen and "api_key=[REDACTED]" in seen
    assert "--api-key [REDACTED]" in seen
    for secret in (password, token, key):
        assert secret not in seen


def test_the_trace_command_never_prints_a_token_of_its_otlp_url_or_a_misspelt_header(
        tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from support import trace_agents

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.observability import EventLog

    log = tmp_path / "events.jsonl"
    (AgentsExecutionEnvironment.local(event_log=EventLog(str(log)))
     .from_list([{"key": "a", "n": 1, "sku": "s"}]).apply(trace_agents.shop()).run())
    exe = Path(sys.executable).with_name("flink-agents-py")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
           "PYTHONPATH": str(REPO)}
    token = f"tok-{uuid.uuid4().hex}"
    url = f"http://127.0.0.1:{_closed_port()}/v1/traces?api_key={token}"
    proc = subprocess.run([str(exe), "trace", str(log), "--otlp", url], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, env=env)
    assert proc.returncode == 3, proc.stderr
    assert "delivered 0 of" in proc.stderr and "api_key=[REDACTED]" in proc.stderr
    assert token not in proc.stdout + proc.stderr
    # a header written with ':' instead of '=' is quoted back: its bearer token is masked
    proc = subprocess.run([str(exe), "trace", str(log), "--otlp", "http://127.0.0.1:9",
                           "--otlp-header", f"Authorization: Bearer {token}"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert proc.returncode == 2 and "expected NAME=VALUE" in proc.stderr
    assert token not in proc.stdout + proc.stderr


LITERAL_SCRIPT = '''
import json, logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, InputEvent, Resource, ResourceDescriptor,
    ResourceType, action)


class Warehouse(Resource):
    RESOURCE_TYPE = ResourceType.TOOL
    dsn: str = ""
    password: str = ""
    options: dict = {}

    def connect(self):
        raise ConnectionError(f"login to {self.dsn} refused for password {self.password!r} "
                              f"(token {self.options['auth_token']})")


class Loader(Agent):
    @action(InputEvent)
    @staticmethod
    def load(event, ctx):
        store = ctx.get_resource("warehouse", ResourceType.TOOL)
        try:
            store.connect()
        except ConnectionError as e:
            logging.getLogger("my_agent").warning("cannot load: %s", e)
            raise RuntimeError("load failed") from e


agent = Loader()
agent.add_resource("warehouse", ResourceType.TOOL, ResourceDescriptor(
    Warehouse, dsn="host=db.internal user=app password=" + sys.argv[3], password=sys.argv[1],
    options={"auth_token": sys.argv[2]}))
result = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(agent).run()
print(json.dumps([e.model_dump(mode="json") for e in result.errors]))
'''


def test_a_password_field_of_a_users_resource_never_leaves_in_logs_or_error_records(
        tmp_path: Path) -> None:
    # a literal ``password=`` / ``auth_token`` of a resource was masked in its repr only:
    # an exception quoting it reached the log line, the error record and its traceback; so
    # did the password of a connection string (libpq's ``password=...``) in a plain field
    password, token, dsn_pw = (f"{what}-{uuid.uuid4().hex}" for what in ("pw", "tok", "dsn"))
    script = tmp_path / "my_agent.py"
    script.write_text(textwrap.dedent(LITERAL_SCRIPT))
    done = subprocess.run([sys.executable, str(script), password, token, dsn_pw], cwd=tmp_path,
                          capture_output=True, text=True, timeout=180,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    errors = json.loads(done.stdout.splitlines()[-1])
    assert len(errors) == 1 and "load failed" in errors[0]["message"]
    seen = done.stdout + done.stderr
    assert "refused for password '[REDACTED]' (token [REDACTED])" in seen
    assert "db.internal" in seen  # ordinary fields are shown
    assert "user=app password=[REDACTED]" in seen
    assert password not in seen and token not in seen and dsn_pw not in seen
