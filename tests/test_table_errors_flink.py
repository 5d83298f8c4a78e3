"""A failed action, and outputs a declared type cannot hold, in jobs whose outputs are typed.

A job whose outputs went through ``to_table`` died when an action failed: run as a table
job (``table.execute()``), it does not include the agent's error output, so PyFlink sent the
error record to the main output as an ``(OutputTag, record)`` pair, and the map to rows
failed the job with a clipped ``TypeError`` naming an ``OutputTag``. Likewise any output the
row type could not hold (a value of the wrong type, ``None``) failed the job.

Now, on a MiniCluster:

- in a DataStream job (``errors_datastream()`` taken, ``execute_and_collect``): the failed
  action's record and each output that does not fit (wrong type, ``None``, a missing field
  the schema declares ``NOT NULL``) reach the error output with key, position and a message
  naming the field, the type and the value; the good rows reach the table. The same holds
  for Flink Agents' ``to_datastream(output_type)`` (which our compat layer refused).
- in a table job of an Apache-shaped program (``from_table(...).apply(agent).to_table(schema,
  output_type)``, then ``table.execute()``), run as a user's script from a temporary
  directory: the job finishes with the good rows (the error records are logged).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap
from typing import Any

import pytest

pytestmark = pytest.mark.flink

pytest.importorskip("pyflink")

from support import hostile_key_agents as hk  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else pathlib.Path(sys.executable))

RECORDS = [
    {"key": "k0", "out": {"key": "a", "n": 1}},
    {"key": "k1", "fail": "boom"},
    {"key": "k2", "out": {"key": "b", "n": "seven"}},
    {"key": "k3", "out": None},
    {"key": "k4", "out": {"n": 4}},  # "key" is NOT NULL in the schema
    {"key": "k5", "out": ("c", 5)},
]

STRINGS = [{"key": "s0", "out": "hello"}, {"key": "s1", "fail": "bang"},
           {"key": "s2", "out": 42}, {"key": "s3", "out": "world"}]


def _short(err: dict[str, Any]) -> dict[str, Any]:
    return {k: err[k] for k in ("key", "seq", "action", "error_type")}


def run_datastream_job() -> dict[str, list[Any]]:
    from pyflink.common import Types
    from pyflink.table import DataTypes, Schema, StreamTableEnvironment

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.compat import AgentsExecutionEnvironment as ApacheShaped
    from flink_agents_py.flink import create_stream_environment

    pickled = Types.PICKLED_BYTE_ARRAY()
    env = create_stream_environment(execution_mode="thread", restart_attempts=0)
    t_env = StreamTableEnvironment.create(env)
    agents = AgentsExecutionEnvironment.flink(env, metrics=False, t_env=t_env)
    job = agents.from_datastream(env.from_collection(RECORDS, type_info=pickled)).apply(
        hk.EmitOrFail(), name="table")
    schema = (Schema.new_builder().column("key", DataTypes.STRING().not_null())
              .column("n", DataTypes.INT()).build())
    table = job.to_table(schema, Types.ROW_NAMED(["key", "n"], [Types.STRING(), Types.INT()]))
    rows = t_env.to_data_stream(table).map(lambda r: ["row", list(r)], output_type=pickled)
    errors = job.errors_datastream().map(lambda e: ["err", e], output_type=pickled)

    compat = ApacheShaped.get_execution_environment(env=env, t_env=t_env)
    typed = compat.from_datastream(input=env.from_collection(STRINGS, type_info=pickled),
                                   key_selector=lambda r: r["key"]).apply(hk.EmitOrFail())
    strings = typed.to_datastream(output_type=Types.STRING()).map(
        lambda s: ["str", s], output_type=pickled)
    string_errors = typed.errors_datastream().map(lambda e: ["str_err", e], output_type=pickled)
    got: dict[str, list[Any]] = {"row": [], "err": [], "str": [], "str_err": []}
    with rows.union(errors, strings, string_errors).execute_and_collect("typed") as it:
        for kind, value in it:
            got[kind].append(value)
    return got


@pytest.mark.timeout(300)
def test_failed_actions_and_misfit_outputs_reach_the_error_output_and_good_rows_the_table():
    got = run_datastream_job()
    assert sorted(got["row"]) == [["a", 1], ["c", 5]]
    errors = {e["key"]: e for e in got["err"]}
    assert sorted(map(_short, errors.values()), key=lambda e: e["key"]) == [
        {"key": "k1", "seq": 0, "action": "on_input", "error_type": "ValueError"},
        {"key": "k2", "seq": 0, "action": "on_input", "error_type": "OutputTypeError"},
        {"key": "k3", "seq": 0, "action": "on_input", "error_type": "OutputTypeError"},
        {"key": "k4", "seq": 0, "action": "on_input", "error_type": "OutputTypeError"}]
    assert errors["k1"]["message"] == "boom"
    assert errors["k2"]["message"].startswith(
        "to_table: field 'n' of the agent output {'key': 'b', 'n': 'seven'} is 'seven' (str), "
        "which its declared INT column cannot hold: emit an int there")
    assert errors["k2"]["input"] == RECORDS[2]
    assert errors["k2"]["execution_id"] == "r0/on_input"
    assert "the agent output is None" in errors["k3"]["message"]
    assert ("field 'key' of the agent output {'n': 4} is missing or None, and the schema "
            "declares it NOT NULL") in errors["k4"]["message"]

    assert sorted(got["str"]) == ["hello", "world"]
    by_key = {e["key"]: e for e in got["str_err"]}
    assert sorted(by_key) == ["s1", "s2"]
    assert by_key["s1"]["error_type"] == "ValueError"
    assert by_key["s2"]["message"].startswith(
        "to_datastream: the value of the agent output 42 is 42 (int), which its declared "
        "STRING column cannot hold: emit a str there")


AGENT = '''
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


class Review(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        row = event.input
        if row["text"] == "boom":
            raise ValueError("boom!")
        if row["text"] == "none":
            ctx.send_event(OutputEvent(output=None))
            return
        words = len(row["text"].split())
        ctx.send_event(OutputEvent(output={"key": row["key"],
                                           "words": words if words < 3 else str(words)}))
'''

MAIN = '''
import json

from pyflink.common import Types
from pyflink.common.typeinfo import ExternalTypeInfo
from pyflink.datastream import KeySelector, StreamExecutionEnvironment
from pyflink.table import DataTypes, Schema, StreamTableEnvironment

from flink_agents_py.compat import AgentsExecutionEnvironment
from review_agent import Review


class ByKey(KeySelector):
    def get_key(self, value):
        return value.key


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
t_env = StreamTableEnvironment.create(env)
t_env.execute_sql("""
    CREATE TEMPORARY VIEW reviews AS
    SELECT CAST(k AS STRING) AS key, CAST(t AS STRING) AS text FROM (VALUES
        ('a', 'good one'), ('b', 'boom'), ('c', 'none'), ('d', 'too many words'),
        ('e', 'fine')) AS v(k, t)
