"""An async (pub/sub) external sub-agent's run under a crash on a MiniCluster.

One job (checkpoints every 300 ms, fixed-delay restart). Keys ``k0`` and ``k1`` each submit
one remote run and poll it; on the first attempt no run completes. ``CrashWhilePolling``
fails the job once a completed checkpoint covers ``k0``'s recorded submit. The restored
attempt replays the submit (the remote is not asked to start the run again) and polls on
to the end: one output per key at the exactly-once collect sink, ``k0``'s run submitted
once, its result fetched under the run id the first attempt submitted.
"""

from __future__ import annotations

import pathlib

import pytest

pytestmark = pytest.mark.flink

pyflink = pytest.importorskip("pyflink")

from support import async_remote_agents as ar  # noqa: E402
from support.crash import crash_environment, pace, read_counts  # noqa: E402

N_PAD = 120  # paced source records after the real ones: ~6 s of open input


def run_job(d: pathlib.Path) -> list[dict]:
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    from flink_agents_py import AgentsExecutionEnvironment

    env = crash_environment(d, interval_ms=300, restart_attempts=2)
    records = (
        env.from_source(NumberSequenceSource(0, N_PAD), WatermarkStrategy.no_watermarks(), "seq")
        .map(pace, output_type=Types.LONG())
        .map(
            lambda n: {"key": f"k{n}"} if n < 2 else {"key": "pad", "pad": True},
            output_type=Types.PICKLED_BYTE_ARRAY(),
        )
    )
    agents = AgentsExecutionEnvironment.flink(env, failpoint=ar.CrashWhilePolling(str(d), "k0"))
    out = agents.from_datastream(records).apply(ar.build(str(d))).to_datastream()
    with out.execute_and_collect("async-subagent-crash") as results:
        return list(results)


def test_a_polled_async_run_survives_a_crash_submitted_once(tmp_path):
    d = tmp_path / "s"
    outputs = run_job(d)

    assert (d / "crashed").exists(), "the failpoint never fired: the scenario did not play out"
    assert sorted(o["key"] for o in outputs) == ["k0", "k1"]  # one output per key, once
    runs = {}
    for o in outputs:
        assert o["error"] is None and o["result"]["remote"] == o["key"], o
        runs[o["key"]] = o["result"]["run"]
    assert len(set(runs.values())) == 2
    counts = read_counts(str(d))
    assert counts[("submit", "k0")] == 1  # recorded and checkpointed: replayed, not re-sent
    # (the crashed attempt's I/O threads may poll on until Flink cancels them: once the
    # marker exists they see the run completed and fetch it too; a fetch is idempotent)
    assert 1 <= counts[("fetch", "k0")] <= 2
    assert 1 <= counts[("submit", "k1")] <= 2 and 1 <= counts[("fetch", "k1")] <= 2
    submitted = sorted(p.name for p in (d / "runs").iterdir())
    expected = sorted(r.replace("/", "_").replace('"', "") for r in runs.values())
    assert set(expected) <= set(submitted)  # fetched from the runs the first attempt made
