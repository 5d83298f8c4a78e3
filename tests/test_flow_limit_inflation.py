"""The adaptive concurrency limit grows only while it binds, and recovers under load.

Before: every answer raised the limit (one per answer in the slow start, ``1/limit`` after
the first throttle), however few calls were in flight. A quiet spell of one call at a time
took an HTTP adapter's slow start from 8 to 508 in 500 calls, so the next burst of queued
records went to the provider all at once (the storm the slow start is there to prevent), and
after a throttle the limit climbed back to 63 with never more than one call in flight. Now
an answer raises it only when at least half of the limit was in flight (as Netflix's
concurrency-limits AIMD does): a quiet spell leaves it where it was, a load still raises it.
"""

from __future__ import annotations

import asyncio

from flink_agents_py.api import FlowControl
from flink_agents_py.runtime import FlowController


def _controller(**options) -> tuple[FlowController, list[float]]:
    now = [100.0]
    return FlowController(FlowControl(**options), clock=lambda: now[0]), now


async def _sequential(flow: FlowController, now: list[float], n: int) -> None:
    for _ in range(n):
        ticket = await flow.admit()
        now[0] += 0.05
        flow.settle(ticket, throttled=False)


async def _loaded(flow: FlowController, now: list[float], rounds: int) -> int:
    """Rounds of as many calls as the limit admits (a queue that always waits); the most
    sent at once."""
    most = 0
    for _ in range(rounds):
        tickets = []
        while flow.stats.in_flight + 1 <= (flow.limit or 1):
            tickets.append(await flow.admit())
        most = max(most, len(tickets))
        now[0] += 0.05
        for t in tickets:
            flow.settle(t, throttled=False)
    return most


def test_a_quiet_spell_does_not_raise_the_slow_starts_limit():
    flow, now = _controller(initial_concurrency=8)

    async def scenario() -> None:
        await _sequential(flow, now, 500)
        assert flow.limit == 8.0  # before: 508
        # the burst after it starts from the slow start's 8, then grows with the answers
        ticketed = [await flow.admit() for _ in range(8)]
        assert flow._delay(now[0]) == float("inf")  # the 9th waits for an answer
        for t in ticketed:
            flow.settle(t, throttled=False)
        assert flow.limit > 8.0  # answered while the limit bound: the slow start goes on

    asyncio.run(scenario())


def test_after_a_throttle_the_limit_recovers_under_load_not_while_quiet():
    flow, now = _controller(initial_concurrency=32)

    async def scenario() -> None:
        tickets = [await flow.admit() for _ in range(32)]
        gate = flow.settle(tickets[0], throttled=True)
        assert gate is not None and flow.limit == 16.0  # halved from 32 in flight
        for t in tickets[1:]:  # sent before the gate: one decrease
            flow.settle(t, throttled=True)
        assert flow.limit == 16.0
        now[0] += 60
        await _sequential(flow, now, 2000)
        assert flow.limit == 16.0  # before: about 130, with one call in flight
        most = await _loaded(flow, now, 40)
        assert flow.limit > 30 and most > 25  # a load raises it again (additively)

    asyncio.run(scenario())


def test_a_max_concurrency_caps_the_growth():
    flow, now = _controller(initial_concurrency=4, max_concurrency=10)

    async def scenario() -> None:
        await _loaded(flow, now, 20)
        assert flow.limit == 10.0

    asyncio.run(scenario())
