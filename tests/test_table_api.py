"""Table API in and out on the Flink runner: ``from_table`` / ``to_table``.

The Flink test runs a user's script from a temporary directory, as a user does: a table
declared in SQL goes through an agent (rows arrive as dicts by field name), the outputs come
back as a table of declared field types and are queried with SQL. The unit tests check the
row conversions and the Flink Agents-style environment's forwarding without a JVM.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("pyflink")

from pyflink.common import Row, Types  # noqa: E402

from flink_agents_py.flink._builder import (  # noqa: E402
    FlinkAgentBuilder,
    FlinkExecutionEnvironment,
    _field_kinds,
    _output_as_row,
    _row_as_dict,
)

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else pathlib.Path(sys.executable))

USER_AGENT = '''
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


class Review(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        row = event.input  # a dict by the table's field names
        seen = (ctx.short_term_memory.get("seen") or 0) + 1
        ctx.short_term_memory.set("seen", seen)
        # "score" is left out: a declared field an output lacks is null
        ctx.send_event(OutputEvent(output={
            "key": ctx.key, "words": len(row["text"].split()), "seen": seen}))
'''

USER_MAIN = '''
import json

from pyflink.common import Types
from pyflink.table import StreamTableEnvironment

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.flink import create_stream_environment
from review_agent import Review

env = create_stream_environment()
t_env = StreamTableEnvironment.create(env)
t_env.execute_sql("""
    CREATE TEMPORARY VIEW reviews AS
    SELECT CAST(k AS STRING) AS key, CAST(t AS STRING) AS text FROM (VALUES
        ('a', 'good'), ('b', 'bad value for money'), ('a', 'great product'),
        ('c', 'fine')) AS v(k, t)
