"""Every form providers and gateways give their rate-limit headers in is read.

Before: a ``Retry-After`` sent twice (a gateway adding its own: httpx hands the adapter
``"1, 2"``) was unreadable, so a throttled call counted as one that named no wait and went
again after a 0.25-0.5 s backoff, into the provider's next 429s; a repeated
``retry-after-ms`` or ``x-ratelimit-remaining-requests`` was dropped the same way; and an
OpenAI reset below a millisecond, in Go's form (``853µs``, ``12ns``), was no reset at all.
"""

from __future__ import annotations

import http.server
import json
import threading
import time

import httpx
import pytest
from test_flow_control import asker, run

from flink_agents_py.api import ResourceDescriptor
from flink_agents_py.integrations.chat_models import OpenAIChatModel
from flink_agents_py.integrations.chat_models._anthropic import anthropic_rate_limit
from flink_agents_py.integrations.chat_models._common import header_retry_after, retry_after_s
from flink_agents_py.integrations.chat_models._openai import openai_rate_limit

pytestmark = pytest.mark.timeout(120)

NOW = 784111700.0  # 08:48:20 GMT on Sun, 06 Nov 1994


@pytest.mark.parametrize(("value", "seconds"), [
    ("5", 5.0),
    ("5, 7", 7.0),                                          # sent twice: the longer wait
    ("7,5", 7.0),
    ("Sun, 06 Nov 1994 08:49:37 GMT", 77.0),                # IMF-fixdate
    ("Sunday, 06-Nov-94 08:49:37 GMT", 77.0),               # RFC 850 (obsolete)
    ("Sun Nov  6 08:49:37 1994", 77.0),                     # asctime (obsolete)
    ("Sun, 06 Nov 1994 08:49:37 GMT, Sun, 06 Nov 1994 08:49:40 GMT", 80.0),
    ("3, Sun, 06 Nov 1994 08:50:00 GMT", 100.0),
    ("-3, 2", 2.0),
    ("soon, later", None),
])
def test_retry_after_in_every_form_and_sent_twice(value, seconds):
    assert retry_after_s(value, now=NOW) == seconds


def _headers(*pairs: tuple[str, str]) -> httpx.Headers:
    return httpx.Headers(list(pairs))  # what the SDKs hand over: repeated names joined


def test_a_repeated_retry_after_or_retry_after_ms_header_is_the_longer_wait():
    assert header_retry_after(_headers(("retry-after", "1"), ("retry-after", "2"))) == 2.0
    assert header_retry_after(_headers(("retry-after-ms", "100"),
                                       ("retry-after-ms", "250"))) == 0.25


@pytest.mark.parametrize(("reset", "seconds"), [
    ("6m0s", 360.0), ("1h2m3.5s", 3723.5), ("20ms", 0.02), ("853\u00b5s", 853e-6),
    ("853\u03bcs", 853e-6), ("853us", 853e-6), ("12ns", 12e-9), ("1m0.5s", 60.5), ("0s", 0.0),
])
def test_openai_resets_in_go_duration_form_down_to_nanoseconds(reset, seconds):
    # a reset in microseconds came through httpx decoded from UTF-8
    headers = httpx.Headers([(b"x-ratelimit-reset-requests", reset.encode())])
    info = openai_rate_limit(headers)
    assert info.reset_requests_s == pytest.approx(seconds)


def test_repeated_rate_limit_headers_count_the_most_restrictive_value():
    info = openai_rate_limit(_headers(
        ("x-ratelimit-remaining-requests", "5"), ("x-ratelimit-remaining-requests", "0"),
        ("x-ratelimit-limit-requests", "100"), ("x-ratelimit-limit-requests", "60"),
        ("x-ratelimit-reset-requests", "1s"), ("x-ratelimit-reset-requests", "6m0s")))
    assert (info.remaining_requests, info.limit_requests, info.reset_requests_s) == (0, 60, 360)
    soon = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    info = anthropic_rate_limit(_headers(
        ("anthropic-ratelimit-requests-reset", "2000-01-01T00:00:00Z"),
        ("anthropic-ratelimit-requests-reset", soon)))
    assert 3500 < info.reset_requests_s <= 3600


class _TwiceSaid(http.server.BaseHTTPRequestHandler):
    """429 with ``Retry-After`` sent twice (1 s and 2 s) until 2 s after the first 429."""

    seen: list[float] = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server name
        self.rfile.read(int(self.headers.get("content-length", 0)))
        now = time.monotonic()
        self.seen.append(now)
        if now - self.seen[0] < 1.9:
            body = json.dumps({"error": {"message": "slow down"}}).encode()
            self.send_response(429)
            self.send_header("retry-after", "1")
            self.send_header("retry-after", "2")
        else:
            body = json.dumps({
                "id": "x", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "ok"}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }).encode()
            self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_call_told_to_wait_by_a_repeated_retry_after_waits_the_longer_and_is_not_rethrottled():
    _TwiceSaid.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _TwiceSaid)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        agent = asker({"conn": ResourceDescriptor(OpenAIChatModel, base_url=base_url)},
                      {"model": {"connection": "conn", "model": "m"}})
        res = run(agent, [{"key": "a", "q": "hi"}])
    finally:
        server.shutdown()
        server.server_close()
    [out] = res.outputs
    assert (out["error"], out["content"]) == (None, "ok")
    # one 429, then the answer 2 s later (before: sent again after 0.25-0.5 s backoffs,
    # each drawing another 429)
    assert len(_TwiceSaid.seen) == 2, [round(t - _TwiceSaid.seen[0], 2) for t in _TwiceSaid.seen]
    assert out["metadata"]["throttled"] == 1
