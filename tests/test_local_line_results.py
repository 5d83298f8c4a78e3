"""``from_list(read_json_lines(path))`` runs the file's records, each error row naming its line.

Found by a newcomer: ``read_json_lines`` yields ``LineResult(line, record, error)``; given
straight to ``from_list`` (it reads as "the records of the file"), each ran as a record
itself, a tuple under the key ``None``, and every action failed with ``list indices must be
integers or slices, not str``. And with the page's loop (keeping ``r.record``), an error row
said ``record 2``, its place in the list, not the file's line. Now the local runner takes a
``LineResult`` as its record, a bad line as an error row (``BadRecordError``), and every
error row of a line's record names it in ``source`` (``line 3``), as ``from_kafka``'s rows
name their offset.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(120)

USER_PROGRAM = """
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, action
from flink_agents_py.io import read_json_lines


class Shout(Agent):
    @action(InputEvent)
    @staticmethod
    def shout(event, ctx):
        ctx.send_event(OutputEvent(output={"key": ctx.key, "text": event.input["text"].upper()}))


result = AgentsExecutionEnvironment.local().from_list(read_json_lines("in.jsonl")).apply(
    Shout()).run()
for output in result.outputs:
    print("out", output)
for error in result.errors:
    print("err", error.execution_id, error.source, error.action, error.error_type)
"""

LINES = [
    '{"key": "a", "text": "hi"}',
    "not json",
    "",  # blank: no record, still a line
    '{"text": "no key"}',
    '{"key": "b", "text": 7}',  # the action fails on it
    '{"key": "a", "text": "yo"}',
]


def test_the_local_runner_runs_line_results_and_names_each_errors_line(tmp_path):
    assert ROOT not in tmp_path.resolve().parents  # a user's own folder
    (tmp_path / "mine.py").write_text(textwrap.dedent(USER_PROGRAM))
    (tmp_path / "in.jsonl").write_text("\n".join(LINES) + "\n")
    done = subprocess.run(
        [sys.executable, "mine.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        "out {'key': 'a', 'text': 'HI'}",
        "out {'key': 'a', 'text': 'YO'}",
        "err record 1 line 1 <input> BadRecordError",
        "err record 2 line 3 <key_selector> UnkeyedRecordError",
        "err r0/shout line 4 shout AttributeError",
    ], done.stderr[-3000:]
    assert (
        "record 1 (line 1) rejected before it ran: BadRecordError: line 1: not JSON" in done.stderr
    )
