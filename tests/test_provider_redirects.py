"""A provider's redirect to another origin is not followed: the request's credentials stay.

The SDKs (``openai``, ``anthropic``, ``ollama``) follow redirects, and httpx drops only an
``Authorization`` header when one leads to another origin: a connection's other credential
headers (``secret_headers={"x-gateway-key": ...}``, a gateway's key) went to whatever host the
server (or a proxy, or a hijacked DNS name) named in its ``Location``. Now such a redirect
fails the call, naming the origin it pointed to (never its path or query), and no request
reaches that origin; a redirect within the origin is followed as before.
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

from flink_agents_py.api import ChatMessage, ProviderError
from flink_agents_py.testing._local_server import LocalHTTPServer

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[1]
GATEWAY_KEY = "gw-secret-0f9e8d7c6b5a4321"
_ANSWER = {
    "id": "c",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "fine"}}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


class _Elsewhere(BaseHTTPRequestHandler):
    """The other origin: records every request's headers; answers a good chat."""

    protocol_version = "HTTP/1.1"
    seen: list[dict[str, str]] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        _Elsewhere.seen.append(dict(self.headers))
        _answer(self)


def _answer(handler: BaseHTTPRequestHandler) -> None:
    body = json.dumps(_ANSWER).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class _Redirecting(BaseHTTPRequestHandler):
    """Redirects ``/away/...`` to the other origin, ``/here/...`` within its own."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.startswith("/here/"):
            _answer(self)
            return
        target = self.server.target if self.path.startswith("/away/") else ""  # type: ignore[attr-defined]
        self.send_response(307)
        self.send_header("Location", f"{target}/here/{self.path.split('/', 2)[2]}?token=t0k")
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def servers():
    _Elsewhere.seen = []
    with LocalHTTPServer(_Elsewhere) as other, LocalHTTPServer(_Redirecting) as first:
        first.target = other.url.replace("127.0.0.1", "localhost")  # type: ignore[attr-defined]
        yield first, other


def _connection(kind: str, url: str):
    os.environ["FAPY_TEST_GATEWAY_KEY"] = GATEWAY_KEY
    if kind == "openai":
        from flink_agents_py.integrations.chat_models import OpenAIChatModel

        return OpenAIChatModel(
            base_url=url + "/v1",
            api_key_required=False,
            max_retries=0,
            secret_headers={"x-gateway-key": "FAPY_TEST_GATEWAY_KEY"},
        )
    pytest.importorskip("anthropic")
    from flink_agents_py.integrations.chat_models import AnthropicChatModel

    os.environ.setdefault("ANTHROPIC_API_KEY", "test-key-not-secret")
    return AnthropicChatModel(base_url=url, max_retries=0)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_redirect_to_another_origin_fails_and_sends_nothing_there(servers, kind):
    first, other = servers
    conn = _connection(kind, first.url + "/away")
    with pytest.raises(ProviderError) as e:
        asyncio.run(conn.achat([ChatMessage(content="hi")], model="m"))
    assert "redirects the request to another origin, http://localhost:" in str(e.value)
    assert "t0k" not in str(e.value)  # the target's origin only, not its query
    assert _Elsewhere.seen == []


def test_a_redirect_within_the_origin_is_still_followed(servers):
    first, _other = servers
    conn = _connection("openai", first.url + "/within")
    answer = asyncio.run(conn.achat([ChatMessage(content="hi")], model="m"))
    assert answer.message.content == "fine"


SCRIPT = """
import asyncio, os, sys
from flink_agents_py.api import ChatMessage, ProviderError
from flink_agents_py.integrations.chat_models import OpenAIChatModel

conn = OpenAIChatModel(base_url=sys.argv[1] + "/v1", api_key_required=False,
                       secret_headers={"x-gateway-key": "MY_GATEWAY_KEY"})
try:
    asyncio.run(conn.achat([ChatMessage(content="hi")], model="m"))
except ProviderError as e:
    print("failed:", e)
"""


def test_a_users_script_keeps_its_gateway_key_from_a_redirect(servers, tmp_path):
    first, _other = servers
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "chat.py").write_text(SCRIPT)
    proc = subprocess.run(
        [sys.executable, "chat.py", first.url + "/away"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=100,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MY_GATEWAY_KEY": GATEWAY_KEY},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "redirects the request to another origin" in proc.stdout, proc.stdout
    assert _Elsewhere.seen == []
