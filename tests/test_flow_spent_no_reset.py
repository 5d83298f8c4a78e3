"""An answer saying a rate-limit window is spent holds calls even when it names no reset.

OpenAI's ``x-ratelimit-remaining-requests: 0`` (or ``-tokens``, or Anthropic's
``anthropic-ratelimit-requests-remaining: 0``) came with its ``x-ratelimit-reset-*``; an
answer without the reset header (a gateway dropping it, a compatible server sending only
some of them, a reset it could not read) was ignored: the next calls were sent at once,
straight into 429s. Now a spent window with no reset holds calls for the window the answers
already named, else for a second, after which one call goes to ask again.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from test_flow_control import asker, run

from flink_agents_py.api import FlowControl, RateLimitInfo, ResourceDescriptor
from flink_agents_py.integrations.chat_models import OpenAIChatModel
from flink_agents_py.runtime import FlowController
from flink_agents_py.runtime._flow import ToldToWaitTooLong

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("info", [
    RateLimitInfo(remaining_requests=0),
    RateLimitInfo(limit_requests=60, remaining_requests=0),
    RateLimitInfo(remaining_tokens=0),
])
def test_a_spent_window_without_a_reset_holds_the_next_call(info):
    async def scenario() -> ToldToWaitTooLong:
        flow = FlowController(FlowControl())
        flow.settle(await flow.admit(), throttled=False, info=info)
        with pytest.raises(ToldToWaitTooLong) as told:
            await flow.admit_held(max_told_wait_s=0.2)
        return told.value

    told = asyncio.run(scenario())
    assert told.window and 0.8 <= told.wait_s <= 1.0


def test_the_hold_ends_so_one_call_asks_again():
    async def scenario() -> float:
        flow = FlowController(FlowControl())
        flow.settle(await flow.admit(), throttled=False,
                    info=RateLimitInfo(remaining_requests=0))
        t0 = time.monotonic()
        flow.settle(await flow.admit(), throttled=False)
        return time.monotonic() - t0

    assert 0.8 <= asyncio.run(scenario()) < 5


def test_a_window_already_named_keeps_its_reset_when_a_later_answer_omits_it():
    async def scenario() -> float:
        flow = FlowController(FlowControl())
        for info in (RateLimitInfo(remaining_requests=5, reset_requests_s=30.0),
                     RateLimitInfo(remaining_requests=0)):
            flow.settle(await flow.admit(), throttled=False, info=info)
        with pytest.raises(ToldToWaitTooLong) as told:
            await flow.admit_held(max_told_wait_s=0.2)
        return told.value.wait_s

    assert 29 <= asyncio.run(scenario()) <= 30


def test_something_left_without_a_reset_holds_nothing():
    async def scenario() -> float:
        flow = FlowController(FlowControl())
        flow.settle(await flow.admit(), throttled=False,
                    info=RateLimitInfo(remaining_requests=3))
        _, held = await flow.admit_held(max_told_wait_s=0.0)
        return held

    assert asyncio.run(scenario()) == 0.0


def test_on_the_wire_an_openai_answer_with_no_requests_left_and_no_reset_is_honoured(probes):
    from support.providers import WireServer, openai_reply

    def answer(req):
        # every answer says nothing is left, and never when it resets; a call sent sooner
        # than a second after the one before is answered 429
        sent = time.monotonic()
        req["at"] = sent
        if req["n"] and sent - answer.last < 0.9:
            return 429, {"error": {"message": "rate limited"}}, {
                "x-ratelimit-remaining-requests": "0"}
        answer.last = sent
        return 200, openai_reply("fine", n=req["n"]), {"x-ratelimit-remaining-requests": "0"}

    answer.last = 0.0
    with WireServer(answer) as srv:
        agent = asker({"conn": ResourceDescriptor(
            OpenAIChatModel, base_url=f"{srv.url}/v1", default_model="gpt-test",
            flow_control=FlowControl(max_throttle_wait_s=30))}, {"model": {"connection": "conn"}})
        # one key: each call is made after the answer to the one before
        res = run(agent, [{"key": "a", "q": str(i)} for i in range(3)])
        assert [o["error"] for o in res.outputs] == [None] * 3
        throttled = [o["metadata"].get("throttled", 0) for o in res.outputs]
        assert sum(throttled) == 0, f"calls were sent into the spent window: {throttled}"
        assert len(srv.requests) == 3


def test_a_429_naming_its_wait_is_not_held_longer_for_a_reset_it_did_not_name():
    async def scenario() -> float | None:
        flow = FlowController(FlowControl())
        return flow.settle(await flow.admit(), throttled=True, info=RateLimitInfo(
            retry_after_s=0.3, remaining_requests=0))

    assert asyncio.run(scenario()) == pytest.approx(0.3, abs=0.05)


def test_a_named_reset_ends_the_guess():
    async def scenario() -> float:
        flow = FlowController(FlowControl())
        for info in (RateLimitInfo(remaining_requests=0),
                     RateLimitInfo(remaining_requests=0, reset_requests_s=0.2)):
            flow.settle(await flow.admit(), throttled=False, info=info)
        t0 = time.monotonic()
        flow.settle(await flow.admit(), throttled=False)
        return time.monotonic() - t0

    assert asyncio.run(scenario()) < 0.9  # the reset said (0.2 s), not the guess (1 s)


def test_a_reset_sent_as_a_unix_time_is_the_seconds_until_then():
    # read as a duration it was decades: every call failed at once, "told to wait too long"
    from flink_agents_py.runtime._flow import sane_rate_limit

    at = time.time() + 0.5
    info = sane_rate_limit(RateLimitInfo(remaining_requests=0, reset_requests_s=at,
                                         reset_tokens_s=time.time() - 5))
    assert 0.3 <= info.reset_requests_s <= 0.5 and info.reset_tokens_s == 0.0

    async def scenario() -> float:
        flow = FlowController(FlowControl())
        flow.settle(await flow.admit(), throttled=False, info=RateLimitInfo(
            remaining_requests=0, reset_requests_s=time.time() + 0.3))
        _, held = await flow.admit_held(max_told_wait_s=60)
        return held

    assert 0.1 <= asyncio.run(scenario()) < 1


def test_a_limit_of_zero_is_no_window_to_hold_calls_for():
    # a gateway with no limit set says limit 0, remaining 0 on answers it served
    async def scenario() -> float:
        flow = FlowController(FlowControl())
        flow.settle(await flow.admit(), throttled=False, info=RateLimitInfo(
            limit_requests=0, remaining_requests=0))
        _, held = await flow.admit_held(max_told_wait_s=0.0)
        return held

    assert asyncio.run(scenario()) == 0.0