""")
agents_env = AgentsExecutionEnvironment.get_execution_environment(env=env, t_env=t_env)
output_type = ExternalTypeInfo(Types.ROW_NAMED(["key", "words"], [Types.STRING(), Types.INT()]))
schema = (Schema.new_builder().column("key", DataTypes.STRING())
          .column("words", DataTypes.INT()).build())
out = (agents_env.from_table(input=t_env.from_path("reviews"), key_selector=ByKey())
       .apply(Review()).to_table(schema=schema, output_type=output_type))
with out.execute().collect() as rows:
    print(json.dumps(sorted([list(r) for r in rows])))
'''


@pytest.mark.timeout(300)
def test_a_table_job_of_an_apache_shaped_program_keeps_its_good_rows(tmp_path):
    (tmp_path / "review_agent.py").write_text(textwrap.dedent(AGENT))
    (tmp_path / "main.py").write_text(textwrap.dedent(MAIN))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if os.environ.get("PYTHONPATH"):  # a work tree's package, not the venv's editable one
        env["PYTHONPATH"] = os.pathsep.join(
            os.path.abspath(p) for p in os.environ["PYTHONPATH"].split(os.pathsep) if p)
    res = subprocess.run([PYTHON, "main.py"], cwd=tmp_path, capture_output=True, text=True,
                         env=env, timeout=280, check=False)
    assert res.returncode == 0, res.stderr[-4000:]
    assert json.loads(res.stdout.strip().splitlines()[-1]) == [["a", 2], ["e", 1]]
