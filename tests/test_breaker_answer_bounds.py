"""Answers real servers send within the bounds are read whole, as before the bounds.

``integrations/chat_models/_bounded_http.py`` stops a provider's answer that is too long, too
slow or compressed. An answer that keeps within them must come through as it did: a body
sent in chunks without a length, a slow but finite body taking most of ``timeout_s``, an
answer behind a redirect.
"""

from __future__ import annotations

import asyncio
import json
import time
from http.server import BaseHTTPRequestHandler

import pytest

from flink_agents_py.api import ChatMessage
from flink_agents_py.integrations.chat_models import OpenAIChatModel
from flink_agents_py.testing._local_server import LocalHTTPServer

pytestmark = pytest.mark.timeout(120)

_ANSWER = {
    "id": "c",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


class _Within(BaseHTTPRequestHandler):
    """``/chunked``: the answer in 8 chunks at once; ``/trickle``: 8 chunks over ~1.2 s;
    ``/moved``: a 307 to ``/chunked``."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.startswith("/moved/"):
            self.send_response(307)
            self.send_header("Location", self.path.replace("/moved/", "/chunked/", 1))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps(_ANSWER).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        step = -(-len(body) // 8)
        for i in range(0, len(body), step):
            part = body[i : i + step]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.flush()
            if self.path.startswith("/trickle/"):
                time.sleep(0.15)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


@pytest.fixture(scope="module")
def server():
    with LocalHTTPServer(_Within) as srv:
        yield srv.url


def _ask(url: str, timeout_s: float) -> str:
    conn = OpenAIChatModel(base_url=url, api_key_required=False, timeout_s=timeout_s, max_retries=0)
    answer = asyncio.run(asyncio.wait_for(conn.achat([ChatMessage(content="hi")], model="m"), 60))
    return answer.message.content


@pytest.mark.parametrize("path", ["/chunked/v1", "/moved/v1"])
def test_a_chunked_answer_without_a_length_is_read(server, path):
    assert _ask(server + path, 5) == "ok"


def test_a_slow_but_finite_answer_within_timeout_s_is_read(server):
    started = time.monotonic()
    assert _ask(server + "/trickle/v1", 3) == "ok"
    assert time.monotonic() - started > 1.0  # it did take most of its time
