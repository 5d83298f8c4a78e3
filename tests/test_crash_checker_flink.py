"""A sample of the crash-everywhere checker's crash points, through the Flink host.

The local checker (``tests/test_crash_checker.py``) restores at every point between two host
callbacks through the local runner's JSON snapshot. The Flink host maps the same state to
keyed state its own way (``flink/_operator.py``: run and memory as JSON strings, the input
queue as a ``MapState``), so here ONE MiniCluster job is crashed three times, each time after
a chosen number of durable calls was recorded (a different point of the run each time) and a
completed checkpoint holds them; Flink restores the keyed state from the checkpoint and the
job goes on. The agent (``support.subgraph_agents.SubgraphAgent``: an internal sub-agent, a deferred
sub-agent and a chat with a tool round, per record) runs with a journal.

Assertions: every crash happened; the outputs, at the exactly-once collect sink, equal the
local fault-free run's per key, in order; no error records; each durable call executed at
least once and at most twice (only calls in flight at a crash run again: the journal answers
the rest); and the local checker passes at a sample of crash points of the same records.
"""

from __future__ import annotations

import collections
import glob
import itertools
import os
import pathlib
import re
from typing import Any

import pytest

pytestmark = [pytest.mark.flink, pytest.mark.timeout(300)]

pyflink = pytest.importorskip("pyflink")

from support import subgraph_agents as sga  # noqa: E402
from support.crash import (  # noqa: E402
    InjectedCrash,
    completed_checkpoint,
    crash_environment,
    log_lines,
)

N_RECORDS = 60  # paced 50 ms apart: ~3 s of input per attempt
KEYS = 4
THRESHOLDS = (24, 16, 16)  # crash k after this many durable calls recorded in attempt k


def record(d: str, n: int) -> dict[str, Any]:
    """Record ``n``: keyed by ``k<n % KEYS>``; its fakes count under ``k<n % KEYS>#<n>``."""
    return {"key": f"k{n % KEYS}#{n}", "dir": d}


def key_of(rec: dict[str, Any]) -> str:
    """The record's key: ``k<n % KEYS>`` (records of one key queue behind each other)."""
    return rec["key"].split("#")[0]


class CrashAtSamples:
    """Crash the job once per attempt, ``THRESHOLDS[k]`` calls into attempt ``k``, once a
    completed checkpoint holds them; marker ``crashed-<k>`` records each crash.

    A new instance is unpickled for every attempt, so counts start from zero each time.
    """

    def __init__(self, d: str) -> None:
        self.d = d
        self.recorded = 0
        self.seen_at: int | None = None  # last completed checkpoint when the threshold was hit

    def attempt(self) -> int:
        return len(glob.glob(os.path.join(self.d, "crashed-*")))

    def __call__(self, point: str, key: Any, info: dict[str, Any]) -> None:
        k = self.attempt()
        if k >= len(THRESHOLDS):
            return
        if point == "call_recorded":
            self.recorded += 1
            if self.recorded == THRESHOLDS[k]:
                self.seen_at = completed_checkpoint(self.d)
        # seen_at + 2: a checkpoint triggered after the threshold completed (one at a time)
        elif self.seen_at is not None and completed_checkpoint(self.d) >= self.seen_at + 2:
            with open(os.path.join(self.d, f"crashed-{k}"), "w") as f:
                f.write(f"{self.recorded} calls, checkpoint {completed_checkpoint(self.d)}")
            raise InjectedCrash(f"injected crash {k} after {self.recorded} recorded calls")


