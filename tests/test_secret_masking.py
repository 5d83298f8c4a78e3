"""Secrets by value: an API key a provider echoes back never leaves the process.

A fake chat-completions server on 127.0.0.1 (``support.leaky_provider``) echoes the key the
client sent: in a 401 JSON body, in a 500 HTML debug page (also base64-encoded, as a Basic
auth header carries it), and in response headers. The key is read from the connection's
``api_key_env`` variable and has shapes the secret-looking patterns do not know (a
``Zq8-local-...`` string, a UUID, a long hex). The tests assert the key is in none of: the
error records and their tracebacks, the failure texts carried to the agent's outputs, the
event log file, the trace text and HTML (``flink-agents-py trace``), the OpenTelemetry spans,
the captured logs (DEBUG, every logger: the SDK's and HTTP library's too), and the stdout and
stderr of a user's script run from a directory outside the repository; and, on a Flink
MiniCluster, in the error output and the event log. Then: what a user's script catches from a
connection (the SDK exception it is chained to, its body, response and request), a
credential a validation error would quote, reprs of descriptors and resources, log records'
``extra=`` fields, the exception a failed durable call hands its caller, and a resource's
failed check or open.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import pathlib
import subprocess
import sys
import textwrap
import uuid
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from support.leaky_provider import LeakyProvider

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import mask_secrets, register_secret
from flink_agents_py.observability import EventLog, FileSink, OtelSink, read_event_log

pytest.importorskip("openai")
pytestmark = pytest.mark.timeout(300)

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else pathlib.Path(sys.executable))
LEAKY_SERVER = str(ROOT / "tests" / "support" / "leaky_provider.py")

MODES = ("401", "500", "500-html", "header")

USER_AGENTS = '''
"""A user's agents: each record asks the model setup named by its "mode"."""
from flink_agents_py.api import (
    Agent, ChatMessage, ChatModelSetup, ChatRequestEvent, ChatResponseEvent, InputEvent,
    OutputEvent, ResourceDescriptor, ResourceType, RunnerContext, action)
from flink_agents_py.integrations.chat_models import OpenAIChatModel


class Asker(Agent):
    """``await ctx.chat`` (a failed chat fails the action), or a ChatRequestEvent whose
    answer's error is passed to the output (route "event")."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        mode = event.input["mode"]
        if event.input.get("route") == "event":
            ctx.send_event(ChatRequestEvent(model=mode, messages=[ChatMessage(content="hi")]))
            return
        response = await ctx.chat(mode, [ChatMessage(content="hi")])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "answer": response.message.content}))

    @action(ChatResponseEvent)
    @staticmethod
    def answered(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "error": event.error}))


def asker(base_url: str, env_var: str) -> Asker:
    agent = Asker()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        OpenAIChatModel, base_url=base_url, api_key_env=env_var, api_key_required=True))
    for mode in ("401", "500", "500-html", "header", "ok"):
        agent.add_resource(mode, ResourceType.CHAT_MODEL, ResourceDescriptor(
            ChatModelSetup, connection="conn", model=mode))
    return agent


MODES = ("401", "500", "500-html", "header")
RECORDS = ([{"key": f"{m}-await", "mode": m} for m in MODES]
           + [{"key": f"{m}-event", "mode": m, "route": "event"} for m in MODES]
           + [{"key": "ok", "mode": "ok"}])
'''

LOCAL_MAIN = '''
"""Usage: main.py BASE_URL EVENT_LOG ERRORS_FILE (the key is in $LEAKY_KEY)."""
import json
import logging
import sys

from flink_agents_py import AgentsExecutionEnvironment
from my_agents import RECORDS, asker

logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
base_url, event_log, errors_file = sys.argv[1:4]
result = (AgentsExecutionEnvironment.local(event_log=event_log).from_list(RECORDS)
          .apply(asker(base_url, "LEAKY_KEY")).run())
with open(errors_file, "w") as f:
    for e in result.errors:
        f.write(e.model_dump_json() + "\\n")
        print("ERROR", e.model_dump_json(), flush=True)  # as a user would look at them
for o in result.outputs:
    print("OUT", json.dumps(o), flush=True)
'''

FLINK_MAIN = '''
"""Usage: main.py BASE_URL EVENT_LOG (the key is in $LEAKY_KEY)."""
import json
import sys

from pyflink.common import Types

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.flink import create_stream_environment
from my_agents import RECORDS, asker

base_url, event_log = sys.argv[1:3]
env = create_stream_environment(execution_mode="thread", restart_attempts=0)
pickled = Types.PICKLED_BYTE_ARRAY()
agents = AgentsExecutionEnvironment.flink(env, event_log=event_log, metrics=False)
records = env.from_collection([json.dumps(r) for r in RECORDS], type_info=Types.STRING()).map(
    json.loads, output_type=pickled)
applied = agents.from_datastream(records).apply(asker(base_url, "LEAKY_KEY"))
out = applied.to_datastream().map(lambda o: ("out", o), output_type=pickled).union(
    applied.errors_datastream().map(lambda e: ("err", e), output_type=pickled))
with out.execute_and_collect("leaky-provider") as results:
    for kind, value in results:
        data = value.model_dump(mode="json") if hasattr(value, "model_dump") else value
        print(kind.upper(), json.dumps(data), flush=True)
'''


def key_shapes() -> list[str]:
    """Keys no secret-looking pattern knows: fresh each run, so no test can hard-code them."""
    return [f"Zq8-local-KEY_{uuid.uuid4().hex[:8]}", str(uuid.uuid4()), os.urandom(32).hex()]


def leaked_forms(key: str) -> list[str]:
    """The key as text and as the server's base64 (``svc-user:`` is 9 bytes: aligned)."""
    encoded = base64.b64encode(f"svc-user:{key}".encode()).decode()
    return [key, encoded[12:-4]]


