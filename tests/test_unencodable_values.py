"""Values JSON text cannot hold exactly are refused where they enter, naming what and where.

A string with a lone surrogate (``json.loads('"\\ud800"')`` makes one) has no UTF-8 form, and
an integer beyond 64 bits comes back from keyed state as a float. Both used to pass the intake
check and fail later: the keyed-state write failed the whole Flink job on every restart (a
poison pill), and a restore silently turned ``2**70`` into ``1.18e21``. Now the record, the
durable call or the event is refused where it enters, the rest goes on.
"""

from __future__ import annotations

import json

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    InputEvent,
    OutputEvent,
    RunnerContext,
    SerializationError,
    action,
)
from flink_agents_py.io import read_json_lines
from flink_agents_py.runtime._records import loads_record
from flink_agents_py.runtime._serde import to_json_value
from flink_agents_py.testing import check_replay_safety

pytestmark = pytest.mark.timeout(60)

SURROGATE = json.loads('"bad\\ud800"')


class Echo(Agent):
    @action(InputEvent)
    @staticmethod
    def echo(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": event.input["n"]}))


def big(n: int) -> int:
    return 2**70 + n


class BigResult(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        value = await ctx.durable_execute_async(big, event.input["n"])
        ctx.send_event(OutputEvent(output={"n": str(value)}))


@pytest.mark.parametrize(("value", "where"), [
    ({"v": SURROGATE}, "$.v"),
    ({"v": [1, {"w": SURROGATE}]}, "$.v[1].w"),
    ({SURROGATE: 1}, "a map key"),
    ({"v": 2**64}, "$.v"),
    ({"v": [-(2**63) - 1]}, "$.v[0]"),
])
def test_the_value_and_its_place_are_named(value, where):
    with pytest.raises(SerializationError) as err:
        to_json_value(value, "input record")
    assert where in str(err.value)
    assert ("lone surrogate" in str(err.value)) or ("beyond 64 bits" in str(err.value))


def test_integers_up_to_64_bits_and_valid_text_pass():
    ok = {"u": 2**64 - 1, "s": -(2**63), "t": "naïve ☃", "f": 0.5}
    assert to_json_value(ok, "x") == ok


def test_a_bad_record_goes_to_the_error_output_with_its_position_and_the_others_run():
    records = [{"key": "a", "n": 0}, {"key": "a", "n": 1, "v": SURROGATE},
               {"key": "a", "n": 2, "big": 2**65}, {"key": "a", "n": 3}]
    res = AgentsExecutionEnvironment.local().from_list(records).apply(Echo()).run()
    assert [o["n"] for o in res.outputs] == [0, 3]
    assert [(e.key, e.action, e.execution_id) for e in res.errors] == [
        ("a", "<input>", "record 1"), ("a", "<input>", "record 2")]
    assert "lone surrogate" in res.errors[0].message
    assert "'bad\\ud800'" in res.errors[0].input  # the record, printable
    assert "beyond 64 bits" in res.errors[1].message and "2**65" not in res.errors[1].input
    assert str(2**65) in res.errors[1].input


def test_a_result_beyond_64_bits_fails_the_call_on_every_path_instead_of_changing():
    """Live and after a restore the action sees the same thing: the call failed with a
    ``SerializationError`` (the result has no exact stored form), not ``2**70`` live and a
    float after the restore."""
    report = check_replay_safety(BigResult(), [{"key": "k", "n": 1}])
    assert report.ok, report.table
    res = AgentsExecutionEnvironment.local().from_list([{"key": "k", "n": 1}]) \
        .apply(BigResult()).run()
    [err] = res.errors
    assert err.error_type == "SerializationError" and "beyond 64 bits" in err.message


def test_a_file_line_with_an_integer_beyond_64_bits_is_a_bad_line_not_a_float(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": 1}\n{"id": 123456789012345678901234567890}\n'
                    '{"id": 18446744073709551615, "f": 0.12345678901234567890123}\n')
    rows = list(read_json_lines(path))
    assert rows[0].record == {"id": 1} and rows[0].error is None
    assert rows[1].record is None and "beyond 64 bits" in rows[1].error["error"]
    assert rows[1].error["line"] == 1
    assert rows[2].record == {"id": 18446744073709551615, "f": 0.12345678901234568}


def test_loads_record_reads_long_digit_runs_in_strings_and_fractions_as_they_are():
    assert loads_record('{"s": "12345678901234567890123", "f": 1.00000000000000000001}') == \
        {"s": "12345678901234567890123", "f": 1.0}
    with pytest.raises(SerializationError, match=r"\$\[1\]"):
        loads_record("[1, -99999999999999999999]")
