"""``read_lines_file(..., monitor_interval_s=)``: file input a job can be stopped and upgraded on.

Before, the deployment pages said a job to stop with a savepoint must read unbounded input,
"a ``FileSource`` with ``monitor_continuously``", but ``read_lines_file`` (the library's file
input, with bad lines kept as error rows) only read one file to its end, so a user had to
build a source of their own, without its bad-line handling and without a stable uid.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flink_agents_py.flink import read_lines_file

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

AGENT = """
from flink_agents_py.api import Agent, InputEvent, OutputEvent, action


class Echo(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event, ctx):
        ctx.send_event(OutputEvent(output={"key": ctx.key, "text": event.input["text"]}))
"""

JOB = """
import pathlib

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.flink import create_stream_environment, read_lines_file
from my_agents import Echo

folder = pathlib.Path("in")
env = create_stream_environment()
records, errors = read_lines_file(env, folder, monitor_interval_s=0.2, name="watched")
job = AgentsExecutionEnvironment.flink(env).from_datastream(records).apply(Echo())
rows = job.to_datastream().union(errors)
seen = []
with rows.execute_and_collect("watched") as results:
    for row in results:
        print(row, flush=True)
        seen.append(row)
        if len(seen) == 2:  # the first file read: a file put there later is read too
            (folder / ".b.tmp").write_text('{"key": "b", "text": "later"}\\n')
            (folder / ".b.tmp").rename(folder / "b.jsonl")
        if len(seen) == 3:
            break
print("DONE", flush=True)
"""


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "1"])
def test_a_bad_monitor_interval_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match=r"read_lines_file\(name='src'\): monitor_interval_s"):
        read_lines_file(None, "in", name="src", monitor_interval_s=bad)


@pytest.mark.flink
@pytest.mark.timeout(300)
def test_a_monitored_folder_is_read_on_as_new_files_arrive(tmp_path):
    pytest.importorskip("pyflink")
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "my_agents.py").write_text(AGENT)
    (tmp_path / "job.py").write_text(textwrap.dedent(JOB))
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text('{"key": "a", "text": "first"}\nnot json\n')
    proc = subprocess.run(
        [str(PYTHON), "job.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = proc.stdout.splitlines()
    assert lines[-1] == "DONE", proc.stdout
    assert "{'key': 'a', 'text': 'first'}" in lines
    assert any("'kind': 'error'" in line and "'line': 1" in line for line in lines), lines
    assert "{'key': 'b', 'text': 'later'}" in lines  # read after the first file, not ending
