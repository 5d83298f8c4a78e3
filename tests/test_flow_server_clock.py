"""A provider's times (an HTTP-date ``Retry-After``, Anthropic's resets) are read on its clock.

Before: an HTTP-date ``Retry-After`` (and an ``anthropic-ratelimit-*-reset`` time) was
compared with this machine's clock. A provider (or a gateway) whose clock runs ahead said
"one second from now" as a time an hour ahead of ours: the call was told to wait an hour,
failed at once as past ``max_throttle_wait_s``, and the connection's gate stayed closed for
the hour, failing every key's calls. A clock behind read every such wait as past (no wait).
Now, when the answer's own ``Date`` header differs from our clock by more than its one-second
resolution, a time the provider sends is counted from that ``Date`` (RFC 9110 gives every
answer one), so the wait is the one the provider meant.
"""

from __future__ import annotations

import email.utils
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from test_flow_control import asker, run

from flink_agents_py.api import FlowControl, ResourceDescriptor
from flink_agents_py.integrations.chat_models import OpenAIChatModel
from flink_agents_py.integrations.chat_models._anthropic import anthropic_rate_limit
from flink_agents_py.integrations.chat_models._common import header_retry_after

pytestmark = pytest.mark.timeout(120)


def _date(t: float) -> str:
    return email.utils.formatdate(t, usegmt=True)


@pytest.mark.parametrize("skew_s", [3600.0, -3600.0, 0.0])
def test_an_http_date_retry_after_is_counted_from_the_answers_date(skew_s):
    server_now = time.time() + skew_s
    headers = httpx.Headers({"date": _date(server_now), "retry-after": _date(server_now + 5)})
    assert header_retry_after(headers) == pytest.approx(5, abs=1.01)


def test_without_a_date_header_or_within_its_resolution_our_clock_counts():
    now = time.time()
    assert header_retry_after(httpx.Headers({"retry-after": _date(now + 5)})) \
        == pytest.approx(5, abs=1.01)
    assert header_retry_after(httpx.Headers({"retry-after": "7"})) == 7  # seconds: no clock
    bad = httpx.Headers({"date": "not a date", "retry-after": _date(now + 5)})
    assert header_retry_after(bad) == pytest.approx(5, abs=1.01)


@pytest.mark.parametrize("skew_s", [3600.0, -3600.0])
def test_anthropic_resets_are_counted_from_the_answers_date(skew_s):
    server_now = time.time() + skew_s
    reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(server_now + 20))
    info = anthropic_rate_limit(httpx.Headers({
        "date": _date(server_now), "anthropic-ratelimit-requests-reset": reset,
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-limit": "50"}))
    assert info.reset_requests_s == pytest.approx(20, abs=1.01)


class _SkewedServer:
    """An OpenAI-compatible server whose clock is an hour ahead: 429 first, then answers."""

    def __init__(self, skew_s: float) -> None:
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def date_time_string(self, timestamp: float | None = None) -> str:
                return _date(time.time() + skew_s)  # its Date header, on its clock

            def do_POST(self) -> None:  # noqa: N802 - the http.server name
                self.rfile.read(int(self.headers.get("content-length") or 0))
                outer.requests += 1
                if outer.requests == 1:
                    self._send(429, {"error": {"message": "slow down", "code": "rate_limit"}},
                               {"retry-after": _date(time.time() + skew_s + 1)})
                    return
                self._send(200, {"id": "x", "object": "chat.completion", "created": 0,
                                 "model": "m", "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": "ok"}}],
                                 "usage": {"prompt_tokens": 1, "completion_tokens": 1}}, {})

            def _send(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> _SkewedServer:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_throttled_call_to_a_provider_whose_clock_is_ahead_is_held_and_answered():
    with _SkewedServer(3600.0) as server:
        agent = asker({"conn": ResourceDescriptor(
            OpenAIChatModel, base_url=server.base_url,
            flow_control=FlowControl(max_throttle_wait_s=30))},
            {"model": {"connection": "conn", "model": "m"}})
        res = run(agent, [{"key": "a", "q": "hi"}])
    [out] = res.outputs
    assert out["error"] is None, out["error"]  # before: gave up, told to wait 3601 s
    assert out["content"] == "ok" and out["metadata"]["throttled"] == 1
    assert server.requests == 2


@pytest.mark.parametrize("skew_s", [3600.0, -3600.0])
def test_a_unix_time_reset_is_counted_from_the_answers_date(skew_s):
    from flink_agents_py.integrations.chat_models._openai import openai_rate_limit
    from flink_agents_py.runtime._flow import sane_rate_limit

    server_now = time.time() + skew_s
    info = sane_rate_limit(openai_rate_limit(httpx.Headers({
        "date": _date(server_now), "x-ratelimit-reset-requests": str(int(server_now) + 20),
        "x-ratelimit-remaining-requests": "0", "x-ratelimit-limit-requests": "50"})))
    assert info is not None and info.reset_requests_s == pytest.approx(20, abs=1.01)
