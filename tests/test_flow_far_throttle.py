"""A throttle said to last for years closes a connection for ``max_throttle_wait_s`` at most.

A gateway answering 429 with ``Retry-After: Fri, 31 Dec 9999 23:59:59 GMT`` (or a
``retry-after-ms``, an ``x-ratelimit-reset-*`` or an Anthropic reset as far ahead, with nothing
left) closed the connection's gate for as long as it said: every later call of every key
failed at once without being sent, and nothing asked the provider again until the process
restarted. Now such a wait closes the connection for ``max_throttle_wait_s`` at most; then one
call is sent as a probe (the others wait for its answer): answered, the connection is open to
every call again; throttled again, it is closed for the bound again. The call that was told
the far wait still fails at once (its provider asked past the bound: its fallbacks apply).
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import subprocess
import sys
import time

import pytest
from support.probes import count

import flink_agents_py
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    Budget,
    ChatMessage,
    ChatModelConnection,
    ChatModelSetup,
    ChatResponse,
    FlowControl,
    InputEvent,
    MessageRole,
    OutputEvent,
    ProviderError,
    RateLimitInfo,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    TokenUsage,
    action,
)
from flink_agents_py.integrations.chat_models._anthropic import anthropic_rate_limit
from flink_agents_py.integrations.chat_models._openai import openai_rate_limit
from flink_agents_py.runtime import FlowController
from flink_agents_py.runtime._flow import ToldToWaitTooLong

pytestmark = pytest.mark.timeout(60)

YEAR_9999 = "Fri, 31 Dec 9999 23:59:59 GMT"
FAR_9999 = "9999-12-31T23:59:59Z"
CAP_S = 2.0


class Clock:
    """A monotonic clock the test moves (the controller reads it; nothing waits for it)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _controller(**options) -> tuple[FlowController, Clock]:
    clock = Clock()
    return FlowController(FlowControl(max_throttle_wait_s=CAP_S, **options), clock=clock), clock


def test_a_retry_after_in_the_year_9999_closes_the_connection_for_the_bound_then_one_probes():
    async def scenario() -> None:
        # (not adaptive: no concurrency limit, so only the probe holds calls one at a time)
        flow, clock = _controller(adaptive=False)
        info = openai_rate_limit({"retry-after": YEAR_9999})
        wait = flow.settle(await flow.admit(), throttled=True, info=info, status=429)
        assert wait is not None and wait > 1e9  # the told call: past the bound, fails at once
        clock.now += CAP_S / 2
        with pytest.raises(ToldToWaitTooLong) as told:  # meanwhile: fails at once, as told
            await flow.admit_held(30)
        assert told.value.wait_s > 1e9 and told.value.asked_s > 1e9
        clock.now += CAP_S  # the bound passed (before: closed until the year 9999)
        probe, held = await asyncio.wait_for(flow.admit_held(30), 1)
        assert held == 0.0
        other = asyncio.ensure_future(flow.admit_held(30))
        await asyncio.sleep(0.2)
        assert not other.done()  # one call probes; the others wait for its answer
        flow.settle(probe, throttled=False)  # answered: open to every call
        flow.settle((await asyncio.wait_for(other, 5))[0], throttled=False)
        for _ in range(3):
            await asyncio.wait_for(flow.admit(), 1)
        assert flow.stats.in_flight == 3  # open: not one at a time

    asyncio.run(scenario())


def test_a_probe_throttled_again_closes_the_connection_for_the_bound_again():
    async def scenario() -> None:
        flow, clock = _controller()
        info = openai_rate_limit({"retry-after": YEAR_9999})
        flow.settle(await flow.admit(), throttled=True, info=info, status=429)
        clock.now += CAP_S + 0.01
        probe, _ = await asyncio.wait_for(flow.admit_held(30), 1)
        waiting = asyncio.ensure_future(flow.admit_held(30))
        await asyncio.sleep(0.1)
        wait = flow.settle(probe, throttled=True, info=info, status=429)  # throttled again
        assert wait is not None and wait > 1e9
        with pytest.raises(ToldToWaitTooLong):  # closed again: the waiting call fails
            await asyncio.wait_for(waiting, 5)
        clock.now += CAP_S - 0.01
        with pytest.raises(ToldToWaitTooLong):
            await flow.admit_held(30)
        clock.now += 1.0  # the cap again (or the backoff after two in a row: at most 1 s)
        again, _ = await asyncio.wait_for(flow.admit_held(30), 1)
        flow.settle(again, throttled=False)
        assert flow.stats.throttled == 2

    asyncio.run(scenario())


