"""A chat's model call keeps its identity across code versions: its answer is replayed.

The digest of a chat's model call is made of the call's messages in their JSON form; the
built-in chat action writes the usual message's form directly (``_chat_steps.
model_call_json``) instead of through the general walk. Both must give the same digest,
or a job checkpointed by one version finds its recorded answers "made with other
arguments" under the other: the replay diverges, or the model is asked (and paid) twice.

A user's module in a temporary directory outside the repository sends a chat whose request
holds messages of each kind (a named system message, a user message, a tool message, one
with ``extra_args``), and runs on the local runner with a ``SqliteJournal``. The checkpoint
is taken while the model call is in flight; the process dies once the answer is journaled.
The restore, in another process, runs this tree's code with the same journal: the answer is
replayed from the journal and the model is asked once in all. The checkpointing process
runs this tree's code, or an older tree's (``FLINK_AGENTS_BEFORE_TREE``, default
``/tmp/before``: a copy of the code before the direct form, when there is one).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from flink_agents_py.api import ChatMessage, MessageRole, ToolCall
from flink_agents_py.runtime._chat_steps import model_call_json
from flink_agents_py.runtime._serde import to_json_value
from flink_agents_py.runtime.recorder._outcomes import call_digest

pytestmark = pytest.mark.timeout(180)

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else pathlib.Path(sys.executable))
BEFORE = pathlib.Path(os.environ.get("FLINK_AGENTS_BEFORE_TREE", "/tmp/before"))

AGENT = """
import os
import time

from flink_agents_py.api import (
    Agent, ChatMessage, ChatModelConnection, ChatModelSetup, ChatRequestEvent, ChatResponse,
    ChatResponseEvent, InputEvent, MessageRole, OutputEvent, ResourceDescriptor, RunnerContext,
    action, chat_model_connection, chat_model_setup)


def log(line):
    with open(os.environ["CALLS_LOG"], "a") as f:
        f.write(line + "\\n")


class SlowModel(ChatModelConnection):
    def chat(self, messages, **kwargs):
        log("model " + messages[1].content)
        time.sleep(0.5)
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT,
                                                content="answer to " + messages[1].content))


class Asker(Agent):
    @chat_model_connection
    @staticmethod
    def conn():
        return ResourceDescriptor(SlowModel)

    @chat_model_setup
    @staticmethod
    def model():
        return ResourceDescriptor(ChatModelSetup, connection="conn")

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(ChatRequestEvent(model="model", messages=[
            ChatMessage(role=MessageRole.SYSTEM, content="be brief", name="rules"),
            ChatMessage(content=event.input["q"]),
            ChatMessage(role=MessageRole.TOOL, content="42", tool_call_id="t1", name="calc"),
            ChatMessage(content="and", extra_args={"tone": "dry", "n": [1, 2.5]}),
        ]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={
            "error": event.error,
            "text": event.response.content if event.response else None}))
"""

MAIN = """
import json
import logging
import os
import sys

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.runtime import HostOptions, SqliteJournal

import agent

logging.basicConfig(level=logging.WARNING, format="LOG %(levelname)s %(message)s")
journal = SqliteJournal("journal.db")


def in_flight(job):
    for entry in job.snapshot()["keys"]:
        for rec in (entry["run"] or {}).get("inflight", {}).values():
            yield from rec.get("calls", {}).values()


def job_of(options):
    return AgentsExecutionEnvironment.local(options=options).from_list(
        [{"key": "k", "q": "why"}]).apply(agent.Asker())


if sys.argv[1] == "crash":
    saved = []

    def checkpoint(job):  # while the model call is in flight
        calls = list(in_flight(job))
        if not saved and len(calls) == 1 and not calls[0]["done"]:
            saved.append(job.snapshot())
            with open("snap.json", "w") as f:
                json.dump(saved[0], f)

    def die(point, key, info):  # once the answer is journaled (after the checkpoint)
        if point == "call_recorded" and saved:
            os._exit(3)

    job_of(HostOptions(journal=journal, failpoint=die)).run(on_step=checkpoint)
    raise SystemExit("never died")
