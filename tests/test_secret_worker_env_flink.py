"""An API key in the environment stays out of the MiniCluster's log in process mode.

Beam logs a process-mode Python worker's whole environment (``Closing environment ...
payload``) in the TaskManager log when the worker's environment closes: the variable an
``api_key_env`` names was there in plain text, past the Python masking of secrets. The job
runs as a user runs it, from a temporary directory, its log in a directory of its own
(``FLINK_LOG_DIR``).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
import uuid

import pytest

pytestmark = pytest.mark.flink

pytest.importorskip("pyflink")

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else pathlib.Path(sys.executable))

USER_AGENTS = '''
import os

from flink_agents_py.api import (
    Agent, ChatMessage, ChatModelConnection, ChatModelSetup, ChatResponse, InputEvent,
    MessageRole, OutputEvent, ResourceDescriptor, ResourceType, RunnerContext, action)


class KeyedConnection(ChatModelConnection):
    api_key_env: str = "WORKER_ENV_KEY"

    def chat(self, messages, *, model=None, tools=(), output_schema=None, **options):
        assert os.environ[self.api_key_env]
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content="ok"))


class Asker(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        answer = await ctx.chat("m", [ChatMessage(content="hi")])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "answer": answer.message.content}))


def asker() -> Asker:
    agent = Asker()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(KeyedConnection))
    agent.add_resource("m", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn"))
    return agent
'''

MAIN = '''
from pyflink.common import Types

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.flink import create_stream_environment
from my_agents import asker

env = create_stream_environment(execution_mode="process", restart_attempts=0)
records = env.from_collection([{"key": "a"}, {"key": "b"}],
                              type_info=Types.PICKLED_BYTE_ARRAY())
out = AgentsExecutionEnvironment.flink(env).from_datastream(records).apply(asker())
with out.to_datastream().execute_and_collect("worker-env") as results:
    for row in results:
        print("OUT", row["answer"], flush=True)
'''


@pytest.mark.timeout(300)
def test_the_process_mode_workers_environment_is_not_written_to_the_taskmanager_log(tmp_path):
    (tmp_path / "my_agents.py").write_text(textwrap.dedent(USER_AGENTS))
    (tmp_path / "main.py").write_text(textwrap.dedent(MAIN))
    key = f"wk-{uuid.uuid4().hex}"
    logs = tmp_path / "log"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FLINK_CONF_DIR")}
    env.update(WORKER_ENV_KEY=key, FLINK_LOG_DIR=str(logs), PYTHONPATH=str(ROOT))
    res = subprocess.run([PYTHON, "main.py"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=280, check=False)
    assert res.returncode == 0, res.stderr[-4000:]
    assert res.stdout.count("OUT ok") == 2
    [log] = list(logs.glob("flink-*.log"))
    text = log.read_text(errors="replace")
    assert key not in text, "the API key's variable was written to the TaskManager log"
    assert key not in res.stdout + res.stderr
