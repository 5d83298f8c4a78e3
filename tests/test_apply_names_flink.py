"""An agent applied twice in one job without ``name=`` is refused at ``apply``, naming the fix.

Both operators took the agent's class name as their uid; Flink refused the job only at
submission (``Hash collision on user-specified ID "agent-Echo"``), without a word on
``name=``. A later job on the same environment applies the agent again freely (a job's
operators are forgotten once it is submitted).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.flink

pytest.importorskip("pyflink")

from support import hostile_key_agents as hk  # noqa: E402

from flink_agents_py.api import UsageError  # noqa: E402


@pytest.mark.timeout(300)
def test_a_second_apply_under_the_same_name_is_refused_and_a_later_job_may_reuse_it():
    from pyflink.common import Types

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import create_stream_environment

    env = create_stream_environment(execution_mode="thread", restart_attempts=0)
    agents = AgentsExecutionEnvironment.flink(env, metrics=False)
    pickled = Types.PICKLED_BYTE_ARRAY()

    def records(k: str):
        return env.from_collection([{"k": k, "n": 1}], type_info=pickled)

    first = agents.from_datastream(records("a"), key_selector=hk.key_of).apply(hk.Echo())
    with pytest.raises(UsageError) as refused:
        agents.from_datastream(records("b"), key_selector=hk.key_of).apply(hk.Echo())
    assert str(refused.value).startswith(
        "apply: this job already has an agent operator named 'Echo' (uid 'agent-Echo'")
    assert "apply(agent, name='Echo-2')" in str(refused.value)
    second = agents.from_datastream(records("b"), key_selector=hk.key_of).apply(
        hk.Echo(), name="Echo-2")
    out = first.to_datastream().union(second.to_datastream())
    with out.execute_and_collect("two-echoes") as results:
        assert sorted(r["key"] for r in results) == ["a", "b"]
    # the next job on this environment starts with no operators
    again = agents.from_datastream(records("c"), key_selector=hk.key_of).apply(hk.Echo())
    with again.to_datastream().execute_and_collect("echo-again") as results:
        assert [r["key"] for r in results] == ["c"]
