"""A provider that throttles is said on stderr, not only held silently.

Found by a newcomer: a chat against a local server answering every request 429 with
``Retry-After: 1`` printed nothing for minutes (each call is held up to
``max_throttle_wait_s``, 300 s by default) and looked hung. Now the first throttled answer of
a streak logs a WARNING naming the connection, the status and what the call does meanwhile,
at most once a minute per connection.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(120)

USER_PROGRAM = """
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, FlowControl, InputEvent,
                                 OutputEvent, ResourceDescriptor, ResourceType, action)
from flink_agents_py.integrations.chat_models import OpenAIChatModel


class Throttles(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = b'{"error": {"message": "slow down", "type": "rate_limit"}}'
        self.send_response(429)
        self.send_header("Retry-After", "1")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


server = ThreadingHTTPServer(("127.0.0.1", 0), Throttles)
threading.Thread(target=server.serve_forever, daemon=True).start()


class Asker(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event, ctx):
        answer = await ctx.chat("smart", [ChatMessage(content=event.input["q"])])
        ctx.send_event(OutputEvent(output=answer.message.content))


agent = Asker()
agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
    OpenAIChatModel, base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
    default_model="m", api_key_env="MY_KEY", flow_control=FlowControl(max_throttle_wait_s=2.5)))
agent.add_resource("smart", ResourceType.CHAT_MODEL, ResourceDescriptor(
    ChatModelSetup, connection="conn"))
records = [{"key": k, "q": "hi"} for k in ("a", "b", "c")]
result = AgentsExecutionEnvironment.local().from_list(records).apply(agent).run()
print(len(result.outputs), len(result.errors))
"""


def test_a_throttling_provider_is_warned_of_once_naming_what_the_calls_do(tmp_path):
    (tmp_path / "mine.py").write_text(textwrap.dedent(USER_PROGRAM))
    done = subprocess.run(
        [sys.executable, "mine.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MY_KEY": "sk-test"},
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["0", "3"]  # every chat gave up after max_throttle_wait_s
    warnings = [line for line in done.stderr.splitlines() if "throttled a call" in line]
    assert len(warnings) == 1, done.stderr[-3000:]  # once a minute per connection, not per call
    # the connection by its resource name, not only its class: two OpenAI connections (two
    # providers, or two keys' tiers) were told apart by nothing (found by a newcomer)
    assert "connection 'conn' (OpenAIChatModel)" in warnings[0], warnings[0]
    assert "status 429" in warnings[0]
    assert "max_throttle_wait_s (2.5 s)" in warnings[0]