def assert_no_key(what: str, text: str, key: str) -> None:
    for form in leaked_forms(key):
        assert form not in text, f"the key leaked into {what}: ...{_around(text, form)}..."


def _around(text: str, form: str) -> str:
    i = text.index(form)
    return text[max(0, i - 120):i].replace(form, "<KEY>") + "<KEY>"


def write_user_project(folder: pathlib.Path, main: str) -> pathlib.Path:
    folder.mkdir(parents=True, exist_ok=True)
    assert ROOT not in folder.resolve().parents
    (folder / "my_agents.py").write_text(textwrap.dedent(USER_AGENTS))
    (folder / "main.py").write_text(textwrap.dedent(main))
    (folder / "direct.py").write_text(textwrap.dedent(DIRECT))
    return folder


def run_user(folder: pathlib.Path, args: list[str], key: str,
             script: str = "main.py") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FLINK_CONF_DIR")}
    env["LEAKY_KEY"] = key
    return subprocess.run([PYTHON, script, *args], cwd=folder, env=env, text=True,
                          capture_output=True, timeout=280, check=False)


def _user_module(tmp_path: pathlib.Path) -> Any:
    folder = write_user_project(tmp_path / "user", LOCAL_MAIN)
    sys.path.insert(0, str(folder))
    try:
        import importlib

        sys.modules.pop("my_agents", None)
        return importlib.import_module("my_agents")
    finally:
        sys.path.remove(str(folder))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    exe = pathlib.Path(sys.executable).with_name("flink-agents-py")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "flink_agents_py.cli"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, check=False)


# -- the masking function ---------------------------------------------------------------------
def test_a_registered_value_is_masked_in_its_escaped_and_encoded_forms():
    key = f"pw/{uuid.uuid4().hex[:10]}+\"é"
    assert register_secret(key, "$TEST")
    json_form = json.dumps(key)[1:-1]
    for shift in ("", "u:", "us:", "usr:"):  # the three base64 alignments (and one more)
        encoded = base64.b64encode(f"{shift}{key}".encode()).decode()
        assert mask_secrets(f"Basic {encoded}") != f"Basic {encoded}"
    for form in (key, json_form, repr(key)[1:-1], quote(key, safe=""), quote_plus(key),
                 key.encode().hex()):
        masked = mask_secrets(f"before {form} after")
        assert form not in masked and masked == "before [REDACTED] after"
    assert mask_secrets("nothing secret here") == "nothing secret here"


def test_the_event_log_masks_a_secret_anywhere_in_a_record_even_the_key():
    from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
    from flink_agents_py.observability import MemorySink

    class Echo(Agent):
        @action(InputEvent)
        @staticmethod
        def on_input(event: InputEvent, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output={"seen": event.input["note"]}))

    token = f"tok_{uuid.uuid4().hex}"
    register_secret(token, "$TEST_TOKEN")
    sink = MemorySink()
    records = [{"key": token, "note": f"x{token}y"}, {"key": "plain", "note": "nothing"}]
    (AgentsExecutionEnvironment.local(event_log=EventLog(sink=sink, level="verbose"))
     .from_list(records).apply(Echo()).run())
    text = json.dumps(sink.records)
    assert token not in text
    assert '"key": "[REDACTED]"' in text and "x[REDACTED]y" in text
    assert '"key": "plain"' in text and "nothing" in text  # the rest is untouched


