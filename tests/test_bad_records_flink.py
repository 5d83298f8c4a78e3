"""Hostile records on a PyFlink MiniCluster (``from_datastream``): the job goes on, once each.

A record nested 300 levels deep whose action fails: its error row could not be written
(pydantic writes at most 255 levels), which failed the operator, and with it every restart
(the same input comes again). Good records around it, a deep record that runs, and records
the key selector refuses (the default ``"key"`` field missing, a dict key) and a record with
no JSON form (a NaN) must all be accounted for exactly once.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.flink

pytest.importorskip("pyflink")

from support import bad_record_agents as bra  # noqa: E402


@pytest.fixture(scope="module")
def rows() -> dict[str, list[Any]]:
    from pyflink.common import Types

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import create_stream_environment

    records = [{"key": "g", "n": 0}, {"key": "deep-boom", "boom": True, "d": bra.deep(300)},
               {"key": "g", "n": 1}, {"key": "deep-ok", "n": 2, "d": bra.deep(300)},
               {"id": "no key field"}, {"key": {"a": 1}}, {"key": "nan", "x": float("nan")},
               {"key": "g", "n": 3}]
    env = create_stream_environment(execution_mode="thread", restart_attempts=0)
    pickled = Types.PICKLED_BYTE_ARRAY()
    agents = AgentsExecutionEnvironment.flink(env, metrics=False)
    applied = agents.from_datastream(env.from_collection(records, type_info=pickled)).apply(
        bra.Echo())
    out = applied.to_datastream().map(lambda o: ("out", o), output_type=pickled).union(
        applied.errors_datastream().map(lambda e: ("err", e), output_type=pickled))
    got: dict[str, list[Any]] = {"out": [], "err": []}
    with out.execute_and_collect("hostile-records") as results:
        for kind, value in results:
            got[kind].append(value)
    return got


def test_good_records_all_run_once_and_a_deep_record_runs(rows):
    assert sorted((o["key"], o["n"]) for o in rows["out"]) == [
        ("deep-ok", 2), ("g", 0), ("g", 1), ("g", 3)]


def test_a_failed_action_on_a_deeply_nested_record_is_an_error_row_with_its_key(rows):
    failed = [e for e in rows["err"] if e["action"] == "on_input"]
    assert [(e["key"], e["seq"], e["error_type"]) for e in failed] == [
        ("deep-boom", 0, "RuntimeError")]
    shown = failed[0]["input"]  # the record's bounded repr: pydantic cannot write it
    assert isinstance(shown, str) and shown.startswith("{'key': 'deep-boom', 'boom': True")
    assert len(shown) < 1100


def test_records_the_key_selector_refuses_are_error_rows(rows):
    rejected = [(e["error_type"], e["input"]) for e in rows["err"]
                if e["action"] == "<key_selector>"]
    assert sorted(rejected, key=str) == sorted(
        [("UnkeyedRecordError", {"id": "no key field"}), ("TypeError", {"key": {"a": 1}})],
        key=str)
    assert len(rows["err"]) == 4


def test_a_record_with_no_json_form_is_an_error_row_naming_it(rows):
    # its execution_id was empty; rows of records not run say "record" on Flink
    [row] = [e for e in rows["err"] if e["action"] == "<input>"]
    assert (row["key"], row["execution_id"], row["error_type"]) == (
        "nan", "record", "SerializationError")
    assert "nan at $.x has no JSON form" in row["message"]
