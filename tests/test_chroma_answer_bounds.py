"""A Chroma server's answers are read within bounds, and every HTTP connection sets its own.

``chromadb.HttpClient`` reads through an ``httpx.Client`` made with ``timeout=None`` and no
bound on an answer's size: a Chroma server (or whatever answers at its address) sending an
endless body kept a store's call reading for ever while the process grew by the body, and one
that never answered held it for ever. Now ``ChromaVectorStore`` in server mode waits at most
``timeout_s`` and reads at most ``max_answer_bytes`` (64 MiB by default) of one answer, from
the client's first request on; and every HTTP connection (chat models, embedding models,
Chroma) takes ``max_answer_bytes``, the bound that was settable only in a private module.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from flink_agents_py.api import ChatMessage, ProviderError, VectorStoreError
from flink_agents_py.testing._local_server import LocalHTTPServer

pytest.importorskip("chromadb")
pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[1]
_RELEASE = threading.Event()


class _Hostile(BaseHTTPRequestHandler):
    """``/`` and ``/fast``: an endless body, fast; ``/mute``: never answers."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self) -> None:
        if self.command == "POST":
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.server.mode == "mute":  # type: ignore[attr-defined]
            _RELEASE.wait(60)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunk = b"a" * (1 << 18)
        try:
            self.wfile.write(b'%x\r\n{"pad":"\r\n' % 8)
            for _ in range(4096):  # at most 1 GiB, then the server gives up
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
        except OSError:
            pass  # the client stopped reading

    do_GET = do_POST = _answer


@pytest.fixture(params=["fast", "mute"])
def server(request):
    with LocalHTTPServer(_Hostile) as srv:
        srv.mode = request.param  # type: ignore[attr-defined]
        yield srv
        _RELEASE.set()
    _RELEASE.clear()


def test_a_chroma_server_s_endless_or_missing_answer_fails_the_call_within_bounds(server):
    from flink_agents_py.integrations.vector_stores import ChromaVectorStore

    store = ChromaVectorStore(
        host="127.0.0.1", port=server.port, timeout_s=2, max_answer_bytes=1 << 20, collection="c"
    )
    started = time.monotonic()
    with pytest.raises(VectorStoreError) as e:
        store.get(ids=["x"])
    took = time.monotonic() - started
    assert f"127.0.0.1:{server.port}" in str(e.value)
    if server.mode == "fast":
        assert "longer than 1,048,576 bytes (the connection's max_answer_bytes)" in str(e.value)
    else:
        assert "timed out" in str(e.value).lower() or "timeout" in repr(e.value.__cause__).lower()
    assert took < 20, took


def test_chroma_clients_made_for_others_keep_chromadb_s_own_settings(server):
    """Only the client a store makes is bounded: chromadb's module stays usable as it was."""
    import chromadb
    from chromadb.api import fastapi

    from flink_agents_py.integrations.vector_stores import ChromaVectorStore

    with pytest.raises(VectorStoreError):
        ChromaVectorStore(
            host="127.0.0.1", port=server.port, timeout_s=1, max_answer_bytes=1 << 20
        ).client()
    made = fastapi.httpx.Client(timeout=None)
    assert made.timeout.read is None and not made.event_hooks["response"]
    made.close()
    assert chromadb.HttpClient is not None


def test_max_answer_bytes_is_a_connection_field_checked_when_built():
    from pydantic import ValidationError

    from flink_agents_py.integrations.chat_models import (
        AnthropicChatModel,
        OllamaChatModel,
        OpenAIChatModel,
    )
    from flink_agents_py.integrations.embedding_models import (
        OllamaEmbeddingModel,
        OpenAIEmbeddingModel,
    )
    from flink_agents_py.integrations.vector_stores import ChromaVectorStore

    for cls in (
        OpenAIChatModel,
        AnthropicChatModel,
        OllamaChatModel,
        OpenAIEmbeddingModel,
        OllamaEmbeddingModel,
        ChromaVectorStore,
    ):
        assert cls(max_answer_bytes=1024).max_answer_bytes == 1024
        assert cls().max_answer_bytes is None  # the default: 64 MiB
        with pytest.raises(ValidationError, match="max_answer_bytes"):
            cls(max_answer_bytes=0)


class _Endless(BaseHTTPRequestHandler):
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
            self.wfile.write(b'%x\r\n{"pad":"\r\n' % 8)
            for _ in range(4096):
                self.wfile.write(b"%x\r\n%s\r\n" % (1 << 16, b"a" * (1 << 16)))
                self.wfile.flush()
        except OSError:
            pass


def test_a_chat_connection_s_own_max_answer_bytes_bounds_its_answers():
    from flink_agents_py.integrations.chat_models import OpenAIChatModel

    with LocalHTTPServer(_Endless) as srv:
        conn = OpenAIChatModel(
            base_url=srv.url + "/v1", api_key_required=False, timeout_s=30, max_answer_bytes=100_000
        )
        with pytest.raises(
            ProviderError,
            match=r"longer than 100,000 bytes \(the connection's "
            r"max_answer_bytes\)",
        ):
            asyncio.run(conn.achat([ChatMessage(content="hi")], model="m"))


SCRIPT = """
import sys
from flink_agents_py.api import VectorStoreError
from flink_agents_py.integrations.vector_stores import ChromaVectorStore

store = ChromaVectorStore(host="127.0.0.1", port=int(sys.argv[1]), timeout_s=5,
                          max_answer_bytes=2_000_000, collection="docs")
try:
    store.get(ids=["a"])
except VectorStoreError as e:
    print("failed:", str(e)[:400])
"""


def test_a_users_script_against_an_endless_chroma_server_fails_and_ends(tmp_path):
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "rag.py").write_text(SCRIPT)
    with LocalHTTPServer(_Hostile) as srv:
        srv.mode = "fast"  # type: ignore[attr-defined]
        proc = subprocess.run(
            [sys.executable, "rag.py", str(srv.port)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=100,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "longer than 2,000,000 bytes (the connection's max_answer_bytes)" in proc.stdout, (
        proc.stdout + proc.stderr[-2000:]
    )


class _EchoesToken(BaseHTTPRequestHandler):
    """A Chroma server refusing the token it was sent, quoting it back (a 401 body)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _refuse(self) -> None:
        if self.command == "POST":
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
        token = self.headers.get("x-chroma-token", "")
        body = ('{"error": "AuthError", "message": "bad token ' + token + '"}').encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _refuse


TOKEN_SCRIPT = """
import sys, traceback
from flink_agents_py.api import VectorStoreError
from flink_agents_py.integrations.vector_stores import ChromaVectorStore

store = ChromaVectorStore(host="127.0.0.1", port=int(sys.argv[1]), api_key_env="MY_CHROMA_TOKEN",
                          collection="docs")
try:
    store.get(ids=["a"])  # a script loading documents before its job: no plan built
except VectorStoreError as e:
    print("failed:", e)
    traceback.print_exception(e)
"""


def test_a_chroma_token_quoted_back_by_the_server_is_masked(tmp_path):
    """The store read its ``api_key_env`` without registering it: only a job's plan did."""
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "load.py").write_text(TOKEN_SCRIPT)
    token = "chroma-tok-5d4c3b2a1908f7e6"
    with LocalHTTPServer(_EchoesToken) as srv:
        proc = subprocess.run(
            [sys.executable, "load.py", str(srv.port)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=100,
            env={**os.environ, "PYTHONPATH": str(ROOT), "MY_CHROMA_TOKEN": token},
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "failed:" in proc.stdout and "bad token [REDACTED]" in proc.stdout, proc.stdout
    assert token not in proc.stdout + proc.stderr
