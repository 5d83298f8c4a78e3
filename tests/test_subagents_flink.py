"""ctx.chat, an internal sub-agent and a deferred external one under a crash on a MiniCluster.

One job (checkpoints every 300 ms, fixed-delay restart). Key ``k0``'s run submits an
internal child, awaits a deferred remote call, then a chat whose model asks for a slow tool.
``CrashOnce`` fails the job once, while that tool is in flight, after a completed checkpoint
covers the chat's first model answer, the child's completion and the deferred call. Counts
are the requests each fake received, attempts cut short by the crash included.
"""

from __future__ import annotations

import pathlib
import re

import pytest

pytestmark = pytest.mark.flink

pyflink = pytest.importorskip("pyflink")

from support import subgraph_agents as sa  # noqa: E402
from support.crash import crash_environment  # noqa: E402

N_PAD = 120  # paced source records after the real ones: ~6 s of open input


def run_job(d: pathlib.Path) -> list[dict]:
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    from flink_agents_py import AgentsExecutionEnvironment

    env = crash_environment(d, interval_ms=300, restart_attempts=2)
    base = {"dir": str(d)}
    records = (env.from_source(NumberSequenceSource(0, N_PAD), WatermarkStrategy.no_watermarks(),
                               "seq")
               .map(sa.pace, output_type=Types.LONG())
               .filter(lambda n: n < 2)
               .map(lambda n: {**base, "key": f"k{n}", "slow": n == 0},
                    output_type=Types.PICKLED_BYTE_ARRAY()))
    agents = AgentsExecutionEnvironment.flink(env, failpoint=sa.CrashOnce(str(d), "k0"))
    out = agents.from_datastream(records).apply(sa.build()).to_datastream()
    with out.execute_and_collect("subgraph-crash") as results:
        return list(results)


def expected_output(key: str, idempotency_key: str) -> dict:
    return {"key": key, "answer": f'{{"looked_up":"L({key})"}}',
            "child": [{"a": f"child_a({key})", "b": f"child_b({key})"}], "child_ok": True,
            "deferred": {"remote": key, "idempotency_key": idempotency_key}}


def session_keys(outputs: list[dict]) -> dict[str, str]:
    """Each output's deferred idempotency key (``session_id#call_id``), by record key.

    A Flink job has a lineage token: a session id is ``<key>/<session epoch>/r<seq>``, the
    epoch kept in the key's state and, for a key the checkpoint does not hold, drawn from
    the job's lineage again (the same across the failover).
    """
    found = {o["key"]: o["deferred"]["idempotency_key"] for o in outputs}
    for key, said in found.items():
        assert re.fullmatch(rf'"{key}"/[0-9a-f]{{16}}/r0#r0/go/c1', said), said
    return found


def test_crash_after_chat_round_1_and_subagents_replays_their_recorded_calls(tmp_path):
    d = tmp_path / "s"
    outputs = run_job(d)

    assert (d / "crashed").exists(), "the failpoint never fired: the scenario did not play out"
    # one output per input, once, at the exactly-once collect sink
    ids = session_keys(outputs)
    assert sorted(outputs, key=lambda o: o["key"]) == [expected_output("k0", ids["k0"]),
                                                       expected_output("k1", ids["k1"])]
    counts = sa.read_counts(str(d))
    k0 = {who: n for (who, key), n in counts.items() if key == "k0"}
    assert k0 == {
        "model_r1": 1,   # recorded and checkpointed: replayed after the restore
        "child_a": 1,    # the child completed before the checkpoint: not run again
        "child_b": 1,
        "deferred": 1,   # recorded and checkpointed: replayed
        "tool": 2,       # in flight at the crash: asked again
        "model_r2": 1,   # came after the restore only
    }
    k1 = {who: n for (who, key), n in counts.items() if key == "k1"}
    assert set(k1) == set(k0) and all(1 <= n <= 2 for n in k1.values())