class _SdkError(Exception):
    """An SDK's error, raised in a durable call, with the key in its message and attributes."""

    def __init__(self, message: str, body: dict) -> None:
        super().__init__(message)
        self.body = body
        self.status_code = 401


def test_a_failed_durable_call_is_recorded_in_keyed_state_with_the_key_masked():
    import msgspec

    from flink_agents_py.runtime.recorder._outcomes import rebuild_exception, store_outcome
    from flink_agents_py.runtime.recorder._state import CallRecord

    key = str(uuid.uuid4())
    register_secret(key, "$TEST_KEY")
    rec = CallRecord(digest="d")
    error = _SdkError(f"bad key {key}", {"error": {"message": f"Incorrect key {key}"}})
    ok, _ = store_outcome(rec, "r0/a/c0", False, error)
    assert not ok
    stored = msgspec.json.encode(rec).decode()  # what keyed state, checkpoints, journals hold
    assert key not in stored and "bad key [REDACTED]" in stored
    replayed = rebuild_exception(rec)  # a replay rebuilds it from the masked record
    assert isinstance(replayed, _SdkError) and str(replayed) == "bad key [REDACTED]"
    assert replayed.status_code == 401 and key not in json.dumps(replayed.body)


USER_CONNECTION = '''
"""A user's own connection: reads its key itself, and a careless SDK echoes it."""
import os

from flink_agents_py.api import ChatModelConnection


class HomeMadeConnection(ChatModelConnection):
    api_key_env: str = "HOME_MADE_KEY"

    def chat(self, messages, **kwargs):
        key = os.environ[self.api_key_env]
        raise RuntimeError(f"401 Unauthorized: key {key!r} (hex {key.encode().hex()})")
'''


