"""An answer nested deeper than a JSON reader's stack fails the chat as a provider's error.

Within the 64 MiB answer bound, ``[[[[...`` 100,000 levels deep fits in 200 kB. The SDKs'
JSON readers (``anthropic``, ``ollama``) raised ``RecursionError`` on it, which left the chat
as no provider's error does (a raw ``RecursionError``, not a ``ProviderError``); and tool call
arguments nested so deeply raised it from ``tool_arguments`` (the standard library's decoder,
behind orjson's 1,024-level limit) instead of being unreadable arguments told to the model.
Now the first is a ``ProviderError`` naming the connection, the second unreadable arguments.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from flink_agents_py.api import ChatMessage, ChatModelSetup, ProviderError
from flink_agents_py.integrations.chat_models._answers import tool_arguments
from flink_agents_py.testing._local_server import LocalHTTPServer

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[1]
DEEP = "[" * 100_000 + "]" * 100_000


class _Deep(BaseHTTPRequestHandler):
    """An Ollama ``/api/chat`` answer whose tool call arguments are nested 100,000 deep;
    ``/text/...``: the arguments as JSON text (OpenAI's form, which the transport reads)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        args = '{"a": ' + DEEP + "}"
        if self.path.startswith("/text/"):
            args = json.dumps(args)
        body = (
            '{"model":"m","created_at":"2024-01-01T00:00:00Z","done":true,"done_reason":"stop",'
            '"message":{"role":"assistant","content":"","tool_calls":[{"function":'
            '{"name":"t","arguments":' + args + "}}]}}"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.mark.parametrize(
    "text",
    ['{"a": ' + DEEP + "}", 'sure: ```json\n{"a": ' + DEEP + "}\n```", '{"a": ' + "[" * 300_000],
)
def test_deeply_nested_tool_arguments_are_unreadable_not_a_crash(text):
    found = tool_arguments(text, 0, "t")
    assert list(found) == ["__unreadable_arguments__"]


def _setup(url: str) -> ChatModelSetup:
    pytest.importorskip("ollama")
    from flink_agents_py.integrations.chat_models import OllamaChatModel

    connection = OllamaChatModel(host=url, timeout_s=30)
    setup = ChatModelSetup(connection="deep")
    object.__setattr__(setup, "get_resource", lambda name, kind: connection)
    return setup


def test_an_answer_nested_beyond_the_stack_is_a_provider_error():
    with LocalHTTPServer(_Deep) as srv:
        with pytest.raises(
            ProviderError,
            match=r"OllamaChatModel '[^']*': the server's answer "
            r"is nested too deeply for a JSON reader",
        ):
            asyncio.run(_setup(srv.url).achat([ChatMessage(content="hi")]))
        answer = asyncio.run(_setup(srv.url + "/text").achat([ChatMessage(content="hi")]))
    (call,) = answer.message.tool_calls
    assert list(call.arguments) == ["__unreadable_arguments__"]


SCRIPT = """
import sys
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, ChatResponseError,
                                 InputEvent, OutputEvent, ResourceDescriptor, RunnerContext,
                                 action, chat_model_connection, chat_model_setup)
from flink_agents_py.integrations.chat_models import OllamaChatModel


class Asker(Agent):
    @chat_model_connection
    @staticmethod
    def local() -> ResourceDescriptor:
        return ResourceDescriptor(OllamaChatModel, host=sys.argv[1], timeout_s=30)

    @chat_model_setup
    @staticmethod
    def model() -> ResourceDescriptor:
        return ResourceDescriptor(ChatModelSetup, connection="local")

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        try:
            await ctx.chat("model", [ChatMessage(content="hi")])
            said = "answered"
        except ChatResponseError as e:
            said = str(e)[:160]
        ctx.send_event(OutputEvent(output={"key": ctx.key, "said": said}))


result = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(Asker()).run()
print("OUT", result.outputs)
print("ERR", [(e.error_type, e.message[:100]) for e in result.errors])
"""


def test_a_users_agent_gets_a_failed_chat_from_a_too_deep_answer(tmp_path):
    pytest.importorskip("ollama")
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "asker.py").write_text(SCRIPT)
    with LocalHTTPServer(_Deep) as srv:
        proc = subprocess.run(
            [sys.executable, "asker.py", srv.url],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=100,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "nested too deeply for a JSON reader" in proc.stdout, proc.stdout
    assert "ERR []" in proc.stdout, proc.stdout


class _DeepEmbeddings(BaseHTTPRequestHandler):
    """An Ollama ``/api/embed`` answer whose vectors are nested 100,000 deep."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = ('{"model": "m", "embeddings": [' + DEEP + "]}").encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_an_embedding_answer_nested_beyond_the_stack_is_a_provider_error():
    pytest.importorskip("ollama")
    from flink_agents_py.integrations.embedding_models import OllamaEmbeddingModel

    with LocalHTTPServer(_DeepEmbeddings) as srv:
        connection = OllamaEmbeddingModel(base_url=srv.url, timeout_s=30)
        with pytest.raises(
            ProviderError,
            match=r"OllamaEmbeddingModel '[^']*': the server's "
            r"answer is nested too deeply",
        ):
            connection.embed("hello")


class _DeepAnthropic(BaseHTTPRequestHandler):
    """An Anthropic Messages answer whose tool input is nested 100,000 deep."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = (
            '{"id":"m1","type":"message","role":"assistant","model":"m","stop_reason":'
            '"tool_use","usage":{"input_tokens":1,"output_tokens":1},"content":[{"type":'
            '"tool_use","id":"t1","name":"t","input":{"a":' + DEEP + "}}]}"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.mark.parametrize("kind", ["ollama", "anthropic"])
def test_a_connection_called_directly_raises_a_provider_error_too(kind, monkeypatch):
    pytest.importorskip(kind)
    if kind == "ollama":
        from flink_agents_py.integrations.chat_models import OllamaChatModel

        handler, make = _Deep, lambda url: OllamaChatModel(host=url, timeout_s=30)
    else:
        from flink_agents_py.integrations.chat_models import AnthropicChatModel

        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
        handler, make = _DeepAnthropic, lambda url: AnthropicChatModel(base_url=url)
    with LocalHTTPServer(handler) as srv:
        with pytest.raises(ProviderError, match="nested too deeply for a JSON reader"):
            asyncio.run(make(srv.url).achat([ChatMessage(content="hi")], model="m"))
