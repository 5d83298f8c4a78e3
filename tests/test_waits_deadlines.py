"""An event that comes after its wait's deadline is late, whether or not its timer fired.

A wait's deadline is a processing-time timer. When the job was down past the deadline (or
the operator is busy), the host may process the outside event before the overdue timer
fires; before, the event was then delivered, so whether a late answer was taken depended on
which the host happened to process first. Now the wait times out first and the event is
named late.
"""

from __future__ import annotations

import pytest
from support import waits_agents as wa

from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore, InMemoryKeyState

pytestmark = pytest.mark.timeout(60)


class _QuickThenSlow(wa.Agent):
    @wa.action(wa.InputEvent)
    @staticmethod
    async def on_input(event, ctx) -> None:
        try:
            got = await ctx.wait_for("quick", timeout_s=1)
        except wa.WaitTimeoutError as e:
            got = f"timeout: {e}"
        ctx.send_event(wa.OutputEvent(output={"quick": got}))


def _core(now: list[int]) -> AgentCore:
    core = AgentCore(AgentPlan.from_agent(_QuickThenSlow()))
    core.clock_ms = lambda: now[0]
    core.open()
    return core


def test_an_event_after_the_deadline_is_late_though_the_timer_has_not_fired_yet():
    now = [0]
    core = _core(now)
    try:
        state = InMemoryKeyState()
        res = core.on_input("k", {"key": "k"}, state)
        assert res.parked and res.timers == [1000]
        now[0] = 5000  # the job was down: restored past the deadline, the timer not fired yet
        res = core.on_outside_event("k", {"key": "k", "correlation_id": "quick",
                                          "payload": "approved"}, state)
        [error] = res.errors
        assert error.error_type == "UnmatchedEventError"
        assert "late: the wait of call r0/on_input/c0 timed out" in error.message
        assert res.outputs == [{"quick": "timeout: no outside event with correlation id "
                                         "'quick' arrived for key 'k' within 1 s"}]
        assert core.on_timers("k", 5000, state) is None  # the overdue timer: nothing to do
    finally:
        core.close()


def test_an_event_at_the_deadline_is_late_and_one_before_it_is_delivered():
    for at, delivered in ((999, True), (1000, False)):
        now = [0]
        core = _core(now)
        try:
            state = InMemoryKeyState()
            core.on_input("k", {"key": "k"}, state)
            now[0] = at
            res = core.on_outside_event("k", {"key": "k", "correlation_id": "quick",
                                              "payload": "ok"}, state)
            assert (res.errors == []) is delivered
            assert (res.outputs == [{"quick": "ok"}]) is delivered
        finally:
            core.close()


class _FirstThenSecond(wa.Agent):
    @wa.action(wa.InputEvent)
    @staticmethod
    async def on_input(event, ctx) -> None:
        first = await ctx.wait_for("first")
        try:
            second = await ctx.wait_for("second", timeout_s=60)
        except wa.WaitTimeoutError:
            second = "timeout"
        ctx.send_event(wa.OutputEvent(output={"first": first, "second": second}))


def test_an_early_event_held_past_its_hold_time_is_not_claimed_though_its_timer_is_late():
    from flink_agents_py.runtime.core._waits import EARLY_HOLD_S

    now = [0]
    core = AgentCore(AgentPlan.from_agent(_FirstThenSecond()))
    core.clock_ms = lambda: now[0]
    core.open()
    try:
        state = InMemoryKeyState()
        core.on_input("k", {"key": "k"}, state)
        res = core.on_outside_event("k", {"key": "k", "correlation_id": "second",
                                          "payload": 2}, state)
        assert res.timers == [EARLY_HOLD_S * 1000]  # held for its wait to open
        now[0] = EARLY_HOLD_S * 1000 + 1  # its hold ended; its timer has not fired yet
        res = core.on_outside_event("k", {"key": "k", "correlation_id": "first",
                                          "payload": 1}, state)
        [error] = res.errors
        assert error.error_type == "UnmatchedEventError"
        assert f"none opened within {EARLY_HOLD_S} s" in error.message
        assert res.parked and res.outputs == []  # the second wait is open, not given 2
        res = core.on_timers("k", now[0] + 60_000, state)
        assert res is not None and res.outputs == [{"first": 1, "second": "timeout"}]
    finally:
        core.close()
