"""A ``Retry-After`` sent as a Unix time is the time until then, not 56 years.

Some gateways put the time to retry at in ``Retry-After`` (``Retry-After: 1767225600``, or
``retry-after-ms`` in ms since the epoch), as some put it in the rate-limit resets, which flow
control already read so. Read as a delay it is decades: the throttled call failed at once as
told to wait past ``max_throttle_wait_s``, and the connection's gate stayed closed for the
decades, so every later call of every key failed unsent for the life of the process. Now such
a value is the seconds until that time, as a reset's is.
"""

from __future__ import annotations

import time

import pytest
from test_flow_control import Throttles, asker, run

from flink_agents_py.api import FlowControl, RateLimitInfo, ResourceDescriptor
from flink_agents_py.integrations.chat_models._common import header_retry_after
from flink_agents_py.runtime._flow import sane_rate_limit

pytestmark = pytest.mark.timeout(120)


class ThrottlesUntil(Throttles):
    """Says 429 with ``Retry-After`` the Unix time ``delay_s`` after the call, then answers."""

    delay_s: float = 0.3

    def chat(self, messages, **kwargs):
        self.retry_after = time.time() + self.delay_s
        return super().chat(messages, **kwargs)


def test_a_retry_after_that_is_a_unix_time_holds_the_call_until_then(probes):
    agent = asker(
        {
            "conn": ResourceDescriptor(
                ThrottlesUntil,
                label="epoch-ra",
                throttle_first=1,
                flow_control=FlowControl(max_throttle_wait_s=20),
            )
        },
        {"model": {"connection": "conn"}},
    )
    t0 = time.monotonic()
    res = run(agent, [{"key": "a", "q": "1"}, {"key": "b", "q": "2"}], max_in_flight=1)
    assert time.monotonic() - t0 < 15
    assert res.errors == []
    by_key = {o["key"]: o for o in res.outputs}
    assert {k: (o["error"], o["content"]) for k, o in by_key.items()} == {
        "a": (None, "ok: 1"),
        "b": (None, "ok: 2"),
    }  # (b's call went while a's was held)
    assert by_key["a"]["metadata"]["throttled"] == 1
    assert by_key["a"]["metadata"]["flow_wait_s"] >= 0.2  # the time it named, kept
    assert probes["epoch-ra"] == 3  # 1 throttled, 2 answered


@pytest.mark.parametrize("field", ["retry_after_s", "reset_requests_s", "reset_tokens_s"])
def test_every_wait_said_as_a_unix_time_is_the_seconds_until_then(field):
    info = sane_rate_limit(RateLimitInfo(**{field: time.time() + 5}))
    assert info is not None and 3 < getattr(info, field) <= 5


def test_retry_after_headers_as_unix_times_in_s_and_ms_read_as_the_time_until_then():
    for headers in (
        {"retry-after": str(int(time.time()) + 5)},
        {"retry-after-ms": str(int((time.time() + 5) * 1000))},
    ):
        info = sane_rate_limit(RateLimitInfo(retry_after_s=header_retry_after(headers)))
        assert info is not None and 3 < (info.retry_after_s or 0) <= 5, headers


def test_a_retry_after_unix_time_is_read_on_the_providers_clock_when_its_date_differs():
    from email.utils import formatdate

    ahead = time.time() + 3600  # the provider's clock runs an hour ahead of ours
    headers = {"date": formatdate(ahead, usegmt=True), "retry-after": str(int(ahead) + 5)}
    assert 3 < (header_retry_after(headers) or 0) <= 6


USER_SCRIPT = """
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, FlowControl, InputEvent,
                                 OutputEvent, ResourceDescriptor, ResourceType, action)
from flink_agents_py.integrations.chat_models import OpenAIChatModel

posts = []


class Gateway(BaseHTTPRequestHandler):  # its first answer: 429, retry at the next second
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
            self.send_header("retry-after", str(int(time.time()) + 1))
        self.end_headers()
        self.wfile.write(body)


class Asker(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event, ctx):
        try:
            answer = await ctx.chat("model", [ChatMessage(content="hi")])
            got = answer.message.content
        except Exception as e:
            got = repr(e)[:300]
        ctx.send_event(OutputEvent(output={"key": ctx.key, "got": got}))


server = ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
threading.Thread(target=server.serve_forever, daemon=True).start()
agent = Asker()
agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
    OpenAIChatModel, base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
    max_retries=0, flow_control=FlowControl(max_throttle_wait_s=30)))
agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
    ChatModelSetup, connection="conn", model="m"))
result = AgentsExecutionEnvironment.local(max_in_flight=1).from_list(
    [{"key": "a"}, {"key": "b"}]).apply(agent).run()
server.shutdown()
print(json.dumps({"outputs": sorted(result.outputs, key=lambda o: o["key"]),
                  "posts": len(posts)}))
"""


def test_a_users_job_behind_a_gateway_sending_retry_after_as_a_unix_time(tmp_path):
    import json
    import os
    import pathlib
    import subprocess
    import sys

    import flink_agents_py

    (tmp_path / "gateway.py").write_text(USER_SCRIPT)
    # the package under test (this checkout's), as an installed one is found
    env = {**os.environ, "PYTHONPATH": str(pathlib.Path(flink_agents_py.__file__).parents[1])}
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
        "outputs": [{"key": "a", "got": "fine"}, {"key": "b", "got": "fine"}],
        "posts": 3,
    }
