"""A fake OpenAI-compatible provider that throttles: for flow-control tests and the bench.

``ThrottlingProvider(rate_per_s=400)`` serves ``/v1/chat/completions`` on 127.0.0.1: at most
``rate_per_s`` requests per one-second window are answered (after ``latency_s``); every
request above that is answered ``429`` with ``Retry-After`` (whole seconds, or an HTTP date)
and OpenAI's ``x-ratelimit-*`` headers, as a provider that rate-limits does. Every answer
carries the window's limit, what is left of it and when it resets, so a client that reads
them can pace itself.
"""

from __future__ import annotations

import email.utils
import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from ._local_server import LocalHTTPServer

__all__ = ["ThrottlingProvider"]


class ThrottlingProvider:
    """``with ThrottlingProvider(rate_per_s=400) as fake:`` ... ``fake.base_url``.

    Args:
        rate_per_s: requests answered per one-second window; the rest get 429.
        latency_s: how long an answered request takes, in seconds.
        retry_after: ``"seconds"`` (``Retry-After: 1``, whole seconds rounded up) or
            ``"date"`` (an HTTP date).
        rate_headers: send OpenAI's ``x-ratelimit-*`` headers with every answer.
        reply: the answer's text (``"{n}"`` is replaced by the request's number).

    Attributes:
        served: requests answered 200.
        throttled: requests answered 429.
        first_served_at: ``time.monotonic()`` of the first answered request (``None``: none).
        last_served_at: ``time.monotonic()`` of the last answered request.
    """

    def __init__(self, rate_per_s: int = 100, latency_s: float = 0.02,
                 retry_after: str = "seconds", rate_headers: bool = True,
                 reply: str = "answer {n}") -> None:
        if rate_per_s < 1:
            raise ValueError(f"rate_per_s must be >= 1, got {rate_per_s}")
        if retry_after not in ("seconds", "date"):
            raise ValueError(f"retry_after must be 'seconds' or 'date', got {retry_after!r}")
        self.rate_per_s = rate_per_s
        self.latency_s = latency_s
        self.retry_after = retry_after
        self.rate_headers = rate_headers
        self.reply = reply
        self.served = 0
        self.throttled = 0
        self.first_served_at: float | None = None
        self.last_served_at: float | None = None
        self._lock = threading.Lock()
        self._window = -1
        self._in_window = 0
        self._t0 = time.monotonic()
        self._httpd = LocalHTTPServer(self._handler())
        self.port = self._httpd.port
        self.base_url = f"{self._httpd.url}/v1"

    def __enter__(self) -> ThrottlingProvider:
        self._httpd.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.__exit__(*exc)

    @property
    def requests(self) -> int:
        """Every request received so far."""
        return self.served + self.throttled

    def served_rate(self) -> float:
        """Requests answered per second, from the first to the last answered one."""
        if self.first_served_at is None or self.last_served_at is None or self.served < 2:
            return 0.0
        span = self.last_served_at - self.first_served_at
        return self.served / span if span > 0 else 0.0

    def _admit(self) -> tuple[bool, int, float]:
        """Count a request: whether it is answered, what is left, seconds to the reset."""
        with self._lock:
            now = time.monotonic()
            elapsed = now - self._t0
            window = math.floor(elapsed)
            if window != self._window:
                self._window, self._in_window = window, 0
            reset_s = (window + 1) - elapsed
            if self._in_window >= self.rate_per_s:
                self.throttled += 1
                return False, 0, reset_s
            self._in_window += 1
            self.served += 1
            return True, self.rate_per_s - self._in_window, reset_s

    def _answered(self) -> None:
        with self._lock:
            now = time.monotonic()
            if self.first_served_at is None:
                self.first_served_at = now
            self.last_served_at = now

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - the http.server name
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                ok, remaining, reset_s = outer._admit()
                headers = {}
                if outer.rate_headers:
                    headers = {"x-ratelimit-limit-requests": str(outer.rate_per_s),
                               "x-ratelimit-remaining-requests": str(remaining),
                               "x-ratelimit-reset-requests": f"{int(reset_s * 1000)}ms"}
                if not ok:
                    if outer.retry_after == "seconds":
                        headers["retry-after"] = str(max(1, math.ceil(reset_s)))
                    else:
                        headers["retry-after"] = email.utils.formatdate(
                            time.time() + reset_s + 1, usegmt=True)
                    self._send(429, {"error": {"message": "Rate limit reached for requests",
                                               "type": "requests", "code": "rate_limit_exceeded"}},
                               headers)
                    return
                if outer.latency_s > 0:
                    time.sleep(outer.latency_s)
                try:
                    n = json.loads(raw).get("messages", [{}])[-1].get("content", "")
                except (ValueError, AttributeError, IndexError):
                    n = ""
                outer._answered()
                self._send(200, {
                    "id": "chatcmpl-fake", "object": "chat.completion", "created": 0,
                    "model": "fake",
                    "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                                 "message": {"role": "assistant",
                                             "content": outer.reply.replace("{n}", str(n))}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}},
                    headers)

            def _send(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        return Handler
