"""A run that ended leaves no timer of its waits on Flink (operator fakes, no JVM).

Before: a parked run's end-of-input timer (an event-time timer at the end of time) stayed
registered after the run ended, on an unbounded input for ever: one timer in the timer
service for every key that ever waited, growing with the keys. And a wait answered before its
deadline left its processing-time timer to fire for nothing (an approval with a day's
timeout: a day). Now the operator deletes them when the run ends.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable

import pytest

pytest.importorskip("pyflink")

from support import waits_agents as wa  # noqa: E402
from test_operator_pump import PumpHarness  # noqa: E402

from flink_agents_py.flink._second_input import WAITS_END_TIMESTAMP, OutsideEnvelope  # noqa: E402
from flink_agents_py.runtime import PARKED_SUFFIX  # noqa: E402

KEYS = 20


def _answer(h: PumpHarness, key: str) -> None:
    h.feed(key, OutsideEnvelope({"key": key, "correlation_id": f"go-{key}", "payload": "ok"}))


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _deadlines(h: PumpHarness, key: str) -> set[int]:
    """The key's processing-time timers an hour or more away: its waits' deadlines."""
    return {t for t, k in h.timers.processing if k == key and t > _now_ms() + 1_000_000}


def _work_off(h: PumpHarness, done: Callable[[], bool], timeout_s: float = 30) -> None:
    """Fire the processing-time timers due soon (the operator's pump), until ``done()``."""
    end = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < end, "not done in time"
        due = h.timers.due
        if due and (due[0][0], due[0][2]) not in h.timers.processing:
            heapq.heappop(due)  # deleted
            continue
        if not due or due[0][0] > _now_ms() + 1000:  # only deadlines left: not reached here
            time.sleep(0.01)
            continue
        t, _, key = heapq.heappop(due)
        time.sleep(max(0.0, (t - _now_ms()) / 1000))
        h.timers.processing.discard((t, key))
        h.fire(t, key)


def _all_parked(h: PumpHarness, n: int) -> Callable[[], bool]:
    runs = h.op._run_state.data
    return lambda: len(runs) == n and all(v.endswith(PARKED_SUFFIX) for v in runs.values())


def test_runs_that_ended_leave_no_wait_timers_behind():
    h = PumpHarness(wa.Approver(), max_in_flight=KEYS)
    try:
        for n in range(KEYS):
            h.feed(f"k{n}", {"n": n, "timeout_s": 3600})
        _work_off(h, _all_parked(h, KEYS))  # until every run waits
        keys = [f"k{n}" for n in range(KEYS)]
        assert h.timers.event >= {(WAITS_END_TIMESTAMP, k) for k in keys}
        assert all(len(_deadlines(h, k)) == 1 for k in keys)
        for k in keys[:-1]:
            _answer(h, k)
        _work_off(h, lambda: len(h.out) == KEYS - 1)
        assert sorted(o["key"] for o in h.out) == sorted(keys[:-1])
        for k in keys[:-1]:  # ended: neither timer left (before: both, the first for ever)
            assert (WAITS_END_TIMESTAMP, k) not in h.timers.event
            assert _deadlines(h, k) == set()
        last = keys[-1]  # still waiting: its timers stand
        assert (WAITS_END_TIMESTAMP, last) in h.timers.event and len(_deadlines(h, last)) == 1
    finally:
        h.close()


def test_a_key_whose_next_record_waits_keeps_its_timers():
    h = PumpHarness(wa.Approver(), max_in_flight=4)
    try:
        h.feed("a", {"n": 0, "timeout_s": 3600})
        h.feed("a", {"n": 1, "timeout_s": 7200})  # queued behind the first run
        _work_off(h, _all_parked(h, 1))
        _answer(h, "a")  # the first run ends; the second opens its wait in the same advance
        _work_off(h, lambda: len(h.out) == 1 and len(_deadlines(h, "a")) == 1
                  and _all_parked(h, 1)())
        assert [o["key"] for o in h.out] == ["a"]
        assert (WAITS_END_TIMESTAMP, "a") in h.timers.event
        [deadline] = _deadlines(h, "a")  # the second run's, not the first's
        _answer(h, "a")
        _work_off(h, lambda: len(h.out) == 2)
        assert [o["key"] for o in h.out] == ["a", "a"]
        assert (WAITS_END_TIMESTAMP, "a") not in h.timers.event
        assert deadline not in _deadlines(h, "a")
    finally:
        h.close()