def run_flink(d: pathlib.Path) -> tuple[list[Any], list[Any]]:
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.runtime import SqliteJournal

    env = crash_environment(d, interval_ms=200, restart_attempts=len(THRESHOLDS) + 1)
    base = str(d)
    records = (env.from_source(NumberSequenceSource(0, N_RECORDS - 1),
                               WatermarkStrategy.no_watermarks(), "seq")
               .map(sga.pace, output_type=Types.LONG())
               .map(lambda n: record(base, n), output_type=Types.PICKLED_BYTE_ARRAY()))
    agents = AgentsExecutionEnvironment.flink(
        env, journal=SqliteJournal(str(d / "journal.db")), failpoint=CrashAtSamples(base))
    applied = agents.from_datastream(records, key_selector=key_of).apply(sga.build())
    pickled = Types.PICKLED_BYTE_ARRAY()
    both = applied.to_datastream().map(lambda o: ("out", o), output_type=pickled).union(
        applied.errors_datastream().map(lambda e: ("err", e), output_type=pickled))
    with both.execute_and_collect("crash-checker-sample") as rows:
        rows = list(rows)
    return [v for kind, v in rows if kind == "out"], [v for kind, v in rows if kind == "err"]


def by_key(outputs: list[Any]) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = collections.defaultdict(list)
    for o in outputs:
        grouped[o["key"]].append(o)
    return dict(grouped)


EPOCH = re.compile(r"^(.*)/([0-9a-f]{16})/(r\d+#.*)$")


def without_epochs(grouped: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """``grouped`` with the session epoch cut out of each deferred call's idempotency key.

    A session id is ``<key>/<epoch>/r<seq>``, the epoch drawn from the job's lineage token:
    two jobs (the Flink job and the local run) give a key different ones, while one job's
    failovers keep it. So every output of a key carries one epoch, which is then cut out.
    """
    cut: dict[str, list[Any]] = {}
    for key, outs in grouped.items():
        ids = [EPOCH.fullmatch(o["deferred"]["idempotency_key"]) for o in outs]
        assert all(ids), [o["deferred"]["idempotency_key"] for o in outs]
        assert len({m.group(2) for m in ids if m}) == 1, f"{key}: the epoch changed"
        cut[key] = [{**o, "deferred": {**o["deferred"], "idempotency_key": m.group(1) + "/"
                                       + m.group(3)}} for o, m in zip(outs, ids, strict=True) if m]
    return cut


def test_flink_restores_at_sampled_crash_points_with_the_local_outcome(tmp_path: pathlib.Path):
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.runtime import SqliteJournal
    from flink_agents_py.testing import check_replay_safety

    d = tmp_path / "flink"
    outputs, errors = run_flink(d)

    crashes = sorted(p.name for p in d.glob("crashed-*"))
    assert crashes == [f"crashed-{k}" for k in range(len(THRESHOLDS))], crashes
    assert errors == []

    local_dir = tmp_path / "local"
    local_dir.mkdir()
    records = [record(str(local_dir), n) for n in range(N_RECORDS)]
    expected = AgentsExecutionEnvironment.local().from_list(records, key_of).apply(
        sga.build()).run()
    assert expected.errors == []
    # what the local fault-free run emits, per key and in order; the sink is exactly-once
    assert without_epochs(by_key(outputs)) == without_epochs(by_key(expected.outputs))

    # each call at least once, at most twice: the journal answers what completed before a
    # crash, so only calls in flight then run again
    counts = collections.Counter((who, key) for who, key in log_lines(str(d), "calls.log"))
    local = collections.Counter((who, key) for who, key in log_lines(str(local_dir), "calls.log"))
    assert set(counts) == set(local)
    assert all(1 <= counts[c] <= 2 for c in counts), {c: n for c, n in counts.items() if n > 2}
    again = sum(n - 1 for n in counts.values())
    assert again <= len(THRESHOLDS) * 8, f"{again} calls ran again"
    print(f"\n[flink sample] crashes: {[(d / c).read_text() for c in crashes]}; durable calls "
          f"executed {sum(counts.values())} (fault-free {sum(local.values())}), ran again "
          f"{again}; outputs {len(outputs)}")

    # the same records at a sample of crash points on the local host
    counter = itertools.count()
    report = check_replay_safety(
        sga.build(), [record(str(local_dir), n) for n in range(8)], key_selector=key_of,
        journal_factory=lambda: SqliteJournal(str(tmp_path / f"j{next(counter)}.db")),
        max_points=12)
    report.assert_ok()
