"""One key's calls do not starve another key's: the I/O executor's slots are shared by key.

Found by an attacker: slots went to calls in submission order, so one record whose model
asked for 64 calls of a 2 s tool delayed another key's instant call from 0.06 s to 4.35 s
(every slot was the hot key's until its backlog drained). Now a key holds at most
``max_in_flight_per_key`` slots (three quarters of ``max_in_flight`` by default) and freed
slots go to the keys with waiting calls in turn; a key's own calls still start in order.

Every test here waits for conditions: the hot key's calls wait on a gate only the other
key's call opens, so a starved call shows as a hot call that timed out at its gate.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from support.waiting import wait_until

from flink_agents_py.runtime import HostOptions
from flink_agents_py.runtime.core._executor import IOExecutor
from flink_agents_py.runtime.core._slots import per_key_slots

pytestmark = pytest.mark.timeout(120)

WAIT_S = 20.0
"""The longest any gate is waited for (a failing test ends then, not a passing one)."""


class _Log:
    """What the submitted calls did, in order, and when all of them completed."""

    def __init__(self, n: int) -> None:
        self.lock = threading.Lock()
        self.started: list[str] = []
        self.done: list[str] = []
        self.all_done = threading.Event()
        self.n = n
        self.changed = threading.Condition(self.lock)

    def start(self, tag: str) -> None:
        with self.changed:
            self.started.append(tag)
            self.changed.notify_all()

    def on_done(self, tag: str) -> Any:
        def on_done(ok: bool, value: Any) -> None:  # (a call's own answer, else its tag)
            assert ok, value
            with self.changed:
                self.done.append(value if isinstance(value, str) else tag)
                if len(self.done) == self.n:
                    self.all_done.set()
                self.changed.notify_all()

        return on_done

    def wait_started(self, n: int) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: len(self.started) >= n, timeout=WAIT_S)


def _gated(log: _Log, tag: str, gate: threading.Event) -> Any:
    def call() -> str:
        log.start(tag)
        if not gate.wait(WAIT_S):
            return "starved"
        return tag

    return call


def test_another_keys_call_starts_while_a_hot_keys_backlog_waits():
    # 4 slots: the hot key may hold 3; its 10 calls wait on a gate only the cool key's call
    # opens. Before: the hot key held all 4 slots, the cool call waited behind its backlog.
    executor = IOExecutor(max_in_flight=4)
    log = _Log(11)
    hot_gate = threading.Event()
    try:
        for i in range(10):
            executor.submit(
                _gated(log, f"hot{i}", hot_gate), (), {}, log.on_done(f"hot{i}"), key="hot"
            )

        def cool() -> str:
            log.start("cool")
            hot_gate.set()
            return "cool"

        executor.submit(cool, (), {}, log.on_done("cool"), key="cool")
        assert log.all_done.wait(WAIT_S), log.started
        assert "starved" not in log.done  # no hot call waited out its gate: cool ran first
        assert "cool" in log.started[:4]
        # the hot key's own calls started in the order they were submitted
        assert [t for t in log.started if t != "cool"] == [f"hot{i}" for i in range(10)]
    finally:
        hot_gate.set()
        executor.stop()


def test_a_freed_slot_goes_to_a_waiting_key_before_the_hot_keys_next_call():
    # a key may hold both slots (no slot reserved), so the cool call waits; the first slot
    # the hot key frees is its, not the hot key's third call's (keys are served in turn)
    executor = IOExecutor(max_in_flight=2, max_in_flight_per_key=2)
    log = _Log(7)
    gates = [threading.Event() for _ in range(6)]
    try:
        for i in range(6):
            executor.submit(
                _gated(log, f"hot{i}", gates[i]), (), {}, log.on_done(f"hot{i}"), key="hot"
            )
        assert log.wait_started(2)
        executor.submit(lambda: log.start("cool"), (), {}, log.on_done("cool"), key="cool")
        # the cool key waits its turn (the hot one, at its cap, is not in the round)
        wait_until("the cool call waits for a slot", lambda: len(executor.slots._round) == 1)
        gates[0].set()
        assert log.wait_started(3)
        assert log.started[:3] == ["hot0", "hot1", "cool"]
        for g in gates:
            g.set()
        assert log.all_done.wait(WAIT_S)
        assert executor.pending == 0 and executor.waiting == 0 and executor.in_flight == 0
    finally:
        for g in gates:
            g.set()
        executor.stop()


def test_one_key_alone_may_use_its_share_and_the_cap_is_checked():
    assert per_key_slots(32, None) == 24
    assert [per_key_slots(n, None) for n in (1, 2, 3, 4)] == [1, 2, 3, 3]
    assert per_key_slots(4, 100) == 4 and per_key_slots(8, 1) == 1
    with pytest.raises(ValueError, match="max_in_flight_per_key"):
        HostOptions(max_in_flight_per_key=0)
    with pytest.raises(ValueError, match="max_in_flight_per_key"):
        IOExecutor(4, max_in_flight_per_key=0)
    # a lone key runs 3 of 4 calls at once (its cap), and every call completes
    executor = IOExecutor(max_in_flight=4)
    log = _Log(6)
    gate = threading.Event()
    try:
        for i in range(6):
            executor.submit(_gated(log, f"k{i}", gate), (), {}, log.on_done(f"k{i}"), key="k")
        assert log.wait_started(3)
        assert executor.in_flight == 3 and executor.waiting == 3
        gate.set()
        assert log.all_done.wait(WAIT_S)
        assert log.started == [f"k{i}" for i in range(6)]
    finally:
        gate.set()
        executor.stop()
