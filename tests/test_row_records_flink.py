"""A stream of named PyFlink ``Row`` records is keyed by each row's ``key`` field.

Such a row reaches the actions as a dict by field name; keyed as a record without fields, every
row ran under the key ``None``, one after another, sharing one short-term memory. One
MiniCluster job (thread mode) over a ``ROW_NAMED`` stream: two keys keep their own memory,
and a row with no ``key`` field is an error row naming its fields, as a dict would be.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.flink

pytest.importorskip("pyflink")

from support import hostile_key_agents as hk  # noqa: E402


@pytest.fixture(scope="module")
def rows() -> dict[str, list[Any]]:
    from pyflink.common import Row, Types

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import create_stream_environment

    env = create_stream_environment(execution_mode="thread", restart_attempts=0)
    pickled = Types.PICKLED_BYTE_ARRAY()
    keyed = env.from_collection(
        [Row(key=k, x=x) for x, k in enumerate("ababa")],
        type_info=Types.ROW_NAMED(["key", "x"], [Types.STRING(), Types.INT()]))
    unkeyed = env.from_collection(
        [Row(id="r9", x=9)], type_info=Types.ROW_NAMED(["id", "x"], [Types.STRING(), Types.INT()]))
    agents = AgentsExecutionEnvironment.flink(env, metrics=False)
    outs, errors = [], []
    for name, ds in (("keyed", keyed), ("unkeyed", unkeyed)):
        applied = agents.from_datastream(ds).apply(hk.Count(), name=name)
        outs.append(applied.to_datastream().map(lambda o: ("out", o), output_type=pickled))
        errors.append(applied.errors_datastream().map(lambda e: ("err", e), output_type=pickled))
    got: dict[str, list[Any]] = {"out": [], "err": []}
    with outs[0].union(outs[1], *errors).execute_and_collect("row-records") as results:
        for kind, value in results:
            got[kind].append(value)
    return got


@pytest.mark.timeout(300)
def test_named_rows_run_under_their_key_field_each_with_its_own_memory(rows):
    assert sorted(rows["out"], key=lambda o: o["x"]) == [
        {"key": "a", "x": 0, "seen": 1}, {"key": "b", "x": 1, "seen": 1},
        {"key": "a", "x": 2, "seen": 2}, {"key": "b", "x": 3, "seen": 2},
        {"key": "a", "x": 4, "seen": 3}]


@pytest.mark.timeout(300)
def test_a_named_row_with_no_key_field_is_an_error_row_naming_its_fields(rows):
    [error] = rows["err"]
    assert (error["action"], error["error_type"]) == ("<key_selector>", "UnkeyedRecordError")
    assert error["message"].startswith(
        'the Row record has no "key" field (its fields: id, x) and no key_selector was given')
    assert 'key_selector=lambda r: r["id"]' in error["message"]
