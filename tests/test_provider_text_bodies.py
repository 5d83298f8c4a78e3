"""A provider answering a request for one answer with text (a stream) is a named ProviderError.

A server that streams whatever it is asked (``text/event-stream``), or a page of another
API at that URL, answers 200 with a body that is no JSON object: the SDKs hand the text
back, and ``dict(text)`` failed with ``ValueError: dictionary update sequence element #0
...`` (OpenAI, Anthropic), the Ollama client's ``json.loads`` with a bare
``JSONDecodeError``: neither said which provider or model, nor what came back. Now each is
a ``ProviderError`` naming both, quoting the start of the body with known secrets masked,
and not retryable (the same request gets the same kind of body). The embedding connections
likewise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from flink_agents_py.api import ChatMessage, ProviderError
from flink_agents_py.integrations.chat_models import (
    AnthropicChatModel,
    OllamaChatModel,
    OpenAIChatModel,
)
from flink_agents_py.integrations.embedding_models import (
    OllamaEmbeddingModel,
    OpenAIEmbeddingModel,
)
from flink_agents_py.testing import LocalHTTPServer

ROOT = Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else Path(sys.executable))
KEY = "sk-proj-Zq8vR2mLx7TnW4bKc9HdPf3sYj6Ge1Ua"


class _Streaming(BaseHTTPRequestHandler):
    """Answers every POST with a 200 event stream, echoing the caller's key in it."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
        self.rfile.read(int(self.headers.get("content-length") or 0))
        auth = self.headers.get("authorization") or self.headers.get("x-api-key") or ""
        chunk = {"choices": [{"index": 0, "delta": {"content": f"key {auth}"}}]}
        body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.mark.parametrize("make", [
    lambda url: OpenAIChatModel(base_url=f"{url}/v1", api_key_env="STREAMING_KEY",
                                max_retries=0),
    lambda url: AnthropicChatModel(base_url=url, api_key_env="STREAMING_KEY", max_retries=0),
    lambda url: OllamaChatModel(host=url),
], ids=["openai", "anthropic", "ollama"])
def test_a_streamed_answer_is_a_provider_error_naming_the_provider(make, monkeypatch):
    monkeypatch.setenv("STREAMING_KEY", KEY)
    with LocalHTTPServer(_Streaming) as srv:
        conn = make(srv.url)
        with pytest.raises(ProviderError) as info:
            conn.chat([ChatMessage(content="hi")], model="m1")
    text = str(info.value)
    assert "model 'm1'" in text and "data: " in text, text  # which call, what came back
    assert "a streamed answer" in text
    assert info.value.retryable is False
    assert KEY not in text


@pytest.mark.parametrize("make", [
    lambda url: OpenAIEmbeddingModel(base_url=f"{url}/v1", api_key_env="STREAMING_KEY"),
    lambda url: OllamaEmbeddingModel(base_url=url),
], ids=["openai", "ollama"])
def test_an_embedding_answer_of_text_is_a_provider_error_naming_the_call(make, monkeypatch):
    """The embedding connections had the same kind: ``'str' object has no attribute
    'data'`` (OpenAI's SDK handing back the text), a bare ``JSONDecodeError`` (Ollama's)."""
    monkeypatch.setenv("STREAMING_KEY", KEY)
    with LocalHTTPServer(_Streaming) as srv:
        with pytest.raises(ProviderError) as info:
            make(srv.url).embed(["hi"], model="e1")
    text = str(info.value)
    assert "embed" in text and "'e1'" in text and "data: " in text, text
    assert info.value.retryable is False and KEY not in text


USER_MODULE = '''
import json
import os
from http.server import BaseHTTPRequestHandler

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent, OutputEvent,
                                 ResourceDescriptor, ResourceType, RunnerContext, action)
from flink_agents_py.integrations.chat_models import OpenAIChatModel
from flink_agents_py.testing import LocalHTTPServer


class Streaming(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = b'data: {"choices": [{"delta": {"content": "hi"}}]}\\n\\ndata: [DONE]\\n\\n'
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Asker(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event, ctx: RunnerContext):
        answer = await ctx.chat("m", [ChatMessage(content="hi")])
        ctx.send_event(OutputEvent(output=answer.message.content))


with LocalHTTPServer(Streaming) as srv:
    agent = Asker()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        OpenAIChatModel, base_url=srv.url + "/v1", api_key_env="USER_KEY", max_retries=0))
    agent.add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", model="gpt-x"))
    result = AgentsExecutionEnvironment.local().from_list(["q"]).apply(agent).run()
print(json.dumps([e.message for e in result.errors]))
'''


def test_a_users_agent_gets_an_error_row_naming_the_provider(tmp_path):
    work = tmp_path / "user"
    work.mkdir()
    assert ROOT not in work.resolve().parents
    (work / "asker.py").write_text(USER_MODULE)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "USER_KEY": KEY}  # this tree's package
    proc = subprocess.run([PYTHON, "asker.py"], cwd=work, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (message,) = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "ProviderError" in message and "model 'gpt-x'" in message, message
    assert "not a JSON object" in message and "dictionary update" not in message
