"""A chat's ``output_schema`` class changed between the checkpoint and the restore.

A user's module in a temporary directory outside the repository asks a chat for a ``Rating``
and then makes a slow call; the checkpoint is taken while that call is in flight, so the
chat's answer is recorded. The new code, restored in another process, asks for a changed
``Rating``. Before, the recorded answer that no longer fit the class was raised into the
action as a ``ChatResponseError``, which the action caught and went on without the answer
the model gave (and was paid for): now the replay diverges, naming the call, the class and
what does not fit, as a recorded result whose model class changed does. A change the
recorded answer still fits replays it.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(180)

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else pathlib.Path(sys.executable))

AGENT = '''
import os
import time

from pydantic import BaseModel

from flink_agents_py.api import (
    Agent, ChatMessage, ChatModelSetup, InputEvent, OutputEvent, ResourceDescriptor,
    ResourceType, RunnerContext, action, qualified_name)
from flink_agents_py.integrations.chat_models import ScriptedChatModel


def log(line):
    with open(os.environ["CALLS_LOG"], "a") as f:
        f.write(line + "\\n")


class Rating(BaseModel):
{fields}


def answer(request):
    log("model")
    return '{{"score": 4, "reasons": ["soft"]}}'


def slow(tag):
    log(f"slow {{tag}}")
    time.sleep(0.3)
    return tag


class Asker(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        try:
            r = await ctx.chat("model", [ChatMessage(content="rate it")], output_schema=Rating)
            rating = r.structured.model_dump()
        except Exception as e:  # what a user may write: goes on without the rating
            log(f"fallback {{type(e).__name__}}")
            rating = None
        await ctx.durable_execute_async(slow, "s")
        ctx.send_event(OutputEvent(output=rating))


def make():
    agent = Asker()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(ScriptedChatModel, function=qualified_name(answer)))
    agent.add_resource("model", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn"))
    return agent
'''

MAIN = '''
"""Usage: main.py snapshot | restore"""
import json
import logging
import sys

from flink_agents_py import AgentsExecutionEnvironment

import agent

logging.basicConfig(level=logging.WARNING, format="LOG %(levelname)s %(message)s")
job = AgentsExecutionEnvironment.local().from_list([{"key": "k"}]).apply(agent.make())
if sys.argv[1] == "snapshot":
    saved = []

    def at_the_slow_call(job):
        for entry in job.snapshot()["keys"]:
            calls = ((entry["run"] or {}).get("inflight", {}).get("r0/ask") or {}).get("calls", {})
            if not saved and "1" in calls and not calls["1"]["done"]:
                saved.append(job.snapshot())

    job.run(on_step=at_the_slow_call)
    with open("snap.json", "w") as f:
        json.dump(saved[0], f)
else:
    with open("snap.json") as f:
        job.restore(json.load(f))
    result = job.run()
    print("RESULT", json.dumps({"outputs": result.outputs,
                                "errors": [[e.error_type, e.message] for e in result.errors]}))
'''

V1 = "    score: int\n    reasons: list[str] = []"


def _run(d: pathlib.Path, phase: str, seed: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(ROOT), PYTHONHASHSEED=seed, CALLS_LOG=str(d / "calls.log"))
    proc = subprocess.run([PYTHON, "main.py", phase], cwd=d, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def _deploy(d: pathlib.Path, fields: str) -> None:
    (d / "agent.py").write_text(textwrap.dedent(AGENT).format(fields=fields))
    for cached in d.glob("__pycache__/agent*"):
        cached.unlink()


def _restored_with(tmp_path: pathlib.Path, fields: str) -> tuple[dict, list[str]]:
    d = tmp_path / "user_project"
    d.mkdir()
    assert not str(d).startswith(str(ROOT))
    (d / "main.py").write_text(textwrap.dedent(MAIN))
    _deploy(d, V1)
    _run(d, "snapshot", "1")
    _deploy(d, fields)
    proc = _run(d, "restore", "2")
    [line] = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    return json.loads(line[len("RESULT "):]), (d / "calls.log").read_text().splitlines()


@pytest.mark.parametrize(("fields", "named"), [
    ("    score: str\n    reasons: list[str] = []", "Input should be a valid string"),
    (V1 + "\n    summary: str", "summary Field required"),
])
def test_a_recorded_answer_that_no_longer_fits_the_class_diverges_even_if_caught(
        tmp_path, fields, named):
    result, calls = _restored_with(tmp_path, fields)
    assert result["outputs"] == []
    [[error_type, message]] = result["errors"]
    assert error_type == "ReplayDivergenceError" and "r0/ask/c0" in message
    assert "structured output recorded for the chat call 'model' does not fit the " \
           "output_schema class Rating" in message and named in message
    assert calls.count("model") == 1 and calls.count("slow s") == 1  # nothing ran again


@pytest.mark.parametrize("fields", [V1, V1 + "\n    summary: str = ''"])
def test_a_recorded_answer_that_still_fits_the_class_replays(tmp_path, fields):
    result, calls = _restored_with(tmp_path, fields)
    assert result["errors"] == []
    [rating] = result["outputs"]
    assert rating["score"] == 4 and rating["reasons"] == ["soft"]
    assert calls.count("model") == 1  # (the slow call had only started: it runs again)