""")
agents = AgentsExecutionEnvironment.flink(env)
out = agents.from_table(t_env.from_path("reviews")).apply(Review()).to_table(
    output_type=Types.ROW_NAMED(["key", "words", "seen", "score"],
                                [Types.STRING(), Types.INT(), Types.LONG(), Types.DOUBLE()]))
t_env.create_temporary_view("verdicts", out)
query = "SELECT key, words, seen, score IS NULL FROM verdicts WHERE words >= 2"
with t_env.execute_sql(query).collect() as rows:
    print(json.dumps(sorted([list(r) for r in rows])))
'''


@pytest.mark.flink
def test_an_agent_reads_a_sql_table_and_its_outputs_are_queried_with_sql(tmp_path):
    (tmp_path / "review_agent.py").write_text(textwrap.dedent(USER_AGENT))
    (tmp_path / "main.py").write_text(textwrap.dedent(USER_MAIN))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([PYTHON, "main.py"], cwd=tmp_path, capture_output=True, text=True,
                         env=env, timeout=300, check=False)
    assert res.returncode == 0, res.stderr[-4000:]
    rows = json.loads(res.stdout.strip().splitlines()[-1])
    # key "a" holds its count in keyed state across its two rows: "great product" is its 2nd
    assert rows == [["a", 2, 2, True], ["b", 4, 1, True]]


def test_a_row_becomes_a_dict_by_field_name():
    assert _row_as_dict(["key", "text"], Row("a", "hi")) == {"key": "a", "text": "hi"}


def test_outputs_fill_the_declared_fields():
    names = ["key", "n"]
    assert list(_output_as_row(names, {"n": 3, "key": "a", "extra": 1})) == ["a", 3]
    assert list(_output_as_row(names, {"key": "a"})) == ["a", None]
    assert list(_output_as_row(names, ("a", 3))) == ["a", 3]
    assert list(_output_as_row(["text"], "hello")) == ["hello"]
    with pytest.raises(TypeError, match=r"does not fit the declared fields \['key', 'n'\]"):
        _output_as_row(names, "hello")


def test_outputs_are_checked_against_the_declared_column_types():
    row_type = Types.ROW_NAMED(["s", "i", "d", "b", "rows"],
                               [Types.STRING(), Types.INT(), Types.DOUBLE(), Types.BOOLEAN(),
                                Types.LIST(Types.INT())])
    kinds = _field_kinds(row_type)
    assert kinds == ["STRING", "INT", "DOUBLE", "BOOLEAN", None]  # a list is not checked
    names = list(row_type.get_field_names())
    row = _output_as_row(names, {"s": "x", "i": 3, "d": 2, "b": False, "rows": [1]}, kinds)
    assert list(row) == ["x", 3, 2.0, False, [1]] and type(row[2]) is float
    assert list(_output_as_row(names, {}, kinds)) == [None] * 5
    for output, says in [
            ({"i": True}, "field 'i' of the agent output {'i': True} is True (bool), which its "
                          "declared INT column cannot hold: emit an int there"),
            ({"i": 2 ** 31}, "is 2147483648 (int, beyond the range of 32-bit integers)"),
            ({"d": "1.5"}, "field 'd' of the agent output {'d': '1.5'} is '1.5' (str), which "
                           "its declared DOUBLE column cannot hold: emit a float or an int"),
            (("x", 1, 1.0, 1, []), "field 'b' of the agent output ('x', 1, 1.0, 1, []) is 1 "
                                   "(int), which its declared BOOLEAN column"),
            ({"s": 5}, "field 's' of the agent output {'s': 5} is 5 (int), which its declared "
                       "STRING column cannot hold: emit a str there, or None for null")]:
        with pytest.raises(TypeError) as e:
            _output_as_row(names, output, kinds)
        assert says in str(e.value), str(e.value)


def test_to_table_names_a_missing_row_type():
    builder = FlinkAgentBuilder(FlinkExecutionEnvironment(object()), ds=None,
                                key_selector=lambda r: r)
    builder._result = object()
    with pytest.raises(ValueError, match="output_type must be a row type"):
        builder.to_table(output_type=Types.STRING())


def test_the_flink_agents_environment_forwards_from_table_and_to_table(monkeypatch):
    from flink_agents_py.compat import AgentsExecutionEnvironment

    calls = []

    class Builder:
        def apply(self, agent, name=None):
            return self

        def to_table(self, schema, output_type):
            calls.append(("to_table", schema, output_type))
            return "table-out"

    compat = AgentsExecutionEnvironment.get_execution_environment(object(), t_env="t")
    assert compat.flink.t_env == "t"
    def from_table(table, key_selector=None):
        calls.append(("from", table))
        return Builder()

    monkeypatch.setattr(compat.flink, "from_table", from_table)
    assert compat.from_table("table-in").to_table("schema", "row-type") == "table-out"
    assert calls == [("from", "table-in"), ("to_table", "schema", "row-type")]


def test_a_declared_type_says_what_it_holds_and_what_it_refuses():
    from pyflink.common.typeinfo import ExternalTypeInfo
    from pyflink.table import DataTypes, Schema

    from flink_agents_py.flink._typed_outputs import OutputTypeError, contract_of

    schema = (Schema.new_builder().column("key", DataTypes.STRING())
              .column("n", "INT NOT NULL").primary_key("key").build())
    rows = contract_of(ExternalTypeInfo(Types.ROW_NAMED(["key", "n"],
                                                         [Types.STRING(), Types.INT()])), schema)
    assert rows.not_null == frozenset({"key", "n"})  # a primary key's column is NOT NULL too
    assert list(rows.convert({"key": "a", "n": 1})) == ["a", 1]
    for output, says in [(None, "the agent output is None"),
                         ({"key": "a"}, "field 'n' of the agent output {'key': 'a'} is missing "
                                        "or None, and the schema declares it NOT NULL"),
                         ({"key": "a", "n": 1.5}, "is 1.5 (float), which its declared INT")]:
        with pytest.raises(OutputTypeError, match=None) as e:
            rows.convert(output)
        assert says in str(e.value)
    floats = contract_of(Types.DOUBLE(), where="to_datastream")
    assert floats.convert(2) == 2.0 and type(floats.convert(2)) is float
    with pytest.raises(OutputTypeError, match="to_datastream: the agent output is None"):
        floats.convert(None)
    assert contract_of(None) is None and contract_of(Types.PICKLED_BYTE_ARRAY()) is None
    anything = contract_of(Types.LIST(Types.INT()), where="to_datastream")
    assert anything.convert([1, "x"]) == [1, "x"]  # not checked: Flink's serializer is


def test_the_map_after_the_operator_logs_what_reaches_it_and_does_not_fit(caplog):
    from pyflink.datastream import OutputTag

    from flink_agents_py.flink._typed_outputs import TypedOutputs, contract_of

    to_rows = TypedOutputs(contract_of(Types.ROW_NAMED(["key"], [Types.STRING()])))
    record = {"key": "b", "seq": 0, "action": "on_input", "error_type": "ValueError",
              "message": "boom!"}
    with caplog.at_level("WARNING", logger="flink_agents_py.flink"):
        assert [list(r) for r in to_rows({"key": "a"})] == [["a"]]
        assert list(to_rows((OutputTag("agent-errors", Types.PICKLED_BYTE_ARRAY()), record))) \
            == []
        assert list(to_rows({"key": 7})) == []
    logged = [r.getMessage() for r in caplog.records]
    assert ("to_table: an error record of the agent, for key 'b' (input 0, action "
            "'on_input'): ValueError: boom!. It is left out of the output: this job was run "
            "without the agent's error output") in logged[0]
    assert "field 'key' of the agent output {'key': 7} is 7 (int)" in logged[1]
