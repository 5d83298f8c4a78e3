"""On a local MiniCluster, bad input lines nobody takes are logged, not dropped quietly.

Found by a newcomer: ``records, errors = read_lines_file(env, "in.jsonl")``, then only
``records`` given to the agent (as most first programs do): a line that was not JSON left no
trace at all. Flink drops a side output nobody consumes, so the error rows the reader made
for it went nowhere, while a failed record of the agent was logged (its error output is read
back by ``execute`` and ``execute_and_collect``). Now a reader's bad-input stream
(``read_lines_file``, and ``read_json_topic`` / ``from_kafka`` alike) that no operator of the
job consumes is read back the same way and each row logged at WARNING in the program's
process, naming the line and the stream to take; a stream the program takes is its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.flink

pytest.importorskip("pyflink")

ROOT = Path(__file__).resolve().parents[1]

USER_PROGRAM = """
import sys

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, action
from flink_agents_py.flink import create_stream_environment, read_lines_file


class Echo(Agent):
    @action(InputEvent)
    @staticmethod
    def echo(event, ctx):
        ctx.send_event(OutputEvent(output={"key": ctx.key, "text": event.input["text"]}))


env = create_stream_environment(parallelism=1, restart_attempts=0)
records, errors = read_lines_file(env, "in.jsonl")
agents = AgentsExecutionEnvironment.flink(env)
job = agents.from_datastream(records).apply(Echo())
if sys.argv[1] == "untaken":
    stream = job.to_datastream()
else:  # taken: the outputs and the bad lines in one stream
    stream = job.to_datastream().union(errors)
with stream.execute_and_collect("echo") as rows:
    for row in sorted(rows, key=str):
        print(row, flush=True)
"""


def _run(tmp_path: Path, mode: str) -> subprocess.CompletedProcess[str]:
    assert ROOT not in tmp_path.resolve().parents  # a user's own folder
    return subprocess.run(
        [sys.executable, "mine.py", mode],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=400,
    )


@pytest.mark.timeout(600)
def test_bad_lines_nobody_takes_are_logged_and_taken_ones_are_the_programs(tmp_path):
    (tmp_path / "mine.py").write_text(textwrap.dedent(USER_PROGRAM))
    (tmp_path / "in.jsonl").write_text(
        '{"key": "a", "text": "hi"}\nnot json\n{"key": "b", "text": "yo"}\n'
    )
    untaken = _run(tmp_path, "untaken")
    assert untaken.returncode == 0, untaken.stderr[-3000:]
    assert untaken.stdout.splitlines() == [
        "{'key': 'a', 'text': 'hi'}",
        "{'key': 'b', 'text': 'yo'}",
    ]
    warned = [line for line in untaken.stderr.splitlines() if "unread bad input" in line]
    assert warned == [
        "WARNING flink_agents_py.errors: unread bad input (take the error stream "
        "read_lines_file returns): line 1: not JSON (invalid literal, expected "
        "'null': line 1 column 1 (char 0)) (value 'not json')"
    ], untaken.stderr

    taken = _run(tmp_path, "taken")
    assert taken.returncode == 0, taken.stderr[-3000:]
    assert "'line': 1" in taken.stdout  # the program reads the row itself
    assert "unread bad input" not in taken.stderr, taken.stderr


@pytest.mark.timeout(300)
def test_a_readers_pair_given_as_the_stream_says_to_take_its_records(tmp_path):
    # ``from_datastream(read_lines_file(env, path))``: the pair, not its records; it said to
    # pass ``env.from_collection(records)``, which is not what the program has in hand
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import UsageError
    from flink_agents_py.flink import create_stream_environment, read_lines_file

    (tmp_path / "in.jsonl").write_text('{"key": "a", "text": "hi"}\n')
    env = create_stream_environment(parallelism=1)
    agents = AgentsExecutionEnvironment.flink(env)
    with pytest.raises(
        UsageError,
        match=r"got a FileInput: pass its records stream, "
        r"from_datastream\(input.records\) \(and take "
        r"input.errors, its bad input rows\)",
    ):
        agents.from_datastream(read_lines_file(env, str(tmp_path / "in.jsonl")))
