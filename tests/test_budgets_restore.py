"""An agent budget across a restore: the subtask starts from what its keys recorded.

An agent budget (``scope="agent"``) is counted in the operator, shared by the subtask's keys;
each call also writes the subtask's spend into its key's keyed memory. A restored subtask
adopted that spend only from a key that called again: keys that had spent and never called
again were forgotten, so new keys after a restore spent the whole share anew. Now the host
reads every restored key's entry before the first call (the local runner from its snapshot,
the Flink operator, in thread mode, from keyed state at its first callback).

The budget: three calls of 15 tokens (``support.budget_restore_agents``). Two keys spend two
of them, the job is "crashed" and restored, then three new keys ask: one is answered, two
are refused. Before the change all three were answered (five calls of a three-call budget).
"""

from __future__ import annotations

import json
import pathlib

import pytest
from support import budget_restore_agents as bra

from flink_agents_py import AgentsExecutionEnvironment

pytestmark = pytest.mark.timeout(240)


def _outcomes(outputs: list[dict]) -> dict[str, object]:
    return {o["key"]: o.get("spent", o.get("refused")) for o in outputs if o["key"] != "hold"}


def test_a_restored_local_job_starts_an_agent_budget_from_the_spend_its_keys_recorded(
        tmp_path: pathlib.Path):
    d = str(tmp_path)
    first = [{"key": k, "dir": d} for k in ("a0", "a1")]
    job = AgentsExecutionEnvironment.local().from_list(first).apply(bra.spender())
    assert _outcomes(job.run().outputs) == {"a0": 15, "a1": 30}
    snapshot = json.loads(json.dumps(job.snapshot()))  # through its JSON form, as stored

    later = first + [{"key": k, "dir": d} for k in ("a2", "a3", "a4")]
    restored = (AgentsExecutionEnvironment.local().from_list(later).apply(bra.spender())
                .restore(snapshot).run())
    assert restored.errors == []
    assert _outcomes(restored.outputs) == {
        "a2": 45, "a3": "budget", "a4": "budget"}


@pytest.mark.flink
def test_a_restored_minicluster_job_starts_an_agent_budget_from_the_spend_its_keys_recorded(
        tmp_path: pathlib.Path):
    pytest.importorskip("pyflink")
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    from flink_agents_py.flink import create_stream_environment

    d = tmp_path / "job"
    (d / "checkpoints").mkdir(parents=True)
    env = create_stream_environment(
        checkpoint_interval_ms=200, restart_attempts=2, restart_delay_s=0.5,
        extra_config={"execution.checkpointing.dir": f"file://{d}/checkpoints",
                      "execution.checkpointing.storage": "filesystem"})
    base = str(d)
    records = (env.from_source(NumberSequenceSource(0, bra.LAST),
                               WatermarkStrategy.no_watermarks(), "seq")
               .map(bra.pace, output_type=Types.LONG())
               .filter(bra.Pick(base))
               .map(lambda n: bra.record_of(base, n), output_type=Types.PICKLED_BYTE_ARRAY()))
    agents = AgentsExecutionEnvironment.flink(env, failpoint=bra.CrashWhenSpent(base))
    out = agents.from_datastream(records).apply(bra.spender()).to_datastream()
    with out.execute_and_collect("budget-restore") as rows:
        outputs = list(rows)
    assert (d / "crashed").exists(), "the failpoint never fired: the scenario did not play out"
    assert _outcomes(outputs) == {"a0": 15, "a1": 30, "a2": 45,
                                  "a3": "budget", "a4": "budget"}


def test_a_restored_job_starts_a_subagents_agent_budget_from_the_spend_its_keys_recorded():
    # the setup of an internal sub-agent: its spend is the key's (``_budget.kid/model``)
    from test_budgets_spend_kept import caller

    from flink_agents_py.api import Budget

    agent = caller(Budget(max_tokens=45, scope="agent"))
    job = AgentsExecutionEnvironment.local().from_list([{"key": "a", "n": 2}]).apply(agent)
    # each call's outputs: the subtask's input tokens after its chat
    assert job.run().outputs == [{"key": "a", "got": [[10], [20]]}]
    snapshot = json.loads(json.dumps(job.snapshot()))

    later = [{"key": "a", "n": 2}] + [{"key": k, "n": 1} for k in "bcd"]
    restored = (AgentsExecutionEnvironment.local().from_list(later)
                .apply(caller(Budget(max_tokens=45, scope="agent"))).restore(snapshot).run())
    got = {o["key"]: o["got"] for o in restored.outputs}
    assert got["b"] == [[30]]  # 20 adopted from key a, then its own 10
    assert all("BudgetExceededError" in str(got[k][0]) for k in "cd"), got
