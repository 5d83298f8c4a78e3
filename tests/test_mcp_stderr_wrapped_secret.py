"""A stdio MCP server's stderr: a known key written over two lines is masked.

The relay masked each read of the pipe on its own: a key a server wrapped over two lines
(``token: <half>`` then ``  <half>``) that arrived in two reads was written out in two
halves, neither of them the key. The last line is now held for the next one (at most
``HOLD_LAST_LINE_S``) and the two are masked together.
"""

from __future__ import annotations

import fcntl
import io
import os
import struct
import sys
import termios
import threading
import time
import uuid

import pytest

pytest.importorskip("mcp")

from flink_agents_py.api import register_secret  # noqa: E402
from flink_agents_py.integrations.mcp import _session  # noqa: E402


def _unread(fd: int) -> int:
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def _wait(condition, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_a_key_wrapped_over_two_lines_read_apart_is_masked(monkeypatch):
    key = f"Wr{uuid.uuid4().hex}"
    register_secret(key)
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    read, write = os.pipe()
    relay = threading.Thread(target=_session._MaskedStderr._relay, args=(read,))
    relay.start()
    # a first part shorter than a piece masked on its own (FRAGMENT_MIN_CHARS): only the
    # two lines masked together find it
    os.write(write, f"starting\nauth failed for token {key[:8]}\n".encode())
    _wait(lambda: _unread(read) == 0)  # the relay read it: the next line comes apart
    os.write(write, f"    {key[8:]} (expired)\nready\n".encode())
    os.close(write)
    relay.join(30)
    text = out.getvalue()
    assert text.startswith("starting\nauth failed for token [REDACTED] (expired)\n"), text
    assert text.endswith("ready\n")
    assert key[:8] not in text and key[8:] not in text


def test_a_last_line_is_written_out_when_no_next_line_comes(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    read, write = os.pipe()
    relay = threading.Thread(target=_session._MaskedStderr._relay, args=(read,), daemon=True)
    relay.start()
    try:
        os.write(write, b"listening on stdio\n")
        _wait(lambda: out.getvalue() == "listening on stdio\n")  # the pipe still open
    finally:
        os.close(write)
        relay.join(30)
