"""A failed record of a Table API run on a local MiniCluster is shown on the console.

A Flink Agents program written the way its ``integrate_table_with_agent_example.py`` is
(``from_table`` with a PyFlink ``KeySelector``, ``to_table`` with an ``ExternalTypeInfo`` of
a ``RowTypeInfo``, the table run by the Table API: ``execute_insert("sink").wait()``, or
``execute().collect()``), its imports changed to ``flink_agents_py.compat``, run from a
directory outside the repository. Such a run is translated from the table alone, so the
agent's error output is not in the job: an action that raised left its record out of the
table and the program printed nothing about it (Flink Agents fails the job). The warning
was logged in the Python workers only, whose log records and standard error go to Flink's
log file; on a local MiniCluster it is now also printed on the workers' standard output,
the console, naming the key, the action and the error.
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

# a table agent in the shape of Flink Agents' my_agent.TableAgent (written here): the row
# arrives as a dict by column name; a review with no text is refused
AGENT = """
    from typing import Any

    from pyflink.common import Row
    from pyflink.datastream import KeySelector

    from flink_agents_py.compat import (
        Agent, Event, InputEvent, OutputEvent, RunnerContext, action)


    class MyKeySelector(KeySelector):
        def get_key(self, value: Row) -> int:
            return value[0]


    class ScoreAgent(Agent):
        @action(InputEvent)
        @staticmethod
        def score(event: Event, ctx: RunnerContext) -> None:
            row = event.input
            if not row["info"]:
                raise ValueError(f"review {row['id']} has no text")
            score = "unknown" if row["info"] == "?" else len(row["info"])
            ctx.send_event(OutputEvent(output={"id": row["id"], "score": score}))
"""

PROGRAM = """
    import sys

    from pyflink.common.typeinfo import BasicTypeInfo, ExternalTypeInfo, RowTypeInfo
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.table import DataTypes, Schema, StreamTableEnvironment, TableDescriptor

    from flink_agents_py.compat import AgentsExecutionEnvironment
    from score_agent import MyKeySelector, ScoreAgent

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    t_env = StreamTableEnvironment.create(stream_execution_environment=env)
    agents_env = AgentsExecutionEnvironment.get_execution_environment(env=env, t_env=t_env)
    table = t_env.from_elements(
        [(7, "good"), (8, ""), (9, "fine too"), (10, "?")], ["id", "info"])
    output_type = ExternalTypeInfo(RowTypeInfo(
        [BasicTypeInfo.LONG_TYPE_INFO(), BasicTypeInfo.INT_TYPE_INFO()], ["id", "score"]))
    schema = (Schema.new_builder().column("id", DataTypes.BIGINT())
              .column("score", DataTypes.INT()).build())
    builder = agents_env.from_table(input=table, key_selector=MyKeySelector()).apply(ScoreAgent())
    if sys.argv[1] == "late":  # outputs checked after the operator, not in it
        builder.errors_datastream()
    output_table = builder.to_table(schema=schema, output_type=output_type)
    if sys.argv[1] == "insert":
        t_env.create_temporary_table(
            "sink", TableDescriptor.for_connector("print").schema(schema).build())
        output_table.execute_insert("sink").wait()
    else:
        with output_table.execute().collect() as rows:
            print("ROWS", sorted(tuple(r) for r in rows))
"""


def _run(tmp_path: Path, mode: str) -> str:
    env = {
        **{k: v for k, v in os.environ.items() if k != "FLINK_CONF_DIR"},
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        [str(PYTHON), "prog.py", mode],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    return proc.stdout


@pytest.mark.flink
@pytest.mark.timeout(900)
def test_a_failed_record_of_a_table_run_is_printed_on_the_console(tmp_path: Path) -> None:
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "score_agent.py").write_text(textwrap.dedent(AGENT))
    (tmp_path / "prog.py").write_text(textwrap.dedent(PROGRAM))

    out = _run(tmp_path, "insert")
    assert "+I[7, 4]" in out and "+I[9, 8]" in out, out[-3000:]  # the other rows went on
    assert "+I[8," not in out and "+I[10," not in out
    failed, misfit = _warnings(out)
    assert "to_table: an error record of the agent, for key 8" in failed
    assert "action 'score'" in failed and "ValueError: review 8 has no text" in failed
    assert "errors_datastream()" in failed  # and how to collect such records
    # an output the INT column cannot hold: an error record of its run, with its key
    assert "'unknown'" in misfit and "INT column" in misfit

    out = _run(tmp_path, "collect")
    assert "ROWS [(7, 4), (9, 8)]" in out, out[-3000:]
    failed, misfit = _warnings(out)
    assert "ValueError: review 8 has no text" in failed and "'unknown'" in misfit

    # errors_datastream() taken before to_table: the map after the operator checks the
    # outputs, and says which it left out
    out = _run(tmp_path, "late")
    assert "ROWS [(7, 4), (9, 8)]" in out, out[-3000:]
    left_out = [line for line in out.splitlines() if "an agent output is left out" in line]
    assert len(left_out) == 1 and left_out[0].startswith("WARNING "), out[-3000:]
    assert "'unknown'" in left_out[0] and "INT column" in left_out[0]


def _warnings(out: str) -> tuple[str, str]:
    """The console's warning for key 8 (its action failed) and for key 10 (a misfit)."""
    lines = [line for line in out.splitlines() if line.startswith("WARNING ")]
    assert len(lines) == 2, out[-3000:]
    (failed,) = [line for line in lines if "for key 8" in line]
    (misfit,) = [line for line in lines if "for key 10" in line]
    return failed, misfit
