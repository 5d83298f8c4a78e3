"""The fakes' HTTP server keeps many connections waiting while it is busy.

A fake provider asked by two Flink subtasks at once (each with calls in flight) on a busy
machine: its connections wait in the kernel's accept queue until the serving thread
accepts them. With the listen backlog of 5 that ``socketserver`` uses by default, the
sixth and later connections were dropped and the calls failed with "Connection error"
(seen in CI). Nothing accepts here (the server is not serving yet), so every connection
below must wait in the backlog.
"""

from __future__ import annotations

import json
import socket
import urllib.request
from http.server import BaseHTTPRequestHandler

from flink_agents_py.testing import LocalHTTPServer, ThrottlingProvider


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server name
        data = b'{"hello": "world"}'
        self.send_response(200)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def _connections_waiting(port: int, n: int) -> list[socket.socket]:
    """Open ``n`` connections to ``port``; each must complete its handshake (else OSError)."""
    opened = []
    try:
        for _ in range(n):
            opened.append(socket.create_connection(("127.0.0.1", port), timeout=20))
    except OSError:
        for s in opened:
            s.close()
        raise
    return opened


def test_sixty_four_connections_wait_for_a_server_that_has_not_accepted_any():
    server = LocalHTTPServer(_Hello)
    try:
        waiting = _connections_waiting(server.port, 64)
        with server:  # now it serves: the waiting connections are accepted and answered
            for s in waiting[:3]:
                s.sendall(b"GET / HTTP/1.0\r\n\r\n")
                assert b'{"hello": "world"}' in s.makefile("rb").read()
            with urllib.request.urlopen(server.url + "/", timeout=30) as resp:
                assert json.loads(resp.read()) == {"hello": "world"}
        for s in waiting:
            s.close()
    finally:
        server.server_close()


def test_the_throttling_provider_keeps_its_connections_waiting_too():
    fake = ThrottlingProvider(rate_per_s=2)
    try:
        for s in _connections_waiting(fake.port, 64):
            s.close()
    finally:
        fake.__exit__(None, None, None)