def test_a_users_own_connection_with_an_api_key_env_field_has_its_key_masked(
        tmp_path, monkeypatch):
    from flink_agents_py.api import ChatModelSetup, ResourceDescriptor, ResourceType

    folder = tmp_path / "user"
    folder.mkdir()
    (folder / "home_made.py").write_text(USER_CONNECTION)
    monkeypatch.syspath_prepend(str(folder))
    key = f"hm-{uuid.uuid4().hex}"
    monkeypatch.setenv("HOME_MADE_KEY", key)
    user = _user_module(tmp_path / "agents")
    agent = user.Asker()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        clazz="home_made.HomeMadeConnection"))
    agent.add_resource("401", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", model="x"))
    res = (AgentsExecutionEnvironment.local().from_list([{"key": "k", "mode": "401"}])
           .apply(agent).run())
    [error] = res.errors
    assert "401 Unauthorized: key '[REDACTED]' (hex [REDACTED])" in error.message
    assert_no_key("an error record", error.model_dump_json(), key)


def test_otlp_header_values_are_registered_with_their_credential(monkeypatch):
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from flink_agents_py.observability import otlp_exporter

    token = uuid.uuid4().hex
    otlp_exporter("http://127.0.0.1:9/", headers={"Authorization": f"Bearer {token}"})
    assert mask_secrets(f"collector said: token {token} refused") == \
        "collector said: token [REDACTED] refused"


def test_flink_metric_labels_never_carry_a_known_secret():
    from test_observability_flink import FakeMetricGroup

    from flink_agents_py.observability._flink_mirror import FlinkMetricsMirror

    key = f"model-{uuid.uuid4().hex}"
    register_secret(key, "$TEST_KEY")
    registry: dict[str, Any] = {}
    mirror = FlinkMetricsMirror(FakeMetricGroup(registry))
    counters = {n: 0 for n in ("events_processed", "outputs_emitted", "runs_started",
                               "runs_completed", "durable_calls_executed",
                               "durable_calls_replayed", "runs_in_flight", "calls_in_flight")}
    # the model a provider reported (a restored chat's label) echoes the key
    mirror.push(counters, {"chats_failed": {key: 1, "review_model": 2}}, {})
    names = "\n".join(registry)
    assert "flink_agents.model.[REDACTED].chats_failed" in names
    assert "flink_agents.model.review_model.chats_failed" in names
    assert key not in names


def test_short_and_empty_values_are_not_registered():
    assert not register_secret("")
    assert not register_secret(None)
    assert not register_secret("abc1234")  # 7 characters: would blank out ordinary text
    assert mask_secrets("code abc1234") == "code abc1234"


def test_a_header_a_connection_marks_secret_is_sent_and_masked(monkeypatch, caplog):
    from flink_agents_py.api import ChatMessage, MissingApiKeyError, ProviderError
    from flink_agents_py.integrations.chat_models import OpenAIChatModel

    gateway = str(uuid.uuid4())
    monkeypatch.setenv("GATEWAY_KEY", gateway)
    caplog.set_level(logging.DEBUG)
    with LeakyProvider() as srv:
        conn = OpenAIChatModel(base_url=srv.url, api_key_required=False, default_model="gateway",
                               secret_headers={"x-gateway-key": "GATEWAY_KEY"},
                               headers={"x-team": "search"})
        with pytest.raises(ProviderError) as info:
            conn.chat([ChatMessage(content="hi")])
        assert gateway in srv.keys_seen  # sent as the header
    assert "status 403" in str(info.value) and "gateway key '[REDACTED]'" in str(info.value)
    assert gateway not in caplog.text and "GATEWAY_KEY" in repr(conn.model_dump())
    assert gateway not in repr(conn.model_dump())  # the plan holds the variable's name only
    monkeypatch.delenv("GATEWAY_KEY")
    fresh = OpenAIChatModel(base_url=srv.url, secret_headers={"x-gateway-key": "GATEWAY_KEY"})
    with pytest.raises(MissingApiKeyError, match=r"header 'x-gateway-key' .*\$GATEWAY_KEY"):
        fresh.check()


# -- the local runner ---------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [0, 1, 2], ids=["zq8-string", "uuid", "long-hex"])
def test_an_echoed_key_leaves_no_trace_on_the_local_runner(shape, tmp_path, monkeypatch, caplog):
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    key = key_shapes()[shape]
    monkeypatch.setenv("LEAKY_KEY", key)
    caplog.set_level(logging.DEBUG)
    user = _user_module(tmp_path)
    log_path = tmp_path / "events.jsonl"
    spans = InMemorySpanExporter()
    event_log = EventLog(sink=OtelSink(exporter=spans, forward=FileSink(log_path)),
                         level="verbose")
    with LeakyProvider() as srv:
        result = (AgentsExecutionEnvironment.local(event_log=event_log).from_list(user.RECORDS)
                  .apply(user.asker(srv.url, "LEAKY_KEY")).run())
        assert key in srv.keys_seen  # the client really sent it, and the server echoed it

    # error records: one per awaited failed chat, saying what failed, without the key
    by_key = {e.key: e for e in result.errors}
    assert sorted(by_key) == sorted(f"{m}-await" for m in MODES)
    assert "status 401" in by_key["401-await"].message
    assert "[REDACTED]" in by_key["401-await"].message
    assert "[REDACTED]" in (by_key["500-await"].traceback or "")
    for e in result.errors:
        assert_no_key("an error record", e.model_dump_json(), key)
        assert e.traceback and "Traceback" in e.traceback
    # the failure texts the chats answered with (passed to outputs by the user's action)
    errors = {o["key"]: o["error"] for o in result.outputs if "error" in o}
    assert sorted(errors) == sorted(f"{m}-event" for m in MODES)
    assert all(errors.values())
    assert {"key": "ok", "answer": "fine"} in result.outputs
    assert_no_key("the outputs", json.dumps(result.outputs), key)

    # the event log, and the trace text and HTML made from it by the CLI
    text = log_path.read_text()
    assert "call_finished" in text and "[REDACTED]" in text
    assert_no_key("the event log", text, key)
    html = tmp_path / "trace.html"
    proc = _cli("trace", str(log_path), "--limit", "100", "--html", str(html))
    assert proc.returncode == 0, proc.stderr
    assert "401-await" in proc.stdout
    assert_no_key("the trace text", proc.stdout + proc.stderr, key)
    assert_no_key("the trace HTML", html.read_text(), key)

    # the OpenTelemetry spans (names, attributes, events, statuses)
    finished = spans.get_finished_spans()
    assert any(s.status.description and "401" in s.status.description for s in finished)
    assert_no_key("the OTel spans", "\n".join(s.to_json() for s in finished), key)

    # every log record of every logger (the SDK's and httpx's DEBUG lines included)
    assert any("401" in r.getMessage() for r in caplog.records)
    logged = caplog.text + "\n".join(r.getMessage() for r in caplog.records)
    assert_no_key("the logs", logged, key)


def test_a_users_script_outside_the_repository_prints_no_key(tmp_path):
    key = key_shapes()[0]
    user = write_user_project(tmp_path / "user", LOCAL_MAIN)
    with LeakyProvider() as srv:
        proc = run_user(user, [srv.url, str(tmp_path / "ev.jsonl"), str(tmp_path / "err")], key)
        assert key in srv.keys_seen
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("ERROR ") == len(MODES) and "DEBUG" in proc.stderr
    for what, text in (("stdout", proc.stdout), ("stderr (DEBUG logs)", proc.stderr),
                       ("the error records", (tmp_path / "err").read_text()),
                       ("the event log", (tmp_path / "ev.jsonl").read_text())):
        assert_no_key(what, text, key)


DIRECT = '''
"""Usage: direct.py BASE_URL: a chat that fails and is not caught (the key is in $LEAKY_KEY)."""
import sys
import threading

from flink_agents_py.api import ChatMessage
from flink_agents_py.integrations.chat_models import OpenAIChatModel

conn = OpenAIChatModel(base_url=sys.argv[1], api_key_env="LEAKY_KEY", default_model="401")
thread = threading.Thread(target=conn.chat, args=([ChatMessage(content="hi")],))
thread.start()  # fails in a thread: Python prints the traceback
thread.join()
conn.chat([ChatMessage(content="hi")])  # fails in the main thread: the script dies with it
'''


def test_an_uncaught_failure_of_a_users_script_prints_no_key(tmp_path):
    key = key_shapes()[1]
    folder = write_user_project(tmp_path / "user", DIRECT)
    with LeakyProvider() as srv:
        proc = run_user(folder, [srv.url], key, script="direct.py")
        assert srv.keys_seen.count(key) == 2
    assert proc.returncode == 1
    assert proc.stderr.count("Error code: 401 - Incorrect API key provided: [REDACTED]") == 4
    assert "Exception in thread" in proc.stderr and "ProviderError" in proc.stderr
    assert_no_key("the script's stderr", proc.stderr, key)


# -- Flink ----------------------------------------------------------------------------------------
@pytest.mark.flink
def test_an_echoed_key_leaves_no_trace_on_a_flink_minicluster(tmp_path):
    pytest.importorskip("pyflink")
    key = key_shapes()[2]
    user = write_user_project(tmp_path / "user", FLINK_MAIN)
    with LeakyProvider() as srv:
        proc = run_user(user, [srv.url, str(tmp_path / "events.jsonl")], key)
        assert key in srv.keys_seen  # the Flink worker sent it
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-6000:]
    rows = [line.split(" ", 1) for line in proc.stdout.splitlines()
            if line.startswith(("OUT ", "ERR "))]
    errors = [json.loads(v) for k, v in rows if k == "ERR"]
    assert sorted(e["key"] for e in errors) == sorted(f"{m}-await" for m in MODES)
    by_key = {e["key"]: e for e in errors}
    assert "[REDACTED]" in by_key["401-await"]["message"]
    assert "Basic c3ZjLXVzZXI6[REDACTED]" in by_key["500-await"]["traceback"]
    files = sorted(tmp_path.glob("events*.jsonl"))
    assert files
    records = read_event_log(files)
    assert any(r.get("kind") == "call_finished" and r.get("status") == "failed" for r in records)
    assert_no_key("the error output", json.dumps(errors), key)
    assert_no_key("the outputs", json.dumps([v for k, v in rows if k == "OUT"]), key)
    assert_no_key("the event log", "".join(f.read_text() for f in files), key)
    assert_no_key("the job's stdout and stderr", proc.stdout + proc.stderr, key)


