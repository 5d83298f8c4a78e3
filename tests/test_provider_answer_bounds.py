"""A provider's HTTP answer is read within bounds: its size, its time, its encoding.

The SDKs read a whole answer into memory, and their ``timeout`` bounds each wait for bytes,
not the answer: a server sending an endless body a little at a time kept a chat reading
for ever while the process grew by the body (1.2 GB in 20 s with ``timeout_s=3``), until
the worker ran out of memory and took every key's calls with it
(``integrations/chat_models/_bounded_http.py``).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import subprocess
import sys
import textwrap
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from flink_agents_py.api import ChatMessage, ProviderError
from flink_agents_py.integrations.chat_models import _bounded_http
from flink_agents_py.testing._local_server import LocalHTTPServer

pytestmark = pytest.mark.timeout(120)
REPO = Path(__file__).resolve().parents[1]
_ANSWER = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
           "choices": [{"index": 0, "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "fine"}}],
           "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


class _Hostile(BaseHTTPRequestHandler):
    """``/fast``: an endless body, fast; ``/slow``: 10 bytes every 0.05 s for ever;
    ``/gzip``: a good answer gzip-encoded though identity was asked; else a good answer."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps(_ANSWER).encode()
        if "/gzip/" in self.path:
            body = gzip.compress(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if "/gzip/" in self.path:
            self.send_header("Content-Encoding", "gzip")
        if "/fast/" not in self.path and "/slow/" not in self.path:
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunk = b"a" * (1 << 18) if "/fast/" in self.path else b"b" * 10
        try:
            self.wfile.write(b'%x\r\n{"pad":"\r\n' % 8)
            while True:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
                time.sleep(0.05 if "/slow/" in self.path else 0.001)
        except OSError:
            pass  # the client stopped reading


@pytest.fixture(scope="module")
def server():
    with LocalHTTPServer(_Hostile) as srv:
        yield srv.url


def _connection(kind: str, url: str, timeout_s: float):
    if kind == "azure":  # a ported Flink Agents program's (its own SDK client)
        from flink_agents_py.compat import AzureOpenAIChatModelConnection

        return AzureOpenAIChatModelConnection(api_key="test-key-not-secret", azure_endpoint=url,
                                              api_version="2024-06-01", timeout_s=timeout_s,
                                              max_retries=0)
    if kind == "openai":
        from flink_agents_py.integrations.chat_models import OpenAIChatModel

        return OpenAIChatModel(base_url=url + "/v1", api_key_required=False, timeout_s=timeout_s,
                               max_retries=0)
    pytest.importorskip("anthropic")
    from flink_agents_py.integrations.chat_models import AnthropicChatModel

    os.environ.setdefault("ANTHROPIC_API_KEY", "test-key-not-secret")
    return AnthropicChatModel(base_url=url, timeout_s=timeout_s, max_retries=0)


def _ask(kind: str, url: str, timeout_s: float = 30) -> tuple[BaseException | str, float]:
    conn = _connection(kind, url, timeout_s)
    started = time.monotonic()
    try:
        answer = asyncio.run(asyncio.wait_for(
            conn.achat([ChatMessage(content="hi")], model="m"), 60))
        return answer.message.content or "", time.monotonic() - started
    except Exception as e:  # noqa: BLE001 - what the caller gets is the point
        return e, time.monotonic() - started


@pytest.mark.parametrize("kind", ["openai", "anthropic", "azure"])
def test_an_endless_answer_stops_at_the_size_bound_naming_it(server, kind, monkeypatch):
    monkeypatch.setattr(_bounded_http, "MAX_ANSWER_BYTES", 4 << 20)
    error, took = _ask(kind, server + "/fast")
    assert isinstance(error, ProviderError), error
    assert "is longer than 4,194,304 bytes (MAX_ANSWER_BYTES)" in str(error)
    assert "check that the connection's URL is the model server's" in str(error)
    assert "/fast/" in str(error) and took < 30  # long before the wait_for


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_trickling_answer_stops_at_timeout_s_from_its_start(server, kind):
    error, took = _ask(kind, server + "/slow", timeout_s=1.5)
    assert isinstance(error, ProviderError), error
    assert "was still coming 1.5 s after it started" in str(error)
    assert error.retryable  # as a timeout is
    assert took < 20


def test_a_compressed_answer_whose_decoded_size_no_count_bounds_is_refused(server):
    error, _ = _ask("openai", server + "/gzip")
    assert isinstance(error, ProviderError), error
    assert "is gzip-encoded though it was asked for unencoded" in str(error)
    # and says what to do about it (a newcomer's server compressed: the error named no fix)
    assert "turn response compression off on that server" in str(error)


def test_an_ordinary_answer_is_read(server):
    assert _ask("openai", server + "/good")[0] == "fine"


USER_SCRIPT = """
import json, sys
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent, OutputEvent,
    ResourceDescriptor, ResourceType, RunnerContext, action)
from flink_agents_py.integrations.chat_models import OpenAIChatModel


class Asker(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        answer = await ctx.chat(event.input["model"], [ChatMessage(content="hi")])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "content": answer.content}))


agent = Asker()
for name, path in (("good", "/good/v1"), ("endless", "/slow/v1")):
    agent.add_resource(name + "_conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        OpenAIChatModel, base_url=sys.argv[1] + path, api_key_required=False, timeout_s=2,
        max_retries=0))
    agent.add_resource(name, ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection=name + "_conn", model="m", retry_max_attempts=1))
records = [{"key": "a", "model": "endless"}, {"key": "b", "model": "good"}]
result = AgentsExecutionEnvironment.local().from_list(records).apply(agent).run()
print(json.dumps({"outputs": result.outputs,
                  "errors": [[e.key, e.message] for e in result.errors]}))
"""


def test_a_users_job_gets_the_chat_error_and_its_other_keys_go_on(server, tmp_path):
    script = tmp_path / "my_agent.py"
    script.write_text(textwrap.dedent(USER_SCRIPT))
    done = subprocess.run([sys.executable, str(script), server], cwd=tmp_path,
                          capture_output=True, text=True, timeout=110,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["outputs"] == [{"key": "b", "content": "fine"}]
    [(key, message)] = report["errors"]  # the record of key a, with the reason
    assert key == "a" and "was still coming 2.0 s after it started" in message


class _OllamaEndless(BaseHTTPRequestHandler):
    """Ollama's ``/api/chat``: an endless body, 10 bytes every 0.05 s."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            while True:
                self.wfile.write(b"a\r\n{\"pad\": 1}\r\n")
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass


def test_an_ollama_answer_is_read_within_the_same_bounds():
    pytest.importorskip("ollama")
    from flink_agents_py.integrations.chat_models import OllamaChatModel

    with LocalHTTPServer(_OllamaEndless) as srv:
        conn = OllamaChatModel(host=srv.url, timeout_s=1.5)
        started = time.monotonic()
        with pytest.raises(ProviderError, match="was still coming 1.5 s after it started"):
            asyncio.run(asyncio.wait_for(conn.achat([ChatMessage(content="hi")], model="m"),
                                         60))
        assert time.monotonic() - started < 20


@pytest.mark.parametrize("kind", ["openai", "ollama"])
def test_an_embedding_models_answer_is_read_within_the_same_bounds(server, kind):
    if kind == "openai":
        from flink_agents_py.integrations.embedding_models import OpenAIEmbeddingModel

        model = OpenAIEmbeddingModel(base_url=server + "/slow/v1",
                                     timeout_s=1.5, max_retries=0)
    else:
        pytest.importorskip("ollama")
        from flink_agents_py.integrations.embedding_models import OllamaEmbeddingModel

        model = OllamaEmbeddingModel(base_url=server + "/slow", timeout_s=1.5)
    started = time.monotonic()
    with pytest.raises(ProviderError, match="was still coming 1.5 s after it started"):
        model.embed(["hi"])
    assert time.monotonic() - started < 20
