"""An event log that cannot be written says so: which log, which path, why.

A path under a file, or a folder given as the file, failed with bare ``FileExistsError:
[Errno 17] File exists: '/home/me/out'`` from deep in ``pathlib``, naming neither the event
log nor the path the job was given (on Flink: in the exception of every restart). The error
keeps its type and errno (``except OSError`` still catches it) and now says what it is for.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, action
from flink_agents_py.observability import ApacheEventLog, EventLog

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = textwrap.dedent("""
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action

    class Echo(Agent):
        @action(InputEvent)
        @staticmethod
        async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output=event.input))

    if __name__ == "__main__":
        env = AgentsExecutionEnvironment.local(event_log="notes.txt/events.jsonl")
        print(env.from_list([{"key": "a"}]).apply(Echo()).collect())
""")


class Echo(Agent):
    """Echoes its input."""

    @action(InputEvent)
    @staticmethod
    def go(event: InputEvent, ctx: object) -> None:
        """Echo."""
        ctx.send_event(OutputEvent(output=event.input))  # type: ignore[attr-defined]


def test_a_program_whose_event_log_folder_is_a_file_is_told_which_log_and_why(tmp_path):
    (tmp_path / "job.py").write_text(PROGRAM)
    (tmp_path / "notes.txt").write_text("mine\n")
    done = subprocess.run([sys.executable, "job.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("FileExistsError: [Errno 17] cannot write the event log at ")
    assert str(tmp_path / "notes.txt" / "events.jsonl") in last
    assert "a file is where its folder should be" in last
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


def test_a_folder_given_as_the_event_log_file(tmp_path):
    env = AgentsExecutionEnvironment.local(event_log=EventLog(tmp_path))
    with pytest.raises(IsADirectoryError, match=r"cannot write the event log at .*: Is a dir"):
        env.from_list([{"key": "a"}]).apply(Echo()).run()


def test_apache_event_log_whose_base_dir_is_a_file(tmp_path):
    (tmp_path / "logs").write_text("")
    log = ApacheEventLog.from_config({"baseLogDir": str(tmp_path / "logs")})
    assert log is not None
    with pytest.raises(FileExistsError, match="cannot write the Flink Agents event log at "):
        log.open(job_id="j", task_name="t", subtask=0)


def test_trace_given_a_folder_asks_for_its_files(tmp_path):
    (tmp_path / "out").mkdir()
    done = subprocess.run([sys.executable, "-m", "flink_agents_py", "trace", "out"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2
    assert done.stderr.strip() == ("flink-agents-py trace: out is a folder: give its files "
                                   "(e.g. out/*.jsonl)")
