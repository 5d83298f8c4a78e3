"""The agent operator with waiting runs, on the fakes of ``test_operator_pump`` (no JVM).

What a MiniCluster cannot show cheaply: a parked run leaves nothing in the operator's memory
(no cached run, no busy-key entry, no live action), holds one end-of-input timer and, with a
timeout, one processing-time timer; an outside event or a timer wakes only its own run, also
after a restore, whose sweep leaves parked runs in keyed state.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

pytest.importorskip("pyflink")

from support import waits_agents as wa  # noqa: E402
from test_operator_pump import PumpHarness  # noqa: E402

from flink_agents_py.flink import AgentOperator  # noqa: E402
from flink_agents_py.flink._second_input import WAITS_END_TIMESTAMP, OutsideEnvelope  # noqa: E402
from flink_agents_py.plan import AgentPlan  # noqa: E402
from flink_agents_py.runtime import PARKED_SUFFIX  # noqa: E402

KEYS = 50


@pytest.fixture(autouse=True)
def _group_poll_in_tens_of_ms(monkeypatch):
    """The key-group fallback timer every 50 ms instead of 2 s: the fakes fire processing-time
    timers when they fall due (sleeping until then), and each set of runs worked off until
    they wait ended with one 2 s group timer. What these tests check (parked runs, their
    timers, what wakes them) does not depend on how often that fallback comes."""
    from flink_agents_py.flink import _switching

    monkeypatch.setattr(_switching, "GROUP_POLL_MS", 50)


@pytest.fixture
def parked():
    """``KEYS`` runs of ``Approver`` (no timeout) fed and worked off until they all wait."""
    h = PumpHarness(wa.Approver(), max_in_flight=KEYS)
    for n in range(KEYS):
        h.feed(f"k{n}", {"n": n})
    h.run_timers(timeout_s=30)  # until the calls before the waits are applied
    yield h
    h.close()


def _answer(h: PumpHarness, key: str, payload: Any = "ok", cid: str | None = None) -> None:
    h.feed(
        key, OutsideEnvelope({"key": key, "correlation_id": cid or f"go-{key}", "payload": payload})
    )
    h.run_timers(timeout_s=30)


def test_parked_runs_leave_nothing_in_the_operators_memory(parked):
    h = parked
    op = h.op
    runs = op._run_state.data
    assert len(runs) == KEYS and all(text.endswith(PARKED_SUFFIX) for text in runs.values())
    assert op._runs == {} and op._switch.jkeys == {}  # no cached run, no busy-key entry
    assert not any(op.core.is_live(f"k{n}") for n in range(KEYS))
    assert h.timers.processing == set()  # no deadline, no poll, no group or pump timer left
    assert h.timers.event >= {(WAITS_END_TIMESTAMP, f"k{n}") for n in range(KEYS)}
    assert h.out == []


def test_an_outside_event_wakes_only_its_run(parked):
    h = parked
    before = h.op.core.counters["actions_reentered"]
    _answer(h, "k7", payload={"by": "ann"})
    assert [o["key"] for o in h.out] == ["k7"] and h.out[0]["approved"] == {"by": "ann"}
    assert h.op.core.counters["actions_reentered"] - before == 1
    assert len(h.op._run_state.data) == KEYS - 1
    _answer(h, "k7", payload="again")  # its run is gone: named on the error output
    [(tag, err)] = h.out[1:]
    assert err["error_type"] == "UnmatchedEventError" and "no run of key 'k7'" in err["message"]


def test_a_restored_operator_leaves_parked_runs_in_keyed_state(parked):
    h = parked
    saved = {
        name: dict(getattr(h.op, name).data)
        for name in ("_run_state", "_memory_state", "_head_state", "_tail_state")
    }
    h.op.close()  # the crash
    h.op = AgentOperator(AgentPlan.from_agent(wa.Approver()), metrics=False)
    h.op.open(h.rc)
    for name, data in saved.items():
        getattr(h.op, name).data.update(data)
    _answer(h, "k3", payload=1)  # the first callback sweeps: parked runs stay where they are
    assert h.op.stats["swept"] == KEYS and h.op.core.counters["actions_reentered"] == 1
    assert [(o["key"], o["approved"]) for o in h.out] == [("k3", 1)]
    assert h.op._runs == {} and h.op._switch.jkeys == {}
    h.end()  # the final watermark: every wait still open times out
    timed_out = sorted(o["key"] for o in h.out if "timed_out" in o)
    assert timed_out == sorted(f"k{n}" for n in range(KEYS) if n != 3)
    assert all("before the end of input" in o["timed_out"] for o in h.out if "timed_out" in o)
    assert h.op._run_state.data == {}


def test_a_timeout_is_a_processing_time_timer_of_its_key():
    h = PumpHarness(wa.Approver())
    try:
        h.feed("a", {"n": 0, "timeout_s": 0.3})
        h.feed("b", {"n": 1})
        h.run_timers(timeout_s=30)  # fires a's deadline when it falls due
        assert [(o["key"], "within 0.3 s" in o["timed_out"]) for o in h.out] == [("a", True)]
        assert list(h.op._run_state.data) == ["b"]
    finally:
        h.close()


def test_an_early_event_is_held_in_keyed_state_with_a_timer_and_the_run_stays_parked(parked):
    from flink_agents_py.runtime.core._waits import EARLY_HOLD_S

    h = parked
    # no wait for it (yet): held (not ``_answer``: its timers fire only 600 s from now)
    h.feed("k3", OutsideEnvelope({"key": "k3", "correlation_id": "later-k3", "payload": "p"}))
    text = h.op._run_state.data["k3"]
    assert '"status":"early"' in text and text.endswith(PARKED_SUFFIX)
    assert h.op._runs == {} and h.out == []  # no output, no error
    [(deadline, key)] = h.timers.processing
    assert key == "k3" and deadline > EARLY_HOLD_S * 1000


def test_the_runs_waiting_gauge_counts_parked_runs_and_is_a_flink_metric(parked):
    from flink_agents_py.observability._flink_mirror import _GAUGES

    h = parked
    assert h.op.core.counters["runs_waiting"] == KEYS
    _answer(h, "k1")
    assert h.op.core.counters["runs_waiting"] == KEYS - 1
    assert "runs_waiting" in _GAUGES  # registered in the operator's flink_agents group


def test_a_wait_ended_by_the_end_of_input_says_so_not_that_its_timeout_passed():
    # the end-of-input timer fires at a timestamp far past any deadline: a wait of 3600 s
    # (and an event held for a wait that never opened) ended then, seconds after they began
    h = PumpHarness(wa.Approver())
    try:
        h.feed("a", {"n": 0, "timeout_s": 3600})
        deadline = time.monotonic() + 30
        while not h.op._run_state.data.get("a", "").endswith(PARKED_SUFFIX):
            assert time.monotonic() < deadline, "the run never parked"
            due = [tk for tk in h.timers.processing if tk[0] <= time.time() * 1000 + 50]
            for t, key in due:  # its poll timers, not its deadline an hour from now
                h.timers.processing.discard((t, key))
                h.fire(t, key)
            time.sleep(0.01)
        h.feed("a", OutsideEnvelope({"key": "a", "correlation_id": "go-A", "payload": 1}))
        h.end()
        [out] = [o for o in h.out if isinstance(o, dict)]
        assert "before the end of input" in out["timed_out"], out["timed_out"]
        assert "within 3600 s" not in out["timed_out"]
        [(_tag, err)] = [o for o in h.out if isinstance(o, tuple)]
        assert "none opened within" not in err["message"], err["message"]
        assert "the end of input came before its wait opened" in err["message"], err["message"]
    finally:
        h.close()


def _pump_until(h: PumpHarness, done: Any, what: str) -> None:
    """Fire the processing-time timers that fall due (I/O polls) until ``done()``."""
    deadline = time.monotonic() + 30
    while not done():
        assert time.monotonic() < deadline, what
        for t, key in [tk for tk in h.timers.processing if tk[0] <= time.time() * 1000 + 50]:
            h.timers.processing.discard((t, key))
            h.fire(t, key)
        time.sleep(0.01)


def test_an_event_held_for_a_queued_record_outlives_the_end_of_input():
    # a bounded job: the answer to a key's second record came while its first record's run
    # waited (held as early, for the run queued behind); at the end of input it was given up
    # ("the end of input came before its wait opened") and the second run's wait timed out,
    # though its answer had arrived: the local runner, given the same input, delivered it
    h = PumpHarness(wa.PerRecordApprover())
    try:
        h.feed("a", {"n": 1, "timeout_s": 3600})
        _pump_until(
            h,
            lambda: h.op._run_state.data.get("a", "").endswith(PARKED_SUFFIX),
            "the first run never parked",
        )
        h.feed("a", {"n": 2, "timeout_s": 3600})  # queued behind the waiting run
        h.feed("a", OutsideEnvelope({"key": "a", "correlation_id": "go-2", "payload": "yes"}))
        assert '"status":"early"' in h.op._run_state.data["a"]  # held for the queued run
        h.end()
        _pump_until(
            h,
            lambda: len([o for o in h.out if isinstance(o, dict)]) == 2,
            "the second record's run never completed",
        )
        first, second = [o for o in h.out if isinstance(o, dict)]
        assert "before the end of input" in first["timed_out"], first
        assert second["n"] == 2 and second.get("approved") == "yes", second
        assert [o for o in h.out if isinstance(o, tuple)] == []  # nothing given up
    finally:
        h.close()
