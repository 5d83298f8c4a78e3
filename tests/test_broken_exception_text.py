"""An exception whose ``__str__`` raises is reported like any other, wherever it is reported.

A user's (or a library's) exception class with a broken ``__str__`` made the report of the
failure fail where the report formatted ``f"{type(e).__name__}: {e}"`` itself: the event log
lost the failed action's records (its observer failed, logged and went on), a Kafka
``parse`` or key selector raising one failed the record's error row and with it the job
(again at every restart). Each place now describes it through one helper
(``api.internal.described``): ``Broken: <str() of the exception failed: RuntimeError>``, as
the error records already did.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAID = "<str() of the exception failed: RuntimeError>"

PROGRAM = '''
import json
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, action
from flink_agents_py.observability import EventLog, MemorySink


class Broken(Exception):
    def __str__(self):
        raise RuntimeError("no text")


class Shop(Agent):
    @action(InputEvent)
    @staticmethod
    def start(event, ctx):
        raise Broken()


sink = MemorySink()
env = AgentsExecutionEnvironment.local(event_log=EventLog(sink=sink))
result = env.from_list([{"key": "a"}]).apply(Shop()).run()
print(json.dumps({
    "logged": [r.get("error") for r in sink.records if r.get("status") == "failed"],
    "errors": [e.message for e in result.errors]}))
'''


def test_the_event_log_keeps_an_action_failure_whose_text_cannot_be_made(tmp_path):
    (tmp_path / "shop.py").write_text(textwrap.dedent(PROGRAM))
    done = subprocess.run([sys.executable, "shop.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["errors"] == [SAID]
    assert out["logged"] == [f"Broken: {SAID}"]  # the event log has the failed action


class Broken(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


def _raise(_: object) -> object:
    raise Broken()


def test_a_kafka_parse_or_key_selector_raising_one_gives_an_error_row():
    pytest.importorskip("pyflink")
    from flink_agents_py.flink._kafka import _Parse, _ToRow

    tag = object()
    [(got_tag, err)] = list(_Parse(_raise, tag)(("t", 2, 9, 0, "k", '{"a": 1}')))
    assert got_tag is tag and err["error"] == f"Broken: {SAID}"
    row = _ToRow("out", _raise)({"id": 1})
    assert f"its Kafka key could not be made (Broken: {SAID})" in row[2]


CHAT_PROGRAM = '''
import json
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent, OutputEvent,
    ResourceDescriptor, ResourceType, action)
from flink_agents_py.integrations.chat_models import ScriptedChatModel


class Broken(Exception):
    def __str__(self):
        raise RuntimeError("no text")


def model(request):
    raise Broken()


class Asker(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event, ctx):
        try:
            await ctx.chat("m", [ChatMessage(role="user", content="hello")])
        except Exception as e:
            ctx.send_event(OutputEvent(output={"caught": type(e).__name__, "text": str(e)}))


agent = Asker()
agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                   ResourceDescriptor(ScriptedChatModel, function="asker:model"))
agent.add_resource("m", ResourceType.CHAT_MODEL,
                   ResourceDescriptor(ChatModelSetup, connection="conn"))
result = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(agent).run()
print(json.dumps({"outputs": result.outputs, "errors": [e.message for e in result.errors]}))
'''


def test_a_chat_whose_model_raises_one_fails_the_chat_not_the_chat_action(tmp_path):
    (tmp_path / "asker.py").write_text(textwrap.dedent(CHAT_PROGRAM))
    done = subprocess.run([sys.executable, "asker.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["errors"] == []
    [caught] = out["outputs"]
    assert f"Broken: {SAID}" in caught["text"], caught  # the caller is told what failed
