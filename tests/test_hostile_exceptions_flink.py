"""An exception whose ``__str__`` raises fails its record alone, on a MiniCluster.

Reporting such a failure read ``str(error)`` for the error row's message (an action's
failure, a key selector's, a durable call's record): that raised in turn, out of the
operator (or the key selector), and ended the job. One job (thread mode) over one key whose
records fail so between good ones: every good record runs, in order, and each failure is an
error row whose message says what could not be read.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.flink

pytest.importorskip("pyflink")

from support import hostile_key_agents as hk  # noqa: E402

UNREADABLE = "<str() of the exception failed: RuntimeError>"


@pytest.fixture(scope="module")
def rows() -> dict[str, list[Any]]:
    from pyflink.common import Types

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import create_stream_environment

    records = [{"k": "a", "n": 0}, {"k": "a", "n": 1, "mode": "raise"}, {"k": "a", "n": 2},
               {"k": "a", "n": 3, "mode": "call"}, {"k": "a", "n": 4},
               {"fail": "x", "n": 5}, {"k": "a", "n": 6}]
    env = create_stream_environment(execution_mode="thread", restart_attempts=0)
    pickled = Types.PICKLED_BYTE_ARRAY()
    applied = (AgentsExecutionEnvironment.flink(env, metrics=False)
               .from_datastream(env.from_collection(records, type_info=pickled),
                                key_selector=hk.key_or_strange_failure)
               .apply(hk.FailStrangely()))
    out = applied.to_datastream().map(lambda o: ("out", o), output_type=pickled).union(
        applied.errors_datastream().map(lambda e: ("err", e), output_type=pickled))
    got: dict[str, list[Any]] = {"out": [], "err": []}
    with out.execute_and_collect("hostile-exceptions") as results:
        for kind, value in results:
            got[kind].append(value)
    return got


@pytest.mark.timeout(300)
def test_the_good_records_all_run_in_order_and_the_durable_call_failure_is_caught(rows):
    assert rows["out"] == [{"key": "a", "n": 0}, {"key": "a", "n": 2},
                           {"key": "a", "n": 3, "caught": "StrRaises"},
                           {"key": "a", "n": 4}, {"key": "a", "n": 6}]


@pytest.mark.timeout(300)
def test_each_failure_is_an_error_row_saying_its_message_could_not_be_read(rows):
    by_action = {e["action"]: e for e in rows["err"]}
    assert sorted(by_action) == ["<key_selector>", "on_input"]
    assert all(e["error_type"] == "StrRaises" and e["message"] == UNREADABLE
               for e in rows["err"])
    assert by_action["on_input"]["key"] == "a" and by_action["on_input"]["seq"] == 1