def test_a_probe_that_fails_unanswered_lets_the_next_call_probe():
    async def scenario() -> None:
        flow, clock = _controller()
        flow.settle(
            await flow.admit(), throttled=True, status=429, info=RateLimitInfo(retry_after_s=1e12)
        )
        clock.now += CAP_S + 0.01
        probe, _ = await asyncio.wait_for(flow.admit_held(30), 1)
        waiting = asyncio.ensure_future(flow.admit_held(30))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        flow.settle(probe, throttled=False, answered=False)  # a timeout: no answer
        nxt, _ = await asyncio.wait_for(waiting, 5)  # the next call probes
        assert flow.settle(nxt, throttled=False) is None

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "throttled, info",
    [
        (True, openai_rate_limit({"retry-after": YEAR_9999})),
        (True, openai_rate_limit({"retry-after-ms": "1e15"})),
        (True, openai_rate_limit({"retry-after": "99999999999"})),
        (
            False,
            openai_rate_limit(
                {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "99999999h"}
            ),
        ),
        (
            False,
            openai_rate_limit(
                {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "99999999h"}
            ),
        ),
        (
            True,
            openai_rate_limit(
                {"x-ratelimit-remaining-requests": "-5", "x-ratelimit-reset-requests": "99999999h"}
            ),
        ),
        (
            False,
            anthropic_rate_limit(
                {
                    "anthropic-ratelimit-requests-remaining": "0",
                    "anthropic-ratelimit-requests-reset": FAR_9999,
                }
            ),
        ),
        (
            False,
            anthropic_rate_limit(
                {
                    "anthropic-ratelimit-tokens-remaining": "-1",
                    "anthropic-ratelimit-tokens-reset": FAR_9999,
                }
            ),
        ),
        (
            True,
            anthropic_rate_limit(
                {
                    "anthropic-ratelimit-requests-remaining": "0",
                    "anthropic-ratelimit-requests-reset": FAR_9999,
                    "retry-after": "99999999999",
                }
            ),
        ),
    ],
    ids=[
        "date-9999",
        "retry-after-ms",
        "retry-after-s",
        "openai-requests",
        "openai-tokens",
        "negative-remaining",
        "anthropic-requests",
        "anthropic-tokens",
        "anthropic-429",
    ],
)
def test_every_far_wait_a_provider_says_closes_the_connection_for_the_bound_at_most(
    throttled, info
):
    async def scenario() -> None:
        flow, clock = _controller()
        wait = flow.settle(
            await flow.admit(), throttled=throttled, info=info, status=429 if throttled else None
        )
        assert not throttled or (wait or 0) > 1e9  # the told call fails at once
        with pytest.raises(ToldToWaitTooLong):  # within the bound: failing at once, as told
            await flow.admit_held(30)
        clock.now += CAP_S + 0.01
        ticket, _ = await asyncio.wait_for(flow.admit_held(30), 1)  # before: for years
        flow.settle(ticket, throttled=False)
        again, held = await asyncio.wait_for(flow.admit_held(30), 1)
        assert held == 0.0
        flow.settle(again, throttled=False)

    asyncio.run(scenario())


def test_a_nan_remaining_with_a_far_reset_holds_nothing():
    async def scenario() -> None:
        flow, _ = _controller()
        info = openai_rate_limit(
            {"x-ratelimit-remaining-requests": "nan", "x-ratelimit-reset-requests": "99999999h"}
        )
        flow.settle(await flow.admit(), throttled=False, info=info)
        _, held = await asyncio.wait_for(flow.admit_held(CAP_S), 1)
        assert held == 0.0

    asyncio.run(scenario())


