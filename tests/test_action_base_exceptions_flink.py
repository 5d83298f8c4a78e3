"""An action raising what is not an ``Exception`` fails its record alone, on a MiniCluster.

A ``CancelledError`` or ``GeneratorExit`` of the action's own, or a user's ``BaseException``
subclass, left the operator's callback with the action live: with restarts the job
restored into the same action and raised again for ever; with none (as here) the job failed.
Now each is an error row with its key and position, and every other record runs; so is a
record whose key selector raises a ``CancelledError`` of its own (a ``<key_selector>`` row).
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.flink

pytest.importorskip("pyflink")

from support import base_exception_agents as be  # noqa: E402


@pytest.mark.timeout(300)
def test_each_failing_record_is_an_error_row_and_the_job_goes_on():
    from pyflink.common import Types

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import create_stream_environment

    env = create_stream_environment(execution_mode="thread", restart_attempts=0)
    pickled = Types.PICKLED_BYTE_ARRAY()
    applied = (
        AgentsExecutionEnvironment.flink(env, metrics=False)
        .from_datastream(
            env.from_collection(
                [*be.RECORDS, {"key": "a", "n": 8, "cancel": True}], type_info=pickled
            ),
            key_selector=be.key_or_cancelled,
        )
        .apply(be.RaiseBase())
    )
    out = (
        applied.to_datastream()
        .map(lambda o: ("out", o), output_type=pickled)
        .union(applied.errors_datastream().map(lambda e: ("err", e), output_type=pickled))
    )
    got: dict[str, list[Any]] = {"out": [], "err": []}
    with out.execute_and_collect("base-exceptions") as results:
        for kind, value in results:
            got[kind].append(value)
    assert sorted(got["out"], key=lambda o: o["n"]) == be.GOOD
    rejected = [e for e in got["err"] if e["action"] == "<key_selector>"]
    assert [(e["error_type"], e["message"]) for e in rejected] == [
        ("CancelledError", "no key for 8")
    ]
    assert sorted(
        (e["key"], e["seq"], e["error_type"], e["message"].split(" (at ")[0])
        for e in got["err"]
        if e not in rejected
    ) == sorted(be.FAILED)
