"""``to_table`` outputs whose values do not fit their declared column types, on a MiniCluster.

An int in a ``DOUBLE`` column (an agent's ``{"score": 4}``) and a string in an ``INT`` one
each failed the job with a bare Java ``ClassCastException`` (``Long cannot be cast to
Double``) that named neither the output nor the field. Now an int fills a float column as a
float, and an output with a value its column cannot hold becomes an error record naming the
field, its type, the value and the output, while the job goes on with the other rows.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.flink

pytest.importorskip("pyflink")

from support import hostile_key_agents as hk  # noqa: E402

COLUMNS = (["key", "score", "ratio", "n", "ok"], ["STRING", "DOUBLE", "FLOAT", "INT", "BOOLEAN"])


# One job serves both tests: each reads the rows of its own output keys. The value its column
# cannot hold comes first, so the rows after it show that the job went on.
FITTING = [{"key": "a", "score": 4, "ratio": 2, "n": 7, "ok": True},
           {"key": "b", "score": 0.5, "ratio": None, "n": -(2 ** 31)},
           ("c", 1.0, 3.5, 2 ** 31 - 1, False)]
MISFIT = [{"key": "e", "n": "seven"}, {"key": "d", "score": 1.5}]


@pytest.fixture(scope="module")
def rows() -> list[list[Any]]:
    """The table's rows from one job over ``MISFIT`` then ``FITTING``, sorted."""
    from pyflink.common import Types

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import create_stream_environment

    env = create_stream_environment(execution_mode="thread", restart_attempts=0)
    records = [{"key": f"k{i}", "out": out} for i, out in enumerate(MISFIT + FITTING)]
    ds = env.from_collection(records, type_info=Types.PICKLED_BYTE_ARRAY())
    names, kinds = COLUMNS
    table = (AgentsExecutionEnvironment.flink(env, metrics=False).from_datastream(ds)
             .apply(hk.EmitOutput())
             .to_table(output_type=Types.ROW_NAMED(names, [getattr(Types, k)() for k in kinds])))
    with table.execute().collect() as got:
        return sorted(list(row) for row in got)


def rows_of(rows: list[list[Any]], keys: str) -> list[list[Any]]:
    """The rows whose ``key`` column is one of ``keys``."""
    return [row for row in rows if row[0] in keys]


@pytest.mark.timeout(300)
def test_ints_fill_float_columns_and_nulls_stay_null(rows):
    assert rows_of(rows, "abc") == [
        ["a", 4.0, 2.0, 7, True], ["b", 0.5, None, -(2 ** 31), None],
        ["c", 1.0, 3.5, 2 ** 31 - 1, False]]


@pytest.mark.timeout(300)
def test_a_value_its_column_cannot_hold_leaves_the_other_rows_and_the_job_running(rows):
    # run as a table job, the error record is logged (tests/test_table_errors_flink.py has
    # it on the error output, naming the field and the output)
    assert rows_of(rows, "de") == [["d", 1.5, None, None, None]]
    assert len(rows) == 4  # every fitting row, and nothing for the misfit one
