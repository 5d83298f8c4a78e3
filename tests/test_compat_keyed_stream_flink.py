"""``from_datastream`` of a stream the program keyed itself (``ds.key_by(f)``), with no key
selector, as Flink Agents takes it: each record runs under the key ``f`` gave it.

Before, the stream's key was dropped and the records were keyed by their ``"key"`` field:
records without one all went to the error output. Run from a directory outside the
repository, on a MiniCluster.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = [pytest.mark.flink, pytest.mark.timeout(300)]

JOB = """
    from pyflink.common.typeinfo import Types
    from pyflink.datastream import KeySelector, StreamExecutionEnvironment
    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, InputEvent, OutputEvent, RunnerContext, action)


    class Count(Agent):
        @action(InputEvent)
        @staticmethod
        def go(event: InputEvent, ctx: RunnerContext) -> None:
            n = (ctx.short_term_memory.get("n") or 0) + 1
            ctx.short_term_memory.set("n", n)
            ctx.send_event(OutputEvent(output={"v": event.input["v"], "n": n}))


    class ById(KeySelector):
        def get_key(self, value):
            return value["id"]


    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    records = [{"id": "a", "v": 1}, {"id": "b", "v": 2}, {"id": "a", "v": 3}]
    ds = env.from_collection(records).key_by(ById())
    agents_env = AgentsExecutionEnvironment.get_execution_environment(env)
    out = agents_env.from_datastream(ds).apply(Count()).to_datastream()
    out.map(lambda o: f"RESULT {o['v']} {o['n']}", output_type=Types.STRING()).print()
    agents_env.execute()
"""


def test_a_stream_keyed_by_the_program_keeps_its_key(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(textwrap.dedent(JOB))
    proc = subprocess.run([str(PYTHON), "job.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=280, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = sorted(line.split("RESULT ", 1)[1] for line in proc.stdout.splitlines()
                 if "RESULT " in line)
    # key "a" counts its two records (in their order: one source subtask), key "b" its one
    assert got == ["1 1", "2 1", "3 2"]
