"""Flow control bounds every wait a provider asks for, whatever it says.

``max_throttle_wait_s`` is the longest a call is held because of throttling. A ``Retry-After``
of an hour set by one call's answer closed the connection's gate for the hour, and every
later call (another key's too) waited the hour at admission, unbounded, never reaching its
fallback; an infinite value (``retry-after-ms: inf``, a reset of ``inf``) closed it for good,
and a 503's infinite ``Retry-After`` put a retry to sleep for ever. Now a call the provider
told to wait past the bound fails at once with a throttled ``ProviderError`` naming the setup
and its connection (fallbacks apply), and values that are no number to act on are dropped.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from support.probes import count
from test_flow_control import Throttles, asker, run

from flink_agents_py.api import (
    ChatMessage,
    ChatModelConnection,
    ChatResponse,
    FlowControl,
    MessageRole,
    ProviderError,
    RateLimitInfo,
    ResourceDescriptor,
    ResourceType,
)
from flink_agents_py.integrations.chat_models._common import header_retry_after
from flink_agents_py.integrations.chat_models._openai import openai_rate_limit
from flink_agents_py.runtime import FlowController

pytestmark = pytest.mark.timeout(120)


def _with_cheap_fallback(conn: ResourceDescriptor, **setup):
    agent = asker({"conn": conn}, {"model": {"connection": "conn", "fallbacks": ["cheap"],
                                             **setup},
                                   "cheap": {"connection": "up"}})
    agent.add_resource("up", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(Throttles, label="hostile-up", reply="cheap"))
    return agent


def _run_bounded(agent, records, limit_s: float = 60.0):
    """Runs the job (one record at a time) on a thread; fails the test past ``limit_s``."""
    box: dict = {}
    thread = threading.Thread(
        target=lambda: box.setdefault("res", run(agent, records, max_in_flight=1)), daemon=True)
    thread.start()
    thread.join(limit_s)
    assert not thread.is_alive(), f"the job still ran after {limit_s} s: a wait was unbounded"
    return box["res"]


def test_a_later_call_is_not_held_for_an_hour_by_another_calls_retry_after(probes):
    agent = _with_cheap_fallback(ResourceDescriptor(
        Throttles, label="hostile-hour", throttle_first=100, retry_after=3600.0,
        flow_control=FlowControl(max_throttle_wait_s=2)))
    t0 = time.monotonic()
    res = _run_bounded(agent, [{"key": "a", "q": "1"}, {"key": "b", "q": "2"},
                               {"key": "a", "q": "3"}])
    assert time.monotonic() - t0 < 30
    assert res.errors == [] and [o["content"] for o in res.outputs] == [
        "cheap: 1", "cheap: 2", "cheap: 3"]
    assert probes["hostile-hour"] == 1  # the later calls were not sent into the closed gate
    later = res.outputs[1]["metadata"]["fallback_errors"]
    assert len(later) == 1 and later[0].startswith(
        "model: ProviderError: chat model 'model' (connection 'conn') was not sent: its "
        "provider throttled the connection (last answer: status 429, asking to wait 3600 s)")
    assert "past max_throttle_wait_s (2 s)" in later[0] and later[0].endswith("(status 429)")


def test_without_a_fallback_the_later_call_fails_at_once_naming_the_connection(probes):
    agent = asker({"conn": ResourceDescriptor(
        Throttles, label="hostile-nofb", throttle_first=100, retry_after=3600.0,
        flow_control=FlowControl(max_throttle_wait_s=2))}, {"model": {"connection": "conn"}})
    res = _run_bounded(agent, [{"key": "a", "q": "1"}, {"key": "b", "q": "2"}])
    first, second = res.outputs
    assert first["error"].startswith("ProviderError: chat model 'model' (connection 'conn') "
                                     "gave up after its provider throttled the call once")
    assert first["error"].endswith("; its last answer: slow down (status 429)")
    assert second["error"].startswith("ProviderError: chat model 'model' (connection 'conn') "
                                      "was not sent")
    assert probes["hostile-nofb"] == 1


def test_a_503_retry_after_past_the_bound_is_not_slept_through(probes):
    agent = _with_cheap_fallback(ResourceDescriptor(
        Throttles, label="hostile-503", throttle_first=100, status=503, retry_after=3600.0,
        flow_control=FlowControl(max_throttle_wait_s=2)), error_policy="retry")
    [out] = _run_bounded(agent, [{"key": "a", "q": "1"}]).outputs
    assert out["content"] == "cheap: 1"
    assert out["metadata"]["fallback_errors"][0] == (
        "model: ProviderError: chat model 'model' (connection 'conn') was not retried: its "
        "provider asked to wait 3600 s, past max_throttle_wait_s (2 s); its last answer: "
        "slow down (status 503)")


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e999"])
def test_headers_that_say_no_number_to_act_on_are_dropped(value):
    assert header_retry_after({"retry-after-ms": value}) is None
    assert header_retry_after({"retry-after": value}) is None
    info = openai_rate_limit({"x-ratelimit-remaining-requests": value,
                              "x-ratelimit-reset-requests": value,
                              "x-ratelimit-limit-requests": value})
    assert info.is_empty()


def test_header_retry_after_takes_ms_then_seconds_and_ignores_a_negative_ms():
    assert header_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert header_retry_after({"retry-after-ms": "-5", "retry-after": "2"}) == 2.0
    assert header_retry_after({"retry-after": "-3"}) == 0.0
    assert header_retry_after({"retry-after": "soon"}) is None


@pytest.mark.parametrize("info", [
    RateLimitInfo(retry_after_s=float("inf")),
    RateLimitInfo(remaining_requests=0, reset_requests_s=float("inf")),
    RateLimitInfo(remaining_tokens=float("nan"), reset_tokens_s=float("inf")),
])
def test_an_infinite_wait_from_an_adapter_does_not_close_the_connection_for_good(info):
    now = [0.0]
    flow = FlowController(FlowControl(adaptive=False), clock=lambda: now[0])

    async def go() -> float | None:
        ticket = await flow.admit()
        return flow.settle(ticket, throttled=True, info=info)

    gate = asyncio.run(go())
    assert gate is not None and gate <= 30.0  # a backoff, as for a 429 that names no time
    now[0] += 31.0
    assert flow._delay(now[0]) == 0.0


class Once(ChatModelConnection):
    """Says 429 with ``Retry-After: 0.3`` to its first call, then answers."""

    def chat(self, messages, **kwargs) -> ChatResponse:
        if count("hostile-fits") == 1:
            raise ProviderError("slow down", status_code=429, retryable=True,
                                rate_limit=RateLimitInfo(retry_after_s=0.3))
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content="ok"))


def test_a_wait_within_the_bound_is_still_honoured(probes):
    """The bound is not a shortcut: a Retry-After that fits is waited for, then sent."""

    agent = asker({"conn": ResourceDescriptor(Once, flow_control=FlowControl(
        max_throttle_wait_s=5))}, {"model": {"connection": "conn"}})
    res = _run_bounded(agent, [{"key": "a", "q": "1"}, {"key": "b", "q": "2"}])
    assert [o["error"] for o in res.outputs] == [None, None]
    assert probes["hostile-fits"] == 3


@pytest.mark.parametrize("said", [float("nan"), float("inf")])
def test_a_5xx_whose_adapter_says_no_number_to_wait_is_retried_as_if_it_said_none(said, probes):
    agent = asker({"conn": ResourceDescriptor(Throttles, label=f"nan-{said}", throttle_first=1,
                                              status=503, retry_after=said)},
                  {"model": {"connection": "conn", "error_policy": "retry",
                             "retry_initial_backoff_s": 0.01, "retry_max_backoff_s": 0.01}})
    [out] = run(agent, [{"key": "a", "q": "hi"}]).outputs
    # before: "was not retried: its provider asked to wait nan s, past max_throttle_wait_s"
    assert out["error"] is None and out["content"] == "ok: hi"
    assert out["metadata"]["retries"] == 1 and probes[f"nan-{said}"] == 2


@pytest.mark.parametrize("said", [float("nan"), float("inf")])
def test_a_429_given_up_names_no_wait_its_adapter_said_no_number_for(said, probes):
    agent = asker({"conn": ResourceDescriptor(
        Throttles, label=f"nan429-{said}", throttle_first=100, retry_after=said,
        flow_control=FlowControl(max_throttle_wait_s=0.2))}, {"model": {"connection": "conn"}})
    [out] = run(agent, [{"key": "a", "q": "hi"}]).outputs
    assert "the provider named no time to wait: a backoff" in out["error"]
    assert "nan" not in out["error"] and "inf" not in out["error"]
