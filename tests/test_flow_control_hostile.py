"""Flow control against a provider that keeps throttling while it says "send again now".

A provider answering 429 with ``Retry-After: 0`` (or a negative value, ``0.001``, an HTTP
date in the past, ``retry-after-ms: 0``, or rate-limit headers saying no requests are left
until a reset of ``0s``) made one chat send about a thousand requests in 3 s: the told wait
was used as it was, and the exponential backoff applied only when no wait was told. Now the
told wait is a floor: throttled answers in a row back off at least as a provider naming no
time is backed off from, and an answer to a call sent after the gate ends the streak.

A call that flow control ends (throttled past ``max_throttle_wait_s``, a ``Retry-After``
past it, a connection closed for longer than the call may wait) failed with the provider's
bare ``chat completion failed: Error code: 429``, or with a wait that read as shorter than
the bound it claimed to pass. Now every such failure names the chat model setup and its
connection, what the provider said (its status, the wait it asked for) and how long the
call was held and would be in all against ``max_throttle_wait_s``; the error's type and
status stay the provider's, so error policies and fallbacks act as before.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from support.probes import count
from support.providers import WireServer, openai_reply
from test_flow_control import Throttles, asker, run

from flink_agents_py.api import (
    ChatMessage,
    ChatModelConnection,
    ChatModelSetup,
    ChatResponse,
    FlowControl,
    MessageRole,
    ProviderError,
    RateLimitInfo,
    ResourceDescriptor,
    error_class,
    report_rate_limit,
)
from flink_agents_py.integrations.chat_models import OpenAIChatModel
from flink_agents_py.runtime import FlowController

pytestmark = pytest.mark.timeout(120)

ROOT = pathlib.Path(__file__).resolve().parents[1]

HOSTILE_INFOS = {
    "Retry-After 0": RateLimitInfo(retry_after_s=0.0),
    "Retry-After -5": RateLimitInfo(retry_after_s=-5.0),
    "Retry-After 0.001": RateLimitInfo(retry_after_s=0.001),
    "no requests left, reset 0 s": RateLimitInfo(limit_requests=10, remaining_requests=0,
                                                 reset_requests_s=0.0),
    "nothing said": None,
}


def _gates_in_a_row(info: RateLimitInfo | None, n: int, horizon_s: float = 10.0
                    ) -> tuple[list[float], int]:
    """One call throttled again and again, sent as soon as the controller allows.

    Returns:
        The gates the controller set (seconds) and the requests sent within ``horizon_s``
        of (simulated) time; at most ``n`` requests are made.
    """
    now = [100.0]
    flow = FlowController(FlowControl(), clock=lambda: now[0])

    async def scenario() -> tuple[list[float], int]:
        gates: list[float] = []
        sent = 0
        while sent < n:
            ticket = await asyncio.wait_for(flow.admit(), 5)
            sent += 1
            gate = flow.settle(ticket, throttled=True, info=info)
            assert gate is not None
            gates.append(gate)
            if now[0] + gate - 100.0 > horizon_s:
                break
            now[0] += gate  # the clock moves to the gate's end: no wall-clock waiting
        return gates, sent

    return asyncio.run(scenario())


@pytest.mark.parametrize("said", list(HOSTILE_INFOS))
def test_throttled_answers_in_a_row_back_off_exponentially_whatever_the_provider_says(said):
    gates, sent = _gates_in_a_row(HOSTILE_INFOS[said], n=1000)
    # without flow control's floor the told 0 s let every request go at once: 1,000 sent
    assert sent <= 7, (said, sent, gates[:10])
    for k, gate in enumerate(gates[1:], start=1):  # from the second in a row: the backoff
        assert gate >= min(15.0, 0.25 * 2 ** k), (said, k, gates)


def test_a_told_wait_longer_than_the_backoff_still_counts():
    now = [50.0]
    flow = FlowController(FlowControl(), clock=lambda: now[0])

    async def scenario() -> list[float | None]:
        gates = []
        for told in (2.0, 0.2, 7.0):
            ticket = await asyncio.wait_for(flow.admit(), 5)
            gates.append(flow.settle(ticket, throttled=True,
                                     info=RateLimitInfo(retry_after_s=told)))
            now[0] += gates[-1] or 0.0
        return gates

    first, second, third = asyncio.run(scenario())
    assert first == pytest.approx(2.0)  # the first of a streak: as the provider said
    assert 0.5 <= second <= 1.0  # 0.2 s told the second time in a row: the backoff
    assert third == pytest.approx(7.0)  # longer than the backoff (1-2 s): as told


def test_a_burst_of_throttled_answers_counts_once_and_an_answer_ends_the_streak():
    now = [10.0]
    flow = FlowController(FlowControl(), clock=lambda: now[0])
    zero = RateLimitInfo(retry_after_s=0.0)

    async def scenario() -> tuple[list[float | None], float | None, float | None]:
        burst = [await asyncio.wait_for(flow.admit(), 5) for _ in range(8)]
        gates = [flow.settle(t, throttled=True, info=zero) for t in burst]
        now[0] += 0.5
        again = await asyncio.wait_for(flow.admit(), 5)
        second = flow.settle(again, throttled=True, info=zero)  # the second in a row
        now[0] += second or 0.0
        answered = await asyncio.wait_for(flow.admit(), 5)
        flow.settle(answered, throttled=False)  # sent after the gate: the streak ends
        fresh = await asyncio.wait_for(flow.admit(), 5)
        return gates, second, flow.settle(fresh, throttled=True, info=zero)

    gates, second, fresh = asyncio.run(scenario())
    # the 8 answers of calls sent together are one throttle, not 8 (which would be 30 s)
    assert all(g is not None and g <= 0.5 for g in gates), gates
    assert second is not None and 0.5 <= second <= 1.0
    assert fresh is not None and 0.25 <= fresh <= 0.5  # from the start again


# -- on the wire: what an OpenAIChatModel sends to a provider that keeps saying "now" -------
PAST = "Mon, 01 Jan 2001 00:00:00 GMT"
HOSTILE_HEADERS = {
    "Retry-After 0": {"retry-after": "0"},
    "Retry-After -5": {"retry-after": "-5"},
    "Retry-After 0.001": {"retry-after": "0.001"},
    "Retry-After a date in the past": {"retry-after": PAST},
    "retry-after-ms 0": {"retry-after-ms": "0"},
    "no requests left, reset 0s": {"x-ratelimit-limit-requests": "10",
                                   "x-ratelimit-remaining-requests": "0",
                                   "x-ratelimit-reset-requests": "0s"},
}


def _always_429(headers: dict[str, str]):
    def answer(req: dict[str, Any]):
        return 429, {"error": {"message": "slow down", "type": "rate_limit"}}, headers
    return answer


@pytest.mark.parametrize("said", list(HOSTILE_HEADERS))
def test_a_provider_that_throttles_while_it_says_now_is_not_stormed(said, probes):
    with WireServer(_always_429(HOSTILE_HEADERS[said])) as srv:
        agent = asker({"gpt": ResourceDescriptor(
            OpenAIChatModel, base_url=f"{srv.url}/v1", default_model="gpt-test",
            flow_control=FlowControl(max_throttle_wait_s=1.5))},
            {"smart": {"connection": "gpt"}})
        [out] = run(agent, [{"key": "a", "q": "hi", "model": "smart"}]).outputs
        sent = len(srv.requests)
    # held 1.5 s at most: 0.25-0.5 s, then 0.5-1 s, ... (before: about 500 requests)
    assert 2 <= sent <= 5, (said, sent)
    assert out["error"].startswith(
        "ProviderError: chat model 'smart' (connection 'gpt') gave up after its provider "
        f"throttled the call {sent} times in a row: held "), out["error"]
    assert "past max_throttle_wait_s (1.5 s)" in out["error"]
    assert out["error"].endswith("Error code: 429 - slow down (status 429)"), out["error"]


def test_an_answer_after_the_throttles_is_still_sent_and_answered(probes):
    def answer(req: dict[str, Any]):
        if req["n"] < 3:
            return 429, {"error": {"message": "slow down"}}, {"retry-after": "0"}
        return 200, openai_reply("fine", n=req["n"])

    with WireServer(answer) as srv:
        agent = asker({"gpt": ResourceDescriptor(OpenAIChatModel, base_url=f"{srv.url}/v1",
                                                 default_model="gpt-test")},
                      {"model": {"connection": "gpt"}})
        [out] = run(agent, [{"key": "a", "q": "hi"}]).outputs
        assert out["error"] is None and out["content"] == "fine"
        assert out["metadata"]["throttled"] == 3 and len(srv.requests) == 4


# -- every failure flow control ends names the setup and its connection ---------------------
def test_a_529_held_past_the_bound_names_setup_connection_and_the_time_held(probes):
    agent = asker({"claude": ResourceDescriptor(
        Throttles, label="h-529", throttle_first=100, status=529, retry_after=0.1,
        flow_control=FlowControl(max_throttle_wait_s=0.4))}, {"opus": {"connection": "claude"}})
    [out] = run(agent, [{"key": "a", "q": "hi", "model": "opus"}]).outputs
    error = out["error"]
    assert error.startswith("ProviderError: chat model 'opus' (connection 'claude') gave up "
                            "after its provider throttled the call 2 times in a row: held "), error
    assert "in all, past max_throttle_wait_s (0.4 s) (the provider asked for 0.1 s; a longer " \
           "backoff after throttled answers in a row); its last answer: slow down " \
           "(status 529)" in error, error
    assert probes["h-529"] == 2


def test_a_retry_after_past_the_bound_names_what_the_provider_asked(probes):
    agent = asker({"gpt": ResourceDescriptor(
        Throttles, label="h-long", throttle_first=100, retry_after=100.0,
        flow_control=FlowControl(max_throttle_wait_s=3))}, {"model": {"connection": "gpt"}})
    [out] = run(agent, [{"key": "a", "q": "hi"}]).outputs
    assert out["error"] == (
        "ProviderError: chat model 'model' (connection 'gpt') gave up after its provider "
        "throttled the call once: held 0 s so far, it would have to wait 100 s more, 100 s in "
        "all, past max_throttle_wait_s (3 s) (as the provider asked); its last answer: slow "
        "down (status 429)")
    assert probes["h-long"] == 1


def test_a_call_not_sent_into_a_closed_gate_says_how_long_it_was_held_in_all(probes):
    # key a is answered 429 with Retry-After 0.6 s, past the 0.4 s bound: it gives up; key b,
    # right after, is not sent into the gate a's answer closed (before, its message said only
    # "told to wait 0.6 s more", not the time held in all the bound is about)
    agent = asker({"gpt": ResourceDescriptor(
        Throttles, label="h-gate", throttle_first=100, retry_after=0.6,
        flow_control=FlowControl(max_throttle_wait_s=0.4))}, {"model": {"connection": "gpt"}})
    res = run(agent, [{"key": "a", "q": "1"}, {"key": "b", "q": "2"}], max_in_flight=1)
    first, second = res.outputs
    assert first["error"].startswith("ProviderError: chat model 'model' (connection 'gpt') "
                                     "gave up after its provider throttled the call once")
    assert second["error"].startswith(
        "ProviderError: chat model 'model' (connection 'gpt') was not sent: its provider "
        "throttled the connection (last answer: status 429, asking to wait 0.6 s); held "), \
        second["error"]
    assert second["error"].endswith("in all, past max_throttle_wait_s (0.4 s) (status 429)")
    assert probes["h-gate"] == 1


class SpentWindow(ChatModelConnection):
    """Answers, saying no request is left in its window for an hour."""

    def chat(self, messages, **kwargs) -> ChatResponse:
        count("h-window")
        report_rate_limit(RateLimitInfo(limit_requests=10, remaining_requests=0,
                                        reset_requests_s=3600))
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content="ok"))


def test_a_call_not_sent_into_a_spent_window_names_the_window(probes):
    agent = asker({"gpt": ResourceDescriptor(SpentWindow, flow_control=FlowControl(
        max_throttle_wait_s=2))}, {"model": {"connection": "gpt"}})
    first, second = run(agent, [{"key": "a", "q": "1"}, {"key": "b", "q": "2"}],
                        max_in_flight=1).outputs
    assert first["error"] is None
    assert second["error"].startswith(
        "ProviderError: chat model 'model' (connection 'gpt') was not sent: its provider's "
        "rate-limit window is spent (no requests or tokens left until it resets); held "), \
        second["error"]
    assert "it would have to wait 3600 s more" in second["error"]
    assert probes["h-window"] == 1


def test_a_503_not_retried_past_the_bound_names_setup_and_connection(probes):
    agent = asker({"gpt": ResourceDescriptor(
        Throttles, label="h-503", throttle_first=100, status=503, retry_after=1e9,
        flow_control=FlowControl(max_throttle_wait_s=3))},
        {"model": {"connection": "gpt", "error_policy": "retry"}})
    [out] = run(agent, [{"key": "a", "q": "hi"}]).outputs
    assert out["error"] == (
        "ProviderError: chat model 'model' (connection 'gpt') was not retried: its provider "
        "asked to wait 1e+09 s, past max_throttle_wait_s (3 s); its last answer: slow down "
        "(status 503)")


@pytest.mark.parametrize("retry_after", [0.0, 100.0])
def test_the_named_error_keeps_the_providers_type_and_status(retry_after, probes):
    from flink_agents_py.runtime._model_calls import call_model

    conn = Throttles(label="h-type", throttle_first=100, retry_after=retry_after,
                     flow_control=FlowControl(max_throttle_wait_s=0.5))
    setup = ChatModelSetup(connection="gpt")
    conn.bind(lambda name, kind: setup, "gpt")
    setup.bind(lambda name, kind: conn, "model")
    with pytest.raises(ProviderError) as caught:
        asyncio.run(call_model(setup, [ChatMessage(content="hi")], None,
                               resolve=lambda name: setup))
    error = caught.value
    assert type(error) is ProviderError and error.status_code == 429 and error.retryable
    assert error_class(error) == "throttled"  # error policies and fallbacks see a 429
    assert str(error).startswith("chat model 'model' (connection 'gpt') gave up after its "
                                 "provider throttled the call "), str(error)
    assert isinstance(error.__cause__, ProviderError)  # the provider's own error


def test_a_fallback_still_answers_for_a_named_throttled_error(probes):
    agent = asker({"gpt": ResourceDescriptor(
        Throttles, label="h-fb", throttle_first=100, retry_after=0.0,
        flow_control=FlowControl(max_throttle_wait_s=0.5)),
        "up": ResourceDescriptor(Throttles, label="h-up", reply="cheap")},
        {"model": {"connection": "gpt", "fallbacks": ["cheap"]}, "cheap": {"connection": "up"}})
    [out] = run(agent, [{"key": "a", "q": "hi"}]).outputs
    assert out["content"] == "cheap: hi" and out["metadata"]["model_setup"] == "cheap"
    [why] = out["metadata"]["fallback_errors"]
    assert why.startswith("model: ProviderError: chat model 'model' (connection 'gpt') gave "
                          "up after its provider throttled the call "), why


# -- as a user runs it: their script, in a directory of their own ---------------------------
USER_SCRIPT = '''
import json
from http.server import BaseHTTPRequestHandler

import flink_agents_py
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, ChatRequestEvent,
    ChatResponseEvent, FlowControl, InputEvent, OutputEvent, ResourceDescriptor,
    ResourceType, RunnerContext, action)
from flink_agents_py.integrations.chat_models import OpenAIChatModel
from flink_agents_py.testing import LocalHTTPServer

SENT = []


class Provider(BaseHTTPRequestHandler):
    """Says 429 to everything, with Retry-After: 0."""

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        SENT.append(1)
        body = json.dumps({"error": {"message": "slow down"}}).encode()
        self.send_response(429)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.send_header("retry-after", "0")
        self.end_headers()
        self.wfile.write(body)


class Support(Agent):
    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(ChatRequestEvent(model="triage",
                                        messages=[ChatMessage(content=event.input["q"])]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"error": event.error}))


with LocalHTTPServer(Provider) as server:
    agent = Support()
    agent.add_resource("openai", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        OpenAIChatModel, base_url=server.url + "/v1", default_model="gpt-test",
        flow_control=FlowControl(max_throttle_wait_s=1.5)))
    agent.add_resource("triage", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="openai"))
    result = (AgentsExecutionEnvironment.local()
              .from_list([{"key": "ticket-1", "q": "my order is late"}]).apply(agent).run())
print(json.dumps({"module": flink_agents_py.__file__, "requests": len(SENT),
                  "error": result.outputs[0]["error"]}))
'''


def test_a_users_script_against_a_provider_saying_retry_after_0(tmp_path):
    (tmp_path / "support_bot.py").write_text(textwrap.dedent(USER_SCRIPT))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(ROOT)  # this checkout, as a user's installed package
    done = subprocess.run([sys.executable, "support_bot.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["module"].startswith(str(ROOT)), report
    assert 2 <= report["requests"] <= 5, report  # before: about 500 in the 1.5 s
    assert report["error"].startswith(
        "ProviderError: chat model 'triage' (connection 'openai') gave up after its provider "
        "throttled the call "), report
    assert "(the provider asked for 0 s; a longer backoff after throttled answers in a " \
           "row)" in report["error"], report


# -- failures are no answers: they do not raise the concurrency limit ----------------------
def test_failed_calls_neither_raise_the_limit_nor_end_a_throttled_streak():
    now = [100.0]
    flow = FlowController(FlowControl(initial_concurrency=4), clock=lambda: now[0])

    async def scenario() -> None:
        tickets = [await flow.admit() for _ in range(4)]
        for t in tickets:  # 5xx, timeouts, dropped connections: the provider is in trouble
            flow.settle(t, throttled=False, answered=False)
        assert flow.limit == 4.0  # before: 8, one more per failure (slow start)
        gate = flow.settle(await flow.admit(), throttled=True)
        assert gate is not None
        now[0] += gate
        flow.settle(await flow.admit(), throttled=False, answered=False)  # a timeout
        assert flow.limit == 1.0  # halved from 1 in flight, not grown back by the failure
        now[0] += 0.01
        again = flow.settle(await flow.admit(), throttled=True)
        assert again is not None and again >= 0.5  # the streak goes on: the 2nd backoff

    asyncio.run(scenario())


class Unavailable(ChatModelConnection):
    """Fails every call with a 503 that names no time to wait."""

    label: str = "unavailable"

    def chat(self, messages, **kwargs) -> ChatResponse:
        count(self.label)
        raise ProviderError("upstream down", status_code=503, retryable=True)


def test_a_provider_that_fails_every_call_does_not_get_more_calls_at_once(probes):
    agent = asker({"conn": ResourceDescriptor(
        Unavailable, label="down", flow_control=FlowControl(initial_concurrency=2))},
        {"model": {"connection": "conn", "error_policy": "retry", "retry_max_attempts": 2,
                   "retry_initial_backoff_s": 0.01, "retry_max_backoff_s": 0.01}})
    res = run(agent, [{"key": f"k{i}", "q": i} for i in range(6)])
    assert all(o["error"] and "upstream down" in o["error"] for o in res.outputs)
    assert probes["down"] == 12
    assert res.metrics["flow_concurrency_limit"] == {"model": 2}  # before: 14


@pytest.mark.parametrize("field", ["max_throttle_wait_s", "requests_per_minute",
                                   "tokens_per_minute"])
def test_an_infinite_bound_is_refused_where_it_is_set(field):
    # before: FlowControl(max_throttle_wait_s=inf) was taken, so a provider answering 429
    # for ever held its calls (and their keys' later records) for ever
    import pydantic

    with pytest.raises(pydantic.ValidationError, match=f"{field}[\\s\\S]*finite number"):
        FlowControl(**{field: float("inf")})
    with pytest.raises(pydantic.ValidationError, match="retry_max_backoff_s"):
        ChatModelSetup(connection="c", retry_max_backoff_s=float("inf"))
