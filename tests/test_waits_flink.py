"""Durable waits on a MiniCluster: outside events on the second input, timers, a crash.

One job serves every assertion: four requests wait (one with a 3 s timeout, one with none)
and one sleeps 4 s,
the job is crashed once a checkpoint holds them all waiting, and only then, from the restored
attempt, the outside events come: two approvals, one for no key, one duplicate.
"""

from __future__ import annotations

import functools
import pathlib

import pytest

pytestmark = pytest.mark.flink

pyflink = pytest.importorskip("pyflink")

from support import waits_agents as wa  # noqa: E402
from support.crash import crash_environment, pace, read_counts  # noqa: E402

N_PAD = 100  # paced records after the requests, on each input: ~5 s of open input


def run_job(d: pathlib.Path, mode: str, crash: bool) -> list:
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    from flink_agents_py import AgentsExecutionEnvironment

    env = crash_environment(d, interval_ms=300, restart_attempts=2, execution_mode=mode)
    pickled = Types.PICKLED_BYTE_ARRAY()
    requests = (env.from_source(NumberSequenceSource(0, N_PAD),
                                WatermarkStrategy.no_watermarks(), "requests")
                .map(pace, output_type=Types.LONG())
                .map(functools.partial(wa.request_of, str(d)), output_type=pickled))
    events = (env.from_source(NumberSequenceSource(0, N_PAD),
                              WatermarkStrategy.no_watermarks(), "approvals")
              .map(pace, output_type=Types.LONG())
              .flat_map(wa.GatedEvents(str(d), N_PAD, after_crash=crash), output_type=pickled))
    agents = AgentsExecutionEnvironment.flink(
        env, failpoint=wa.CrashWhileWaiting(str(d)) if crash else None)
    built = agents.from_datastream(requests).connect(events).apply(wa.PadAware())
    both = built.to_datastream().union(built.errors_datastream())
    with both.execute_and_collect("waits") as results:
        return list(results)


@pytest.mark.parametrize(("mode", "crash"), [("thread", True), ("process", False)])
def test_runs_wait_through_a_crash_and_end_by_event_timer_or_end_of_input(tmp_path, mode, crash):
    """Thread mode, crashed while the runs wait: key switching, a restore sweep that leaves
    parked runs. Process mode (no crash: its slow checkpoints would outlast the paced input):
    per-key poll timers, which must not wake a parked run."""
    d = tmp_path / "w"
    got = run_job(d, mode, crash)
    assert (d / "crashed").exists() == crash, "the failpoint did not play out as planned"
    outputs = {o["key"]: o for o in got if "error_type" not in o}
    errors = [e for e in got if "error_type" in e]
    assert set(outputs) == {"a", "b", "c", "d", "e"} and len(outputs) == len(
        [o for o in got if "error_type" not in o]), got
    assert outputs["a"]["approved"] == "yes"
    assert outputs["d"]["approved"] == {"ok": 1}
    assert "within 3 s" in outputs["b"]["timed_out"]  # its processing-time timer fired
    assert "before the end of input" in outputs["c"]["timed_out"]
    assert outputs["e"]["slept"] == 4  # ctx.sleep: a processing-time timer, through the crash
    # the unmatched events: one for a key with no run, one duplicate for 'a'
    assert sorted(e["input"]["correlation_id"] for e in errors) == ["go-a", "go-zz"], errors
    assert {e["error_type"] for e in errors} == {"UnmatchedEventError"}
    # the call each run made before its wait ran once: the restore replayed it
    assert {k: n for (who, k), n in read_counts(str(d)).items()} == {
        "a": 1, "b": 1, "c": 1, "d": 1, "e": 1}


def test_an_event_before_its_wait_opens_is_held_in_keyed_state_then_claimed(tmp_path):
    """Key x waits for its first event; its second event and a stray one come first."""
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import create_stream_environment

    d = tmp_path / "e"
    d.mkdir()
    n = 40
    env = create_stream_environment(execution_mode="thread")
    pickled = Types.PICKLED_BYTE_ARRAY()

    def paced(name):
        return (env.from_source(NumberSequenceSource(0, n), WatermarkStrategy.no_watermarks(),
                                name).map(pace, output_type=Types.LONG()))

    requests = paced("requests").map(functools.partial(wa.early_request_of, str(d)),
                                     output_type=pickled)
    events = paced("events").flat_map(wa.EarlyEvents(str(d), n), output_type=pickled)
    built = (AgentsExecutionEnvironment.flink(env).from_datastream(requests).connect(events)
             .apply(wa.TwoSteps()))
    both = built.to_datastream().union(built.errors_datastream())
    with both.execute_and_collect("early events") as results:
        got = list(results)
    outputs = [o for o in got if "error_type" not in o]
    [err] = [e for e in got if "error_type" in e]
    assert outputs == [{"key": "x", "first": 1, "second": 2}], got
    assert err["error_type"] == "UnmatchedEventError" and "'stray-x'" in err["message"]
    assert "the run ended without waiting for it" in err["message"]
