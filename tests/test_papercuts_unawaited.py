"""An un-awaited call put in an event says "await it", naming what made it.

``OutputEvent(output={"v": ctx.durable_execute_async(fn, x)})`` failed with "DurableCall at
$.output.v has no JSON form", which did not say the call was never awaited.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(120)

SCRIPT = '''
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent, OutputEvent,
                                 ResourceDescriptor, ResourceType, action)
from flink_agents_py.integrations.chat_models import ScriptedChatModel


def price_of(item):
    return len(item)


async def lookup(item):
    return item


class Shop(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event, ctx):
        what = event.input["what"]
        if what == "call":
            value = ctx.durable_execute_async(price_of, "mug")
        elif what == "chat":
            value = ctx.chat("model", [ChatMessage(content="hi")])
        else:
            value = lookup("mug")
        ctx.send_event(OutputEvent(output={"v": value}))


agent = Shop()
agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                   ResourceDescriptor(ScriptedChatModel, default_reply="fine"))
agent.add_resource("model", ResourceType.CHAT_MODEL,
                   ResourceDescriptor(ChatModelSetup, connection="conn"))
result = (AgentsExecutionEnvironment.local()
          .from_list([{"key": w, "what": w} for w in ("call", "chat", "coro")])
          .apply(agent).run())
for e in sorted(result.errors, key=lambda e: e.key):
    print(e.key, "|", e.message)
'''


def test_an_unawaited_call_in_an_event_says_await_it_and_names_the_function(tmp_path: Path):
    (tmp_path / "main.py").write_text(textwrap.dedent(SCRIPT))
    proc = subprocess.run([str(PYTHON), "-W", "ignore", "main.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=100,
                          env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(" | ", 1) for line in proc.stdout.strip().splitlines())
    assert lines["call"].endswith(
        "DurableCall at $.output.v has no JSON form: it is "
        "ctx.durable_execute_async(price_of, ...), not awaited; await it first (value = await "
        "ctx.durable_execute_async(price_of, ...)) and put the value it gives instead")
    assert "ChatFuture at $.output.v has no JSON form: it is ctx.chat('model', ...), not " \
           "awaited; await it first (response = await ctx.chat(...))" in lines["chat"]
    assert "it is the coroutine lookup(...), not awaited; await it first (value = await " \
           "lookup(...))" in lines["coro"]
