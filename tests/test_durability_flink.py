"""Durable execution under failure: crash at each interesting point, restore, count calls.

Each scenario runs one record through ``DurableChatAgent`` (a chat whose model asks for two
tools, then answers from them) on a MiniCluster with checkpointing every 300 ms and a
fixed-delay restart. ``CrashOnce`` fails the job once, at a named point, only after a
completed checkpoint covers the scenario's recorded call. Counts are the requests each fake
service received, attempts cut short by the crash included.
"""

from __future__ import annotations

import pathlib

import pytest

pytestmark = pytest.mark.flink

pyflink = pytest.importorskip("pyflink")

from support import durability_agents as da  # noqa: E402
from support.crash import crash_environment  # noqa: E402

N_PAD = 80  # paced source records after the real one: ~4 s of open input

BASE = {"model_r1": 1, "tool_a": 1, "tool_b": 1, "model_r2": 1}

# scenario -> (journal on?, expected requests received for key k0)
EXPECTED = {
    ("after_model_before_tool", False): {**BASE, "tool_a": 2, "tool_b": 2},
    ("after_tool_before_second_model", False): {**BASE, "model_r2": 2},
    ("mid_batch", False): {**BASE, "tool_b": 2},
    ("mid_batch", True): {**BASE, "tool_b": 2},
    ("after_output_before_run_complete", False): {**BASE, "audit": 2},
    ("journal_window", False): {**BASE, "tool_b": 2},
    ("journal_window", True): BASE,
}


def run_scenario(d: pathlib.Path, scenario: str, journal: bool) -> list[dict]:
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.runtime import SqliteJournal

    env = crash_environment(d, interval_ms=300, restart_attempts=2)
    task = {"dir": str(d), "scenario": scenario}
    records = (env.from_source(NumberSequenceSource(0, N_PAD), WatermarkStrategy.no_watermarks(),
                               "seq")
               .map(da.pace, output_type=Types.LONG())
               .filter(lambda n: n == 0)
               .map(lambda n: {**task, "key": f"k{n}"}, output_type=Types.PICKLED_BYTE_ARRAY()))
    agents = AgentsExecutionEnvironment.flink(
        env, journal=SqliteJournal(str(d / "journal.db")) if journal else None,
        failpoint=da.CrashOnce(str(d), scenario))
    out = agents.from_datastream(records).apply(da.DurableChatAgent()).to_datastream()
    with out.execute_and_collect(f"durability-{scenario}") as results:
        return list(results)


@pytest.mark.parametrize(("scenario", "journal"), list(EXPECTED), ids=[
    f"{s}-{'journal' if j else 'state-only'}" for s, j in EXPECTED])
def test_crash_restore_replays_recorded_calls(tmp_path: pathlib.Path, scenario: str, journal: bool):
    d = tmp_path / "s"
    outputs = run_scenario(d, scenario, journal)

    assert (d / "crashed").exists(), "the failpoint never fired: the scenario did not play out"
    # every input gets its output, once, at the exactly-once collect sink
    assert outputs == [{"key": "k0", "answer": '{"a":"A(k0)","b":"B(k0)"}', "error": None}]
    counts = {who: n for (who, key), n in da.read_counts(str(d)).items() if key == "k0"}
    assert counts == EXPECTED[(scenario, journal)]
