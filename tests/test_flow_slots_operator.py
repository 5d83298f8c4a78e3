"""On the Flink operator, calls held by flow control still stop its input (backpressure).

A held call gives its I/O slot up (``tests/test_flow_slots.py``) but counts as a waiting
call, so while more than ``max_waiting_calls`` are held each input record waits (up to
``drain_poll_s``) instead of adding calls without bound.
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("pyflink")

from support.probes import count  # noqa: E402
from test_flow_control import asker  # noqa: E402
from test_operator_costs import Harness  # noqa: E402

from flink_agents_py.api import (  # noqa: E402
    ChatModelConnection,
    ChatResponse,
    FlowControl,
    ProviderError,
    RateLimitInfo,
    ResourceDescriptor,
)

pytestmark = pytest.mark.timeout(60)


class AlwaysThrottles(ChatModelConnection):
    """Says 429 with ``Retry-After: 30`` to every call."""

    def chat(self, messages, **kwargs) -> ChatResponse:
        count("throttled")
        raise ProviderError("slow down", status_code=429, retryable=True,
                            rate_limit=RateLimitInfo(retry_after_s=30.0))


def test_held_calls_count_as_waiting_and_the_operator_stops_taking_input(probes):
    agent = asker({"conn": ResourceDescriptor(AlwaysThrottles, flow_control=FlowControl(
        max_throttle_wait_s=120))}, {"model": {"connection": "conn"}})
    h = Harness(agent, max_in_flight=2, max_waiting_calls=2, drain_poll_s=0.1)
    try:
        for n in range(6):
            h.feed(f"k{n}", {"q": str(n)})
        assert h.out == []  # nothing failed: the calls are held
        executor = h.op.core.executor
        deadline = time.monotonic() + 10
        while executor.in_flight and time.monotonic() < deadline:  # until all are held
            time.sleep(0.01)
        assert executor.in_flight == 0 and executor.waiting == 6  # no slot kept, all counted
        assert h.op.stats["input_waits"] >= 3, dict(h.op.stats)
    finally:
        h.close()