# -- a secret put in a plain header or environment entry anyway --------------------------------
def test_a_credential_in_a_plain_header_is_masked_when_the_provider_echoes_it():
    """``headers={"x-gateway-key": ...}`` (not ``secret_headers``): the runtime registers the
    values of plain entries whose names carry a credential when it builds the resource, so
    the gateway quoting the key back leaves it in no error record or log."""
    from flink_agents_py.api import (
        Agent,
        ChatMessage,
        ChatModelSetup,
        InputEvent,
        ResourceDescriptor,
        ResourceType,
        RunnerContext,
        action,
    )
    from flink_agents_py.integrations.chat_models import OpenAIChatModel

    class Gateway(Agent):
        @action(InputEvent)
        @staticmethod
        async def ask(event: InputEvent, ctx: RunnerContext) -> None:
            await ctx.chat("gw", [ChatMessage(content="hi")])

    literal = f"gw-{uuid.uuid4().hex}"
    with LeakyProvider() as srv:
        agent = Gateway()
        agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
            OpenAIChatModel, base_url=srv.url, api_key_required=False,
            headers={"x-gateway-key": literal, "x-team": "search"}))
        agent.add_resource("gw", ResourceType.CHAT_MODEL, ResourceDescriptor(
            ChatModelSetup, connection="conn", model="gateway"))
        result = AgentsExecutionEnvironment.local().from_list([{"key": "k"}]).apply(agent).run()
        assert literal in srv.keys_seen  # sent as the header, and echoed
    [error] = result.errors
    assert "status 403" in error.message and "gateway key '[REDACTED]'" in error.message
    assert_no_key("an error record", error.model_dump_json(), literal)
    assert mask_secrets("team search") == "team search"  # x-team names no credential