USER_SCRIPT = """
import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, FlowControl, InputEvent,
                                 OutputEvent, ResourceDescriptor, ResourceType, action)
from flink_agents_py.integrations.chat_models import OpenAIChatModel

posts = []


class Gateway(BaseHTTPRequestHandler):  # its first answer: 429 until the year 9999
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        posts.append(1)
        if len(posts) == 1:
            body, status = b'{"error": {"message": "slow down"}}', 429
        else:
            body, status = json.dumps({
                "id": "x", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": "fine"}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode(), 200
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        if status == 429:
            self.send_header("retry-after", "Fri, 31 Dec 9999 23:59:59 GMT")
        self.end_headers()
        self.wfile.write(body)


class Asker(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event, ctx):
        tries = 1 if ctx.key == "a" else 100  # b asks again until answered, 10 s at most
        for _ in range(tries):
            try:
                answer = await ctx.chat("model", [ChatMessage(content="hi")])
                got = answer.message.content
                break
            except Exception as e:
                got = type(e).__name__
                if ctx.key != "a":
                    await ctx.durable_execute_async(asyncio.sleep, 0.1)  # a pause, recorded
        ctx.send_event(OutputEvent(output={"key": ctx.key, "got": got}))


server = ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
threading.Thread(target=server.serve_forever, daemon=True).start()
agent = Asker()
agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
    OpenAIChatModel, base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
    max_retries=0, flow_control=FlowControl(max_throttle_wait_s=1)))
agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
    ChatModelSetup, connection="conn", model="m"))
result = AgentsExecutionEnvironment.local(max_in_flight=1).from_list(
    [{"key": "a"}, {"key": "b"}, {"key": "c"}]).apply(agent).run()
server.shutdown()
print(json.dumps({"outputs": sorted(result.outputs, key=lambda o: o["key"]),
                  "posts": len(posts)}))
"""


def test_a_users_job_behind_a_gateway_throttling_until_the_year_9999_is_answered_again(tmp_path):
    (tmp_path / "gateway.py").write_text(USER_SCRIPT)
    # the package under test (this checkout's), as an installed one is found
    env = {**os.environ, "PYTHONPATH": str(pathlib.Path(flink_agents_py.__file__).parents[1])}
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "gateway.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        # a, told to wait past the bound, fails at once; b's calls fail unsent for the 1 s
        # bound, then one probes and is answered, which opens the connection to c (before:
        # every call after a's failed unsent: b gave up after 100 tries, 1 request in all)
        "outputs": [
            {"key": "a", "got": "ChatResponseError"},
            {"key": "b", "got": "fine"},
            {"key": "c", "got": "fine"},
        ],
        "posts": 3,
    }
    assert time.monotonic() - t0 < 60


class FarThenMetered(ChatModelConnection):
    """Its first call: 429 until the year 9999; then answers, reporting 10 + 5 tokens."""

    label: str

    def chat(self, messages, **kwargs) -> ChatResponse:
        if count(self.label) == 1:
            raise ProviderError(
                "slow down",
                status_code=429,
                retryable=True,
                rate_limit=RateLimitInfo(retry_after_s=2.5e11),
            )
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content="fine"),
            usage=TokenUsage(input_tokens=10, output_tokens=5),
        )


class AskUntilAnswered(Agent):
    """Asks once per record; key ``b`` asks again (a recorded 0.1 s pause) until answered."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        errors = []
        for _ in range(1 if ctx.key == "a" else 100):
            try:
                answer = await ctx.chat("model", [ChatMessage(content="hi")])
            except Exception as e:  # noqa: BLE001 - what the user's loop sees
                errors.append(str(e)[:120])
                await ctx.durable_execute_async(asyncio.sleep, 0.1)
                continue
            ctx.send_event(
                OutputEvent(
                    output={
                        "key": ctx.key,
                        "errors": len(errors),
                        "budget": answer.metadata.get("budget"),
                    }
                )
            )
            return
        ctx.send_event(
            OutputEvent(output={"key": ctx.key, "errors": len(errors), "first": errors[:1]})
        )


def test_calls_failed_or_not_sent_while_closed_spend_no_budget_and_the_probe_does(probes):
    agent = AskUntilAnswered()
    agent.add_resource(
        "conn",
        ResourceType.CHAT_MODEL_CONNECTION,
        ResourceDescriptor(
            FarThenMetered, label="far-budget", flow_control=FlowControl(max_throttle_wait_s=0.5)
        ),
    )
    agent.add_resource(
        "model",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor(
            ChatModelSetup, connection="conn", budget=Budget(max_tokens=15, scope="agent")
        ),
    )
    res = (
        AgentsExecutionEnvironment.local(max_in_flight=1)
        .from_list([{"key": "a"}, {"key": "b"}])
        .apply(agent)
        .run()
    )
    assert res.errors == []
    a, b = sorted(res.outputs, key=lambda o: o["key"])
    assert a["errors"] == 1 and "gave up after its provider throttled" in a["first"][0]
    assert b["errors"] >= 1  # not sent while the connection was closed: failed at once
    # only the probe's answer is spent: 15 of the agent's 15 tokens (the failed calls would
    # have left no room for it)
    assert b["budget"]["decision"] == "within"
    assert b["budget"]["spent"]["input"] == 10 and b["budget"]["spent"]["output"] == 5
    assert probes["far-budget"] == 2