job = job_of(HostOptions(journal=journal))
with open("snap.json") as f:
    job.restore(json.load(f))
result = job.run()
print("RESULT", json.dumps({"outputs": result.outputs,
                            "errors": [[e.error_type, e.message] for e in result.errors]}))
"""


def _run(d: pathlib.Path, tree: pathlib.Path, phase: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(tree), CALLS_LOG=str(d / "calls.log"))
    return subprocess.run(
        [PYTHON, "main.py", phase], cwd=d, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("checkpointed_by", ["this tree", "the tree before"])
def test_a_chat_answer_journaled_by_either_version_is_replayed_not_asked_again(
    tmp_path, checkpointed_by
):
    old = ROOT if checkpointed_by == "this tree" else BEFORE
    if not (old / "flink_agents_py").is_dir():
        pytest.skip(f"no older tree at {old} (FLINK_AGENTS_BEFORE_TREE)")
    d = tmp_path / "user_project"
    d.mkdir()
    assert not str(d).startswith(str(ROOT))
    (d / "agent.py").write_text(textwrap.dedent(AGENT))
    (d / "main.py").write_text(textwrap.dedent(MAIN))
    crashed = _run(d, old, "crash")
    assert crashed.returncode == 3, crashed.stderr[-4000:]
    assert (d / "calls.log").read_text().splitlines() == ["model why"]
    restored = _run(d, ROOT, "restore")
    assert restored.returncode == 0, restored.stderr[-4000:]
    [line] = [x for x in restored.stdout.splitlines() if x.startswith("RESULT ")]
    result = json.loads(line[len("RESULT ") :])
    assert result == {"outputs": [{"error": None, "text": "answer to why"}], "errors": []}
    assert (d / "calls.log").read_text().splitlines() == ["model why"]  # replayed: asked once
    assert "LOG WARNING" not in restored.stderr and "LOG ERROR" not in restored.stderr


class _Role(str):
    """A ``str`` subclass (a value whose JSON form the general walk decides)."""


class _Noted(ChatMessage):
    """A message class of a program's own (tagged with its own class)."""

    note: str = ""


_MESSAGES = [
    ChatMessage(content="hi"),
    ChatMessage(role=MessageRole.SYSTEM, content="be brief", name="rules"),
    ChatMessage(role=MessageRole.TOOL, content="42", tool_call_id="t1", name="calc"),
    ChatMessage(
        role=MessageRole.ASSISTANT,
        content="",
        tool_calls=[ToolCall(id="t1", name="calc", arguments={"x": (1, 2)})],
    ),
    ChatMessage(content="x", extra_args={"tone": "dry", "when": {"$model": "a", "data": 1}}),
    ChatMessage(role=MessageRole.ASSISTANT, content="ok", reasoning=[{"type": "t", "text": "r"}]),
    ChatMessage(content=_Role("sub")),
    _Noted(content="noted", note="n"),
]


@pytest.mark.parametrize("schema", [None, {"type": "object"}, {"$model": "x", "data": {}}])
@pytest.mark.parametrize("i", range(len(_MESSAGES)))
def test_the_direct_form_of_a_model_calls_arguments_is_the_general_walks(i, schema):
    messages = [_MESSAGES[0], _MESSAGES[i]]
    direct = model_call_json(messages, schema)
    assert direct == to_json_value([messages, schema], "arguments")
    assert call_digest("f", (messages, schema), {}, "c", args_json=direct) == call_digest(
        "f", (messages, schema), {}, "c"
    )


def test_arguments_the_direct_form_cannot_take_are_left_to_the_general_walk():
    import enum

    class Level(enum.Enum):
        HIGH = "high"

    assert model_call_json([ChatMessage(content="\ud800")], None) is None  # no UTF-8 form
    assert model_call_json([ChatMessage(content="x")], {"enum": [Level.HIGH]}) is None
    assert model_call_json([ChatMessage(content="x", extra_args={"s": {1}})], None) is None