@pytest.mark.parametrize(("field", "name", "registered"), [
    ("headers", "Authorization", True), ("headers", "Proxy-Authorization", True),
    ("headers", "X-Api-Key", True), ("headers", "x-auth-token", True),
    ("headers", "Cookie", True), ("env", "GITHUB_TOKEN", True), ("env", "DB_PASSWORD", True),
    ("env", "OPENAI_API_KEY", True), ("headers", "x-team", False), ("env", "MONKEY", False),
    ("env", "TOKENIZER_DIR", False),
])
def test_plain_entries_are_secrets_when_their_names_carry_a_credential(field, name, registered):
    from flink_agents_py.api.internal import register_resource_secrets

    class Resource:
        pass

    value = uuid.uuid4().hex
    resource = Resource()
    setattr(resource, field, {name: f"Bearer {value}" if name.endswith("ization") else value})
    register_resource_secrets(resource)
    assert (mask_secrets(f"echo {value}") == "echo [REDACTED]") is registered


def test_a_flink_agents_literal_api_key_is_sent_and_masked(caplog):
    """A Flink Agents program's ``api_key=...`` / ``api_base_url=...`` (compat names): the key
    reaches the provider, and its echo reaches no error record, log or repr."""
    from flink_agents_py.compat import (
        Agent,
        AgentsExecutionEnvironment,
        ChatMessage,
        InputEvent,
        OpenAIChatModelConnection,
        OutputEvent,
        ResourceDescriptor,
        ResourceName,
        RunnerContext,
        action,
        chat_model_connection,
        chat_model_setup,
    )

    literal = f"sk-fa-{uuid.uuid4().hex}"

    with LeakyProvider() as srv:
        class Ported(Agent):
            @chat_model_connection
            @staticmethod
            def openai_connection() -> ResourceDescriptor:
                return ResourceDescriptor(
                    clazz=ResourceName.ChatModel.OPENAI_COMPLETIONS_CONNECTION,
                    api_key=literal, api_base_url=srv.url, max_retries=0, timeout=30.0)

            @chat_model_setup
            @staticmethod
            def leaky() -> ResourceDescriptor:
                return ResourceDescriptor(
                    clazz=ResourceName.ChatModel.OPENAI_COMPLETIONS_SETUP,
                    connection="openai_connection", model="401")

            @action(InputEvent)
            @staticmethod
            async def ask(event: InputEvent, ctx: RunnerContext) -> None:
                try:
                    await ctx.chat("leaky", [ChatMessage(content="hi")])
                except Exception as e:  # noqa: BLE001 - the failure's text is the output
                    ctx.send_event(OutputEvent(output=str(e)))

        with caplog.at_level(logging.DEBUG):
            env = AgentsExecutionEnvironment.get_execution_environment()
            out = env.from_list([{"key": "k", "value": "v"}]).apply(Ported()).to_list()
            env.execute()
        assert literal in srv.keys_seen  # sent as the key
    [row] = out
    [text] = row.values()
    assert "401" in text and "[REDACTED]" in text
    assert_no_key("the output", text, literal)
    assert_no_key("the logs", caplog.text, literal)
    conn = OpenAIChatModelConnection(api_key=literal, api_base_url="http://127.0.0.1:9/v1")
    assert conn.base_url == "http://127.0.0.1:9/v1"
    assert_no_key("the connection's repr", repr(conn) + str(conn), literal)


# -- what a caught exception, a rejected argument and a repr carry -----------------------------
CAUGHT = '''
"""Usage: caught.py BASE_URL: a user calling a connection and printing what it caught."""
import sys
import traceback

import openai

from flink_agents_py.api import ChatMessage, ProviderError
from flink_agents_py.integrations.chat_models import OpenAIChatModel

conn = OpenAIChatModel(base_url=sys.argv[1], api_key_env="LEAKY_KEY", max_retries=0)
for model in ("401", "500", "header"):
    try:
        conn.chat([ChatMessage(content="hi")], model=model)
    except ProviderError as e:
        cause = e.__cause__
        # the SDK's own exception stays the cause (its type, status and response kept)
        assert isinstance(cause, openai.APIStatusError), type(cause)
        print("STATUS", e.status_code, cause.status_code, cause.response.status_code)
        print("TRACEBACK", traceback.format_exc())
        print("CAUSE", repr(cause), str(cause), cause.args, getattr(cause, "message", ""))
        print("BODY", cause.body)
        print("RESPONSE", cause.response.text, dict(cause.response.headers))
        print("REQUEST", dict(cause.request.headers), cause.request.url)
        print("CONTEXT", repr(e.__context__), repr(cause.__context__))
        print("ARGS", e.args)
'''


