"""A Chroma token chromadb reads from the environment on its own is masked too.

``chromadb``'s client takes its credentials from ``CHROMA_CLIENT_AUTH_PROVIDER`` and
``CHROMA_CLIENT_AUTH_CREDENTIALS`` (its documented way: ``Settings`` reads the environment)
whatever ``ChromaVectorStore`` is given. The store registered only its own ``api_key_env``,
so a server quoting that token back (a 401 body) put it in clear into the store's error and
its traceback. The credentials the client's settings hold are now registered when the store
opens its client.
"""

from __future__ import annotations

import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from flink_agents_py.testing._local_server import LocalHTTPServer

pytest.importorskip("chromadb")
ROOT = str(Path(__file__).resolve().parents[1])


class _EchoesAuth(BaseHTTPRequestHandler):
    """A Chroma server refusing the credentials it was sent, quoting them back."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _refuse(self) -> None:
        if self.command == "POST":
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
        sent = self.headers.get("x-chroma-token") or self.headers.get("authorization") or ""
        body = ('{"error": "AuthError", "message": "bad credentials ' + sent + '"}').encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _refuse


SCRIPT = """
import sys, traceback
from flink_agents_py.api import VectorStoreError
from flink_agents_py.integrations.vector_stores import ChromaVectorStore

store = ChromaVectorStore(host="127.0.0.1", port=int(sys.argv[1]), collection="docs")
try:
    store.get(ids=["a"])
except VectorStoreError as e:
    print("failed:", e)
    traceback.print_exception(e)
"""


@pytest.mark.parametrize("header", ["X-Chroma-Token", "Authorization"])
def test_a_token_chromadb_took_from_the_environment_is_masked(tmp_path, header):
    assert ROOT not in str(tmp_path.resolve())
    (tmp_path / "load.py").write_text(SCRIPT)
    token = "chroma-env-tok-7a6b5c4d3e2f1a0b"
    env = {**os.environ, "PYTHONPATH": ROOT,
           "CHROMA_CLIENT_AUTH_PROVIDER": "chromadb.auth.token_authn.TokenAuthClientProvider",
           "CHROMA_CLIENT_AUTH_CREDENTIALS": token,
           "CHROMA_AUTH_TOKEN_TRANSPORT_HEADER": header}
    with LocalHTTPServer(_EchoesAuth) as srv:
        proc = subprocess.run([sys.executable, "load.py", str(srv.port)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=100, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "failed:" in proc.stdout and "bad credentials" in proc.stdout, proc.stdout
    assert "[REDACTED]" in proc.stdout, proc.stdout
    assert token not in proc.stdout + proc.stderr
