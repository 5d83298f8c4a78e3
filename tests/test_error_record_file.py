"""The local runner's error record of a bad file line names the file in its own field.

A bad line's row on Flink (``read_lines_file``'s error stream) has a ``file`` field, its
file's real path; the local runner's ``ErrorRecord`` of the same line (``from_list(
read_json_lines(path))``) had none, and the path had left its message too, so which of
several files a bad line was in was lost there. ``ErrorRecord.file`` now names it (``None``
when the record is not a file's bad line), in ``json_row()`` as in the object.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.io import read_json_lines

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]


class Picky(Agent):
    """Echoes ``n``; fails on a record without one."""

    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": event.input["n"]}))


def test_a_bad_line_s_error_record_names_its_file_and_an_action_s_names_none(tmp_path: Path):
    first, second = tmp_path.resolve() / "a.jsonl", tmp_path.resolve() / "b.jsonl"
    first.write_text('{"key": "a", "n": 1}\nnot json\n')
    second.write_text('{"key": "b"}\n{"key": \n{"key": "c", "n": 3}\n')
    lines = [*read_json_lines(first), *read_json_lines(second)]
    result = AgentsExecutionEnvironment.local().from_list(lines).apply(Picky()).run()
    assert sorted(o["n"] for o in result.outputs) == [1, 3]  # good lines are not lost
    rows = sorted((e.source, e.error_type, e.file) for e in result.errors)
    assert rows == [
        ("line 0", "KeyError", None),  # an action failed: not a bad line of a file
        ("line 1", "BadRecordError", str(first)),
        ("line 1", "BadRecordError", str(second)),
    ]
    [bad] = [e for e in result.errors if e.file == str(second)]
    assert bad.json_row()["file"] == str(second)
    assert str(second) not in bad.message  # the file is in its field, not in the text


def test_an_error_record_not_of_a_file_has_file_none():
    result = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(Picky()).run()
    [error] = result.errors
    assert error.file is None and error.json_row()["file"] is None


SCRIPT = """
    import json, sys
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.io import read_json_lines
    from my_agent import Echo

    lines = read_json_lines(sys.argv[1])
    result = AgentsExecutionEnvironment.local().from_list(lines).apply(Echo()).run()
    for error in result.errors:
        print("ERR " + json.dumps(error.json_row(), sort_keys=True))
    for output in result.outputs:
        print("OUT " + json.dumps(output, sort_keys=True))
"""

AGENT = """
    from flink_agents_py.api import Agent, InputEvent, OutputEvent, action


    class Echo(Agent):
        @action(InputEvent)
        @staticmethod
        def on_input(event, ctx):
            ctx.send_event(OutputEvent(output=event.input))
"""


def test_a_user_s_script_reads_the_file_of_a_bad_line_from_its_error_row(tmp_path: Path):
    assert ROOT not in tmp_path.resolve().parents  # the user's own folder and modules
    (tmp_path / "my_agent.py").write_text(textwrap.dedent(AGENT))
    (tmp_path / "run.py").write_text(textwrap.dedent(SCRIPT))
    (tmp_path / "in.jsonl").write_text('{"key": "a"}\n\n{oops\n{"key": "b"}\n')
    proc = subprocess.run(
        [sys.executable, "run.py", "in.jsonl"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=100,
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    errors = [json.loads(x[4:]) for x in proc.stdout.splitlines() if x.startswith("ERR ")]
    outputs = [json.loads(x[4:]) for x in proc.stdout.splitlines() if x.startswith("OUT ")]
    assert sorted(o["key"] for o in outputs) == ["a", "b"]
    [error] = errors
    assert (error["source"], error["error_type"], error["file"]) == (
        "line 2",
        "BadRecordError",
        str((tmp_path / "in.jsonl").resolve()),
    )