def test_an_exception_a_user_catches_from_a_connection_carries_no_key(tmp_path):
    """A script outside the repository calls a connection itself and prints what it caught:
    the traceback, the SDK exception it was raised from (its repr, args, ``message``,
    ``body``, the HTTP response's text and headers, the request's headers) and the context
    chain. None holds the key, and the cause is still the SDK's exception."""
    key = key_shapes()[0]
    folder = write_user_project(tmp_path / "user", LOCAL_MAIN)
    (folder / "caught.py").write_text(textwrap.dedent(CAUGHT))
    with LeakyProvider() as srv:
        proc = run_user(folder, [srv.url], key, script="caught.py")
        assert srv.keys_seen.count(key) == 3
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("STATUS ") == 3 and "STATUS 401 401 401" in proc.stdout
    assert "Incorrect API key provided: [REDACTED]" in proc.stdout
    assert "Basic c3ZjLXVzZXI6[REDACTED]" in proc.stdout
    assert_no_key("what the user's script caught and printed", proc.stdout + proc.stderr, key)


def test_a_credential_passed_as_a_wrong_argument_is_not_quoted_by_the_validation_error():
    """``api_key="..."`` where the connection takes ``api_key_env`` (a YAML file or a
    descriptor written for another library): pydantic quotes the input value of the
    rejected field; the error (direct, or from a descriptor at plan build) masks it."""
    from pydantic import ValidationError

    from flink_agents_py.api import ResourceDescriptor, ResourceError
    from flink_agents_py.integrations.chat_models import OpenAIChatModel

    literal = f"lit-{uuid.uuid4().hex}"
    with pytest.raises(ValidationError) as info:
        OpenAIChatModel(api_key=literal, base_url="http://127.0.0.1:9/v1")
    text = str(info.value) + repr(info.value) + json.dumps(info.value.errors(), default=str)
    assert "api_key" in text and "extra_forbidden" in text.replace("extra inputs", "")
    assert literal not in text
    assert mask_secrets(f"later: {literal}") == "later: [REDACTED]"  # now a known secret
    other = f"hdr-{uuid.uuid4().hex}"
    with pytest.raises(ResourceError) as built:
        ResourceDescriptor(OpenAIChatModel, headers={"Authorization": f"Bearer {other}"},
                           password=other, timeout="soon").build()
    assert "password" in str(built.value) and "timeout" in str(built.value)
    assert "'soon'" in str(built.value)  # a value that is no credential is still quoted
    assert other not in str(built.value)
    assert other not in repr(built.value.__cause__) + str(built.value.__cause__)


def test_reprs_of_descriptors_and_resources_hide_credentials():
    """A descriptor or a resource printed by a user (or quoted in an error) shows the names
    of its credential entries, not their values."""
    from flink_agents_py.api import ResourceDescriptor
    from flink_agents_py.integrations.chat_models import OpenAIChatModel
    from flink_agents_py.integrations.mcp import McpServer

    literal = f"lit-{uuid.uuid4().hex}"
    descriptor = ResourceDescriptor(OpenAIChatModel, base_url="http://127.0.0.1:9/v1",
                                    headers={"Authorization": f"Bearer {literal}",
                                             "x-team": "search"})
    conn = descriptor.build()
    server = McpServer(command=["true"], env={"GITHUB_TOKEN": literal, "LANG": "C"})
    for obj in (descriptor, conn, server):
        text = repr(obj) + str(obj)
        assert literal not in text, text
        assert "[REDACTED]" in text
    assert "search" in repr(descriptor) and "'LANG': 'C'" in repr(server)
    # the values themselves are untouched: the connection sends them
    assert conn.headers["Authorization"] == f"Bearer {literal}"
    assert descriptor.arguments["headers"]["Authorization"] == f"Bearer {literal}"


