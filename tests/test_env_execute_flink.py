"""PyFlink's own ``env.execute()`` on a local MiniCluster reads the agent's unread errors too.

A Flink user ends a job with ``env.execute()``, PyFlink's. Then the records the agent
failed went to the TaskManager's log file only: the console printed the good outputs and
not a word about the others. Now the environment given to
``AgentsExecutionEnvironment.flink(env)`` runs such a job as ``agents.execute()`` does:
each failed record logged at WARNING in the program's own process. Run as its user runs it,
a module in its own directory outside the repository.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.flink

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

JOB = """
from pyflink.common import Types

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.flink import create_stream_environment


class Picky(Agent):
    @action(InputEvent)
    @staticmethod
    def go(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input["n"] == 2:
            raise ValueError("n must not be 2")
        ctx.send_event(OutputEvent(output=event.input["n"]))


env = create_stream_environment(parallelism=1)
records = [{"customer": "a", "n": 1}, {"customer": "a", "n": 2}, {"name": "x", "n": 3},
           {"customer": "b", "n": 4}]
stream = env.from_collection(records, type_info=Types.PICKLED_BYTE_ARRAY())
agents = AgentsExecutionEnvironment.flink(env)
agents.from_datastream(stream, key_selector=lambda r: r["customer"]).apply(
    Picky()).to_datastream().map(lambda n: f"out {n}", output_type=Types.STRING()).print()
env.execute("picky")
print("second job:", list(env.from_collection([1, 2]).execute_and_collect()))
"""


def test_pyflinks_own_execute_logs_the_failed_records_in_the_program(tmp_path):
    (tmp_path / "job.py").write_text(JOB)
    proc = subprocess.run([str(PYTHON), "job.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert sorted(line for line in proc.stdout.splitlines() if line.startswith("out ")) == [
        "out 1", "out 4"], proc.stdout
    job = tmp_path / "job.py"
    lines = JOB.splitlines()
    raised = 1 + next(i for i, line in enumerate(lines) if "raise ValueError" in line)
    selector = 1 + next(i for i, line in enumerate(lines) if "key_selector=lambda" in line)
    unread = [line for line in proc.stderr.splitlines() if "unread error record" in line]
    assert sorted(unread) == sorted([
        "WARNING flink_agents_py.errors: unread error record (read them with "
        "errors_datastream()): key 'a', input 1, r1/go: ValueError: n must not be 2 (at "
        f"{job}:{raised}, in go)",
        "WARNING flink_agents_py.errors: unread error record (read them with "
        "errors_datastream()): key None, record (<key_selector>): KeyError: 'customer' (at "
        f"{job}:{selector}, in <lambda>)",
    ]), proc.stderr
    assert "second job: [1, 2]" in proc.stdout  # a later job of the environment: PyFlink's
