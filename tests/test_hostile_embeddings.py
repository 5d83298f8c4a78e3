"""An embedding holding ``NaN`` or an infinity is a provider's error, not a stored vector.

The SDKs read an answer with Python's ``json`` module, which takes ``NaN`` and
``Infinity``: the Ollama and OpenAI-compatible embedding models handed such a vector on. In
an action it could not be recorded (a ``SerializationError`` at the durable call), and a
script storing it in a vector store gave every search of that collection a vector with no
distance. Now every connection's ``embed_with_usage`` (which ``embed``, a setup and a
vector store go through) refuses it with a ``ProviderError`` naming the connection.
"""

from __future__ import annotations

import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from flink_agents_py.api import (
    EmbeddingModelConnection,
    EmbeddingResult,
    ProviderError,
)
from flink_agents_py.testing._local_server import LocalHTTPServer

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[1]


class _NaNVectors(BaseHTTPRequestHandler):
    """Ollama's ``/api/embed`` and OpenAI's ``/v1/embeddings``, answering ``NaN``."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.endswith("/api/embed"):
            body = b'{"model": "m", "embeddings": [[0.5, 1.0], [NaN, 1.0]]}'
        else:
            body = (
                b'{"object": "list", "model": "m", "data": [{"object": "embedding", "index": 0,'
                b' "embedding": [1.0, -Infinity]}], "usage": {"prompt_tokens": 1, '
                b'"total_tokens": 1}}'
            )
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_an_ollama_vector_holding_nan_is_a_provider_error():
    pytest.importorskip("ollama")
    from flink_agents_py.integrations.embedding_models import OllamaEmbeddingModel

    with LocalHTTPServer(_NaNVectors) as srv:
        connection = OllamaEmbeddingModel(base_url=srv.url, timeout_s=30)
        with pytest.raises(
            ProviderError,
            match=r"OllamaEmbeddingModel .*NaN or an infinity "
            r"\(vector 1\)",
        ) as caught:
            connection.embed(["fine", "not"])
    assert caught.value.retryable is False


def test_an_openai_vector_holding_an_infinity_is_a_provider_error(monkeypatch):
    pytest.importorskip("openai")
    from flink_agents_py.integrations.embedding_models import OpenAIEmbeddingModel

    monkeypatch.setenv("A8_EMBED_KEY", "k-123456789012345")
    with LocalHTTPServer(_NaNVectors) as srv:
        connection = OpenAIEmbeddingModel(
            base_url=srv.url + "/v1", api_key_env="A8_EMBED_KEY", timeout_s=30
        )
        with pytest.raises(ProviderError, match="NaN or an infinity"):
            connection.embed("hello")


class _Own(EmbeddingModelConnection):
    """A user's connection (Flink Agents' form: it implements ``embed`` only)."""

    def embed(self, text, **kwargs):  # type: ignore[no-untyped-def]
        return [1e308, 1e308] if text == ["big"] else [[float("nan"), 0.0]]


def test_a_users_own_connection_is_checked_too_and_huge_finite_values_pass():
    with pytest.raises(ProviderError, match="NaN or an infinity"):
        _Own().embed_with_usage("x")
    assert _Own().embed_with_usage(["big"]) == EmbeddingResult(embeddings=[1e308, 1e308])


SCRIPT = r"""
import json, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, EmbeddingModelSetup, InputEvent, OutputEvent,
                                 ResourceDescriptor, ResourceType, action)
from flink_agents_py.integrations.embedding_models import OllamaEmbeddingModel


class Fake(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        body = b'{"model": "m", "embeddings": [[NaN, 1.0]]}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


server = ThreadingHTTPServer(("127.0.0.1", 0), Fake)
threading.Thread(target=server.serve_forever, daemon=True).start()


class Embedder(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event, ctx):
        model = ctx.get_resource("emb", ResourceType.EMBEDDING_MODEL)
        try:
            said = await model.aembed("hello")
        except Exception as e:
            said = f"{type(e).__name__}: {e}"[:200]
        ctx.send_event(OutputEvent(output=said))


agent = Embedder()
agent.add_resource("conn", ResourceType.EMBEDDING_MODEL_CONNECTION, ResourceDescriptor(
    OllamaEmbeddingModel, base_url=f"http://127.0.0.1:{server.server_address[1]}",
    timeout_s=30))
agent.add_resource("emb", ResourceType.EMBEDDING_MODEL,
                   ResourceDescriptor(EmbeddingModelSetup, connection="conn", model="m"))
result = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(agent).run()
print("OUT", json.dumps(result.outputs))
print("ERRORS", len(result.errors))
"""


def test_a_users_action_gets_a_provider_error_not_a_recording_failure(tmp_path):
    pytest.importorskip("ollama")
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "embedder.py").write_text(SCRIPT)
    proc = subprocess.run(
        [sys.executable, "embedder.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=100,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ProviderError: OllamaEmbeddingModel 'conn'" in proc.stdout, proc.stdout
    assert "NaN or an infinity" in proc.stdout and "ERRORS 0" in proc.stdout, proc.stdout
