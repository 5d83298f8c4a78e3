"""The progress bars on a terminal that reports no width (a pseudo-terminal nobody sized).

``script``, some CI runners and container consoles give a program a terminal of 0 columns;
tqdm read 0 rows there and drew no bar at all, so a user asking for ``progress=True`` saw nothing
for the whole run (the tutorial's agent on the embedded model: a minute of silence). A user's
program runs from its own directory with its stderr on such a terminal.
"""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from flink_agents_py.flink._progress import JobProgress
from flink_agents_py.local._progress import FALLBACK_SIZE, bar_size

pytestmark = pytest.mark.timeout(120)

PROGRAM = """
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, action

class Echo(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event, ctx):
        ctx.send_event(OutputEvent(output=event.input))

records = [{"key": str(i % 2), "n": i} for i in range(3)]
AgentsExecutionEnvironment.local(progress=True).from_list(records).apply(Echo()).run()
"""


def _stderr_on_a_terminal(tmp_path: Path, columns: int) -> str:
    """What the program writes to a terminal of ``columns`` columns (0: not sized)."""
    (tmp_path / "echo.py").write_text(PROGRAM)
    main, side = pty.openpty()
    if columns:
        fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    try:
        proc = subprocess.run(
            [sys.executable, "echo.py"],
            cwd=tmp_path,
            stderr=side,
            stdout=subprocess.DEVNULL,
            env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
            timeout=100,
        )
        os.close(side)
        side = -1
        chunks = []
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the other end is closed: all was read
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        if side >= 0:
            os.close(side)
        os.close(main)
    assert proc.returncode == 0
    return b"".join(chunks).decode(errors="replace")


def test_the_local_bar_shows_on_a_terminal_of_no_width(tmp_path):
    written = _stderr_on_a_terminal(tmp_path, columns=0)
    assert "agent: 100%" in written and "3/3" in written, repr(written)


def test_the_local_bar_follows_a_sized_terminal(tmp_path):
    written = _stderr_on_a_terminal(tmp_path, columns=50)
    last = [line for line in written.replace("\r", "\n").splitlines() if "3/3" in line][-1]
    assert len(last.rstrip()) <= 50, last


def test_the_flink_bar_gets_a_width_on_a_terminal_of_no_width(monkeypatch):
    main, side = pty.openpty()
    try:
        with os.fdopen(side, "w", closefd=False) as stream:
            assert bar_size(stream) == {"ncols": 80, "nrows": 24} and FALLBACK_SIZE == (80, 24)
            monkeypatch.setattr(sys, "stderr", stream)
            progress = JobProgress(["http://127.0.0.1:9"], total=4, poll_interval_s=60)
            with progress:
                assert (progress._bar.ncols, progress._bar.nrows) == FALLBACK_SIZE
            fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
            assert bar_size(stream) == {"dynamic_ncols": True}
    finally:
        os.close(side)
        os.close(main)
