"""The adaptive concurrency limit stays within ``min_concurrency`` and ``max_concurrency``.

Before: the decrease on a throttled answer was ``max(min_concurrency, in flight * factor)``
with nothing keeping it below the limit it decreased or below ``max_concurrency``. So
``FlowControl(max_concurrency=2, min_concurrency=4)`` (accepted) let 4 calls go at once
after the first 429, past the fixed bound the user set, and ``initial_concurrency=2,
min_concurrency=4`` doubled the calls in flight on a throttle: the answer meant to slow the
connection down sped it up, into more 429s. Now ``min_concurrency`` above
``max_concurrency`` is refused where it is declared (naming both), the limit starts at
``min_concurrency`` at least, and a throttled answer never raises it.
"""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from flink_agents_py.api import FlowControl, RateLimitInfo
from flink_agents_py.runtime._flow import FlowController


def test_a_min_concurrency_above_max_concurrency_is_refused_naming_both():
    with pytest.raises(ValidationError, match="min_concurrency.*max_concurrency"):
        FlowControl(max_concurrency=2, min_concurrency=4)
    FlowControl(max_concurrency=4, min_concurrency=4)  # a fixed limit: fine


@pytest.mark.parametrize("options", [
    FlowControl(initial_concurrency=2, min_concurrency=4),
    FlowControl(initial_concurrency=6, min_concurrency=4, max_concurrency=6),
    FlowControl(min_concurrency=3),
    FlowControl(initial_concurrency=8),
], ids=["initial-below-min", "bounded", "unlimited-start", "http-default"])
def test_a_throttled_answer_never_raises_the_limit_nor_passes_the_bounds(options):
    now = [100.0]

    async def scenario() -> list[float | None]:
        flow = FlowController(options, clock=lambda: now[0])
        limits = [flow.limit]
        for _ in range(4):  # a throttle per round, one call in flight at its answer
            ticket = await asyncio.wait_for(flow.admit(), 5)
            flow.settle(ticket, throttled=True, info=RateLimitInfo(retry_after_s=1))
            limits.append(flow.limit)
            now[0] += 2  # past the gate
        return limits

    limits = asyncio.run(scenario())
    top = options.max_concurrency or float("inf")
    for before, after in zip(limits, limits[1:], strict=False):
        assert after is not None and options.min_concurrency <= after <= top
        assert before is None or after <= before, limits  # a throttle slows down, never up
    assert limits[0] is None or options.min_concurrency <= limits[0] <= top
