"""A record nested hundreds of levels deep loses nothing from the event log.

The runtime takes a value nested as deep as the interpreter's stack allows (about 900
levels of lists here), but the event log's JSON writer (orjson) stops at 255: every record
of the event log quoting such a value (the input event, the output event, the output, a
durable call's result at level ``verbose``) failed to be written, an ERROR logged for each,
and the run was missing from the event log and so from ``flink-agents-py trace``. A value
deeper than ``MAX_DEPTH`` levels is now written as a text saying so, in its place.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.observability import EventLog, read_event_log
from flink_agents_py.observability._payload import MAX_DEPTH, NESTED_TOO_DEEP, to_loggable

REPO = pathlib.Path(__file__).resolve().parents[1]


def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


def _depth(value: Any) -> int:
    n = 0
    while isinstance(value, list) and value:
        value, n = value[0], n + 1
    return n


class Echo(Agent):
    """Echoes the record's ``t`` into the output, after a durable call returning it."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        """Call a function returning ``t``, then output it."""
        t = event.input["t"]
        back = await ctx.durable_execute_async(lambda: t)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "echo": back}))


@pytest.mark.parametrize("depth", [260, 450])
def test_a_deeply_nested_record_is_in_the_event_log_cut_at_the_bound(tmp_path, caplog, depth):
    path = tmp_path / "events.jsonl"
    records = [{"key": "deep", "t": _nested(depth)}, {"key": "flat", "t": "fine"}]
    with caplog.at_level(logging.ERROR):
        outputs = (
            AgentsExecutionEnvironment.local(event_log=EventLog(path, level="verbose"))
            .from_list(records)
            .apply(Echo())
            .collect()
        )
    assert sorted(o["key"] for o in outputs) == ["deep", "flat"]
    assert [o for o in outputs if o["key"] == "deep"][0]["echo"] == _nested(depth)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    log = [r for r in read_event_log([path]) if r.get("key") == "deep"]
    kinds = [r["kind"] for r in log]
    for kind in ("run_started", "event", "call_finished", "output", "run_completed"):
        assert kind in kinds, kinds
    [inp] = [r for r in log if r.get("type") == "InputEvent"]
    kept = inp["data"]["input"]["t"]
    assert _depth(kept) == MAX_DEPTH - 1  # the record is the top level
    bottom = kept
    while isinstance(bottom, list):
        bottom = bottom[0]
    assert bottom == NESTED_TOO_DEEP
    [out] = [r for r in log if r["kind"] == "output"]
    assert NESTED_TOO_DEEP in json.dumps(out)


def test_a_value_within_the_bound_is_logged_whole():
    value = {"a": _nested(MAX_DEPTH - 2)}
    assert to_loggable(value) == value
    assert NESTED_TOO_DEEP in json.dumps(to_loggable({"a": _nested(MAX_DEPTH)}))


USER_MODULE = """
import json, sys
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.observability import EventLog


class Mirror(Agent):
    @action(InputEvent)
    @staticmethod
    def mirror(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=event.input["payload"]))


if __name__ == "__main__":
    records = [json.loads(line) for line in open("records.jsonl")]
    out = (AgentsExecutionEnvironment.local(event_log=EventLog("events.jsonl"))
           .from_list(records).apply(Mirror()).collect())
    print(json.dumps(len(out)))
"""


def test_a_users_job_traces_a_hostile_topics_deep_record(tmp_path):
    home = tmp_path / "user"
    home.mkdir()
    (home / "mirror.py").write_text(textwrap.dedent(USER_MODULE))
    records = [{"key": "mallory", "payload": _nested(400)}, {"key": "bob", "payload": 1}]
    (home / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # this package, the user's folder
    done = subprocess.run(
        [sys.executable, "mirror.py"],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert str(REPO) not in str(home)
    assert done.stdout.strip().splitlines()[-1] == "2"
    assert "failed" not in done.stderr, done.stderr[-3000:]
    trace = subprocess.run(
        [sys.executable, "-m", "flink_agents_py", "trace", "events.jsonl", "--key", "mallory"],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert trace.returncode == 0, trace.stderr[-3000:]
    assert "mallory" in trace.stdout and "OutputEvent" in trace.stdout, trace.stdout
