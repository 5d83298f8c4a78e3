"""Provider SDK clients are closed on their event loop before it closes: nothing on stderr.

An ``AsyncOpenAI`` client dropped after its loop closed schedules ``aclose()`` on another
loop, which printed "Task exception was never retrieved ... RuntimeError: Event loop is
closed" once per client after ``check_replay_safety`` (whose restores each run a loop); an
agent with a budget and a fallback setup on one connection showed it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("openai")
pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

PROGRAM = textwrap.dedent("""
    from flink_agents_py.api import (Agent, Budget, ChatMessage, ChatModelSetup, FlowControl,
                                     InputEvent, OutputEvent, ResourceDescriptor, ResourceType,
                                     action)
    from flink_agents_py.integrations.chat_models import OpenAIChatModel
    from flink_agents_py.testing import ThrottlingProvider, check_replay_safety


    class Asker(Agent):
        @action(InputEvent)
        @staticmethod
        async def on_input(event, ctx):
            reply = await ctx.chat("m", [ChatMessage(content=event.input["q"])])
            ctx.send_event(OutputEvent(output={"key": ctx.key, "a": reply.message.content}))


    def asker(url):
        agent = Asker()
        agent.add_resource("gpt", ResourceType.CHAT_MODEL_CONNECTION,
                           ResourceDescriptor(OpenAIChatModel, base_url=url, default_model="x",
                                              flow_control=FlowControl(max_concurrency=16)))
        agent.add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(
            ChatModelSetup, connection="gpt", model="big",
            budget=Budget(max_tokens=30, window_s=None, on_exceeded="fallback", fallback="small")))
        agent.add_resource("small", ResourceType.CHAT_MODEL,
                           ResourceDescriptor(ChatModelSetup, connection="gpt", model="tiny"))
        return agent


    records = [{"key": f"k{i % 2}", "q": f"q{i}"} for i in range(6)]
    with ThrottlingProvider(rate_per_s=3, latency_s=0.01) as fake:
        report = check_replay_safety(asker(fake.base_url), records, max_points=8,
                                     other_process=False)
    print("ok" if report.ok else report.table)
""")


def test_check_replay_safety_with_an_sdk_provider_prints_nothing_on_stderr(tmp_path):
    (tmp_path / "quiet.py").write_text(PROGRAM)
    env = {**os.environ, "OPENAI_API_KEY": "unused-in-this-test"}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([str(PYTHON), "quiet.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=170)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "ok"
    assert "never retrieved" not in proc.stderr and "Event loop is closed" not in proc.stderr
    # the fake provider throttles (3 calls/s): flow control's once-a-minute warning that a
    # provider throttles is news a user wants; anything else on stderr is shutdown noise
    noise = [line for line in proc.stderr.splitlines()
             if "flink_agents_py.runtime._flow: the provider of" not in line]
    assert noise == [], proc.stderr[-3000:]
