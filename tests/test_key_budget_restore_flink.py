"""A per-key budget across a crash of a MiniCluster job: nothing counted twice, nothing lost.

A key's chats through a budgeted setup go through a ledger the operator keeps in memory
(``runtime._key_spend``), and each answered call's spend is settled into the key's keyed
memory (``_budget.model``) when its action ends. Here key ``a`` spends two of its three
calls, a completed checkpoint holds them, the job is crashed (a failpoint) and Flink
restores it in a new task: the key's next three chats get 45 (its third call) and two
refusals, as the fault-free run would, and the model was asked exactly three times (the
two answers under the checkpoint are never asked again).
"""

from __future__ import annotations

import pathlib

import pytest
from support import key_budget_restore_agents as kb
from support.crash import crash_environment, read_counts

from flink_agents_py import AgentsExecutionEnvironment

pytestmark = [pytest.mark.flink, pytest.mark.timeout(240)]


def test_a_keys_budget_after_a_crash_counts_its_checkpointed_calls_once(tmp_path: pathlib.Path):
    pytest.importorskip("pyflink")
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    d = tmp_path / "job"
    env = crash_environment(d, interval_ms=200, restart_attempts=2)
    base = str(d)
    records = (
        env.from_source(NumberSequenceSource(0, kb.LAST), WatermarkStrategy.no_watermarks(), "seq")
        .map(kb.pace, output_type=Types.LONG())
        .filter(kb.KeyPick(base))
        .map(lambda n: kb.record_of(base, n), output_type=Types.PICKLED_BYTE_ARRAY())
    )
    agents = AgentsExecutionEnvironment.flink(env, failpoint=kb.CrashWhenKeySpent(base))
    out = agents.from_datastream(records).apply(kb.key_spender(base)).to_datastream()
    with out.execute_and_collect("key-budget-restore") as rows:
        outputs = list(rows)
    assert (d / "crashed").exists(), "the failpoint never fired: the scenario did not play out"
    got = {o["tag"]: o.get("spent", o.get("refused")) for o in outputs if o["tag"] != "hold"}
    assert got == {"a0": 15, "a1": 30, "a2": 45, "a3": "budget", "a4": "budget"}
    assert read_counts(base) == {("model", "a0"): 1, ("model", "a1"): 1, ("model", "a2"): 1}