def test_a_log_records_extra_fields_are_masked(caplog):
    """``log.info("...", extra={...})``: a JSON log formatter writes the extra fields out."""
    key = f"xtra-{uuid.uuid4().hex}"
    register_secret(key, "$TEST_KEY")
    caplog.set_level(logging.INFO)
    logging.getLogger("a.users.module").info(
        "called the vendor", extra={"vendor_headers": {"x-api-key": key, "x-team": "a"},
                                    "vendor_url": f"https://vendor.example/v1?key={key}",
                                    "attempt": 2})
    [record] = [r for r in caplog.records if r.name == "a.users.module"]
    assert record.vendor_headers == {"x-api-key": "[REDACTED]", "x-team": "a"}
    assert record.vendor_url == "https://vendor.example/v1?key=[REDACTED]"
    assert record.attempt == 2


class _VendorError(Exception):
    def __init__(self, message: str, body: dict) -> None:
        super().__init__(message)
        self.body = body


def _vendor_call(key: str) -> None:
    raise _VendorError(f"denied for {key}", {"echo": key})


def test_a_failed_durable_call_hands_its_caller_the_exception_masked_as_a_replay_would():
    """The first run hands the action the exception it records (masked), not the raw one: an
    action catching it and quoting it (its str, args, attributes, traceback) shows no key,
    as on a replay, which rebuilds it from the masked record."""
    import traceback

    from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action

    key = f"dur-{uuid.uuid4().hex}"
    register_secret(key, "$TEST_KEY")

    class Caller(Agent):
        @action(InputEvent)
        @staticmethod
        async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
            seen = []
            for run in (lambda: ctx.durable_execute(_vendor_call, key),
                        lambda: ctx.durable_execute_async(_vendor_call, key)):
                try:
                    result = run()
                    if hasattr(result, "__await__"):
                        await result
                except _VendorError as e:
                    seen.append([str(e), repr(e.args), repr(e.body), traceback.format_exc()])
            ctx.send_event(OutputEvent(output=seen))

    res = AgentsExecutionEnvironment.local().from_list([{"key": "k"}]).apply(Caller()).run()
    [seen] = res.outputs
    assert len(seen) == 2 and res.errors == []
    assert all(s[0] == "denied for [REDACTED]" and "[REDACTED]" in s[2] for s in seen)
    assert_no_key("what the action caught", json.dumps(seen), key)


SELF_CHECKING_CONNECTION = '''
"""A user's connection whose check (and open) quote the key it read."""
import os

from flink_agents_py.api import ChatModelConnection


class Quoting(ChatModelConnection):
    api_key_env: str = "QUOTED_KEY"
    fail_in: str = "check"

    def check(self):
        if self.fail_in == "check":
            raise ValueError(f"key {os.environ[self.api_key_env]} is not valid for this region")

    def open(self):
        if self.fail_in == "open":
            try:
                raise ConnectionError(f"handshake sent {os.environ[self.api_key_env]}")
            except ConnectionError as e:
                raise RuntimeError("could not open") from e

    def chat(self, messages, **kwargs):
        raise AssertionError("never asked: this connection fails in its check or open")
'''


@pytest.mark.parametrize("fail_in", ["check", "open"])
def test_a_resource_failing_to_check_or_open_raises_without_its_key(tmp_path, monkeypatch,
                                                                     fail_in):
    """A user's connection (a module in a folder outside the repository) whose ``check`` or
    ``open`` quotes the key: what the run raises, its args and cause chain, hold no key."""
    import traceback

    from flink_agents_py.api import ChatModelSetup, ResourceDescriptor, ResourceType

    folder = tmp_path / "user"
    folder.mkdir()
    (folder / "quoting_conn.py").write_text(SELF_CHECKING_CONNECTION)
    monkeypatch.syspath_prepend(str(folder))
    key = f"q-{uuid.uuid4().hex}"
    monkeypatch.setenv("QUOTED_KEY", key)
    user = _user_module(tmp_path / "agents")
    agent = user.Asker()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        clazz="quoting_conn.Quoting", fail_in=fail_in))
    agent.add_resource("401", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", model="x"))
    text = ""
    try:
        res = (AgentsExecutionEnvironment.local().from_list([{"key": "k", "mode": "401"}])
               .apply(agent).run())
    except Exception as e:  # noqa: BLE001 - the check fails the run
        text = "".join(traceback.format_exception(e)) + repr(e.args)
        chained = e
        while chained is not None:
            text += repr(chained) + repr(chained.args)
            chained = chained.__cause__ or chained.__context__
    else:  # open fails the action: its error record
        text = json.dumps([r.model_dump(mode="json") for r in res.errors])
    assert "[REDACTED]" in text, text
    assert_no_key("the failure", text, key)
