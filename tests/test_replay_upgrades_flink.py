"""Issue 28 on a MiniCluster: partial and lambda identity and ``ctx.patched`` across a restore.

One job (``replay_upgrade_agents``): two runs record their first calls, a checkpoint covers
them, the job is crashed and restores with the "new code": the run whose ``functools.partial``
calls now come in the other order fails with ``ReplayDivergenceError`` (nobody gets another
call's price), the run recorded before ``ctx.patched("v2")`` keeps its old branch with its
recorded calls, a run started after the restore takes the new branch, and a strict call whose
parameter default the new code changed fails with ``ReplayDivergenceError`` naming it, and so
does one whose function the new code gave a parameter with a default; lambdas over rows
held as ``types.SimpleNamespace`` objects, made in the other order, diverge too.
"""

from __future__ import annotations

import collections
import pathlib

import pytest

pytestmark = [pytest.mark.flink, pytest.mark.timeout(240)]

pyflink = pytest.importorskip("pyflink")

from support import replay_upgrade_agents as rua  # noqa: E402
from support.crash import crash_environment, log_lines  # noqa: E402


def run_job(d: pathlib.Path) -> tuple[list, list]:
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    from flink_agents_py import AgentsExecutionEnvironment

    env = crash_environment(d, interval_ms=200, restart_attempts=2)
    base = str(d)
    kinds = dict(enumerate(rua.KINDS))
    pickled = Types.PICKLED_BYTE_ARRAY()
    records = (env.from_source(NumberSequenceSource(0, rua.LAST),
                               WatermarkStrategy.no_watermarks(), "seq")
               .map(rua.pace, output_type=Types.LONG())
               .filter(rua.Pick(base))
               .map(lambda n: {"key": kinds.get(n, "new"), "kind": kinds.get(n, "new"),
                               "dir": base}, output_type=pickled))
    agents = AgentsExecutionEnvironment.flink(env, failpoint=rua.CrashWhenHeld(base))
    applied = agents.from_datastream(records).apply(rua.Upgraded())
    both = applied.to_datastream().map(lambda o: ("out", o), output_type=pickled).union(
        applied.errors_datastream().map(lambda e: ("err", e), output_type=pickled))
    with both.execute_and_collect("replay-upgrades") as rows:
        rows = list(rows)
    return [v for k, v in rows if k == "out"], [v for k, v in rows if k == "err"]


def test_partial_identity_and_patched_across_a_minicluster_restore(tmp_path: pathlib.Path):
    d = tmp_path / "job"
    outputs, errors = run_job(d)
    assert (d / "crashed").exists(), "the failpoint never fired: the scenario did not play out"

    # the swapped partials, and the swapped lambdas whose code alone tells them apart: a
    # divergence each, not PRICE(apple) handed to pear, nor USD/EUR to the EUR/USD quote
    # and the rows held as SimpleNamespace objects, told apart by what they hold
    assert sorted(e["key"] for e in errors) == ["added", "default", "lambdas", "rows", "swap"]
    for err in errors:
        assert err["error_type"] == "ReplayDivergenceError"
        if err["key"] == "added":  # the recorded call did not run with the new default
            assert "r0/go/c0" in err["message"] and "strict replay" in err["message"]
            assert "'unit' added with a default" in err["message"]
            assert "replay_upgrade_agents:weigh" in err["message"]
            continue
        if err["key"] == "default":  # the recorded USD amount is not handed to the EUR call
            assert "r0/go/c0" in err["message"] and "strict replay" in err["message"]
            assert "default value of its parameter 'currency'" in err["message"]
            continue
        assert "r0/go/c0" in err["message"] and "recorded for r0/go/c1" in err["message"]
    # the run recorded before the patch keeps its old branch, replayed; a new run takes the new
    assert sorted(outputs, key=lambda o: o["key"]) == [
        {"key": "new", "got": ["V2(fig)"], "patched": True},
        {"key": "patch", "got": ["PRICE(fig)", "PRICE(kiwi)"], "patched": False},
    ]
    calls = collections.Counter(tuple(line) for line in log_lines(str(d), "calls.log"))
    assert calls == {("price", "apple"): 2, ("price", "pear"): 2, ("price", "fig"): 1,
                     ("price", "kiwi"): 1, ("price_v2", "fig"): 1, ("quote", "USD", "EUR"): 1,
                     ("quote", "EUR", "USD"): 1, ("convert", "1"): 1, ("convert", "2"): 1,
                     ("weigh", "1"): 1, ("weigh", "2"): 1}
