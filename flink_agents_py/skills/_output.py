"""A skill command's output: read as a stream under a cap, and told apart from the notes.

What the command wrote goes in the result's ``output`` field only; what the framework says
about it (the output was cut, a limit stopped the command) goes in fields of their own
(``output_cut``, ``stopped``). The result reaches the model as JSON, where the command's
text is one string, escaped: a command that prints ``[... output cut ...]``, or a brace and
a field name, writes characters inside that string, never a field beside it.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from ..api import mask_secrets

__all__ = ["collect", "render", "stop"]


@dataclass
class _Stream:
    head: bytearray
    total: int = 0


_SIGNALS = {signal.SIGXCPU: "it used up its CPU time limit",
            signal.SIGXFSZ: "a file it wrote reached the file size limit",
            signal.SIGKILL: "it was killed (out of memory or a limit)"}


def collect(proc: subprocess.Popen[bytes], deadline: float, cap_bytes: int,
            contained: bool) -> tuple[_Stream, _Stream, bool]:
    """Read the command's stdout and stderr until both close or ``deadline`` passes.

    Args:
        proc: the started command (its stdout and stderr piped).
        deadline: the ``time.monotonic()`` past which reading stops.
        cap_bytes: the most bytes kept of each stream (the rest is counted and dropped).
        contained: whether it runs in the sandbox (on the host, a finished command's
            group is killed so leftovers holding the pipes do not keep them open).

    Returns:
        (stdout, stderr, whether it finished before the deadline).
    """
    assert proc.stdout is not None and proc.stderr is not None
    streams = {proc.stdout.fileno(): _Stream(bytearray()),
               proc.stderr.fileno(): _Stream(bytearray())}
    with selectors.DefaultSelector() as sel:
        for fd in streams:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return streams[proc.stdout.fileno()], streams[proc.stderr.fileno()], False
            for key, _ in sel.select(min(left, 0.5)):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                s = streams[key.fd]
                s.total += len(chunk)
                room = cap_bytes - len(s.head)
                if room > 0:
                    s.head += chunk[:room]
            if not contained and proc.poll() is not None:
                _kill_group(proc)  # on the host, leftovers holding the pipes die with it
    try:
        proc.wait(timeout=max(deadline - time.monotonic(), 0.001))
    except subprocess.TimeoutExpired:
        return streams[proc.stdout.fileno()], streams[proc.stderr.fileno()], False
    return streams[proc.stdout.fileno()], streams[proc.stderr.fileno()], True


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def stop(proc: subprocess.Popen[bytes], contained: bool) -> None:
    """Kill the sandbox (its PID namespace goes with it) or the host process group.

    Args:
        proc: the started command.
        contained: whether it runs in the sandbox.
    """
    if not contained:
        _kill_group(proc)  # what the command left behind in its group, even after it exited
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for f in (proc.stdout, proc.stderr):
        if f is not None:
            f.close()


def render(out: _Stream, err: _Stream, code: int, max_chars: int,
           bounds: str) -> tuple[str, dict[str, Any]]:
    """The command's text and the framework's notes on it, apart.

    Args:
        out: what it wrote on stdout.
        err: what it wrote on stderr.
        code: its exit code (``128 + n`` or ``-n`` for a signal ``n``).
        max_chars: the most characters of text returned.
        bounds: the limits, as the ``stopped`` note names them.

    Returns:
        (stdout then stderr, cut at ``max_chars``; the notes: ``output_cut`` with
        ``kept_characters`` and ``bytes_written`` when the text is not all of it,
        ``stopped`` with the reason when a limit's signal ended the command).
    """
    text = out.head.decode(errors="replace")
    errors = err.head.decode(errors="replace")
    if errors:
        text += ("\n" if text else "") + errors
    notes: dict[str, Any] = {}
    cut = out.total > len(out.head) or err.total > len(err.head) or len(text) > max_chars
    if len(text) > max_chars:  # masked whole, then cut: no part of a known secret kept
        text = mask_secrets(text)[:max_chars]
    if cut:
        notes["output_cut"] = {"kept_characters": len(text),
                               "bytes_written": out.total + err.total}
    sig = code - 128 if code > 128 else -code if code < 0 else 0
    if sig in _SIGNALS:
        notes["stopped"] = f"{_SIGNALS[signal.Signals(sig)]} ({bounds})"
    return text, notes
