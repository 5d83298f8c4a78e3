"""``flink-agents-py trace`` shows an event log whose records nest deeper than the stack.

A log is a file from outside as any other (sent with a bug report, damaged, hand-written):
a record value nested 1,000 levels deep (orjson reads up to 1,024) made the text and HTML
traces end with a ``RecursionError`` traceback: orjson writes at most 255 levels, and the
preview fell back to ``repr``, which ran out of stack. Now the preview shows the value cut
at 32 levels, and the trace is written.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[1]


class _Echo(Agent):
    @action(InputEvent)
    @staticmethod
    def go(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "v": event.input["v"]}))


@pytest.mark.parametrize("depth", [300, 1000, 1020])
def test_the_trace_of_a_log_nested_beyond_the_stack_is_written(tmp_path, depth):
    assert ROOT not in tmp_path.resolve().parents
    log = tmp_path / "events.jsonl"
    env = AgentsExecutionEnvironment.local(event_log=str(log))
    env.from_list([{"key": "a", "v": "MARKER"}]).apply(_Echo()).run()
    text = log.read_text()
    assert '"MARKER"' in text
    log.write_text(text.replace('"MARKER"', "[" * depth + "]" * depth))
    for extra in ([], ["--html", "trace.html"]):
        proc = subprocess.run(
            [sys.executable, "-m", "flink_agents_py", "trace", "events.jsonl", *extra],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=100,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "RecursionError" not in proc.stdout + proc.stderr
        assert "runs: 1 shown of 1" in proc.stdout
        if not extra and depth > 255:  # the output's preview, cut at 32 levels
            assert '[[[["..."]]]]' in proc.stdout, proc.stdout
    assert (tmp_path / "trace.html").stat().st_size > 0
