"""A compat setup's dropped argument is warned of in the program's own process, once.

Flink Agents' resources are pydantic models that ignore what they do not declare, so its
programs pass arguments such as ``think=False`` to an OpenAI setup (its long-term memory
e2e agent does); the compat classes take them and warn that they are dropped. The warning
was given where the resource is built: on Flink, in the Python worker, whose log on a local
MiniCluster is a file the user never reads, so a ported program run there said nothing. It
is now given when the plan is built, in the program's process (once per process: the local
runner, which also builds the resource there, no longer says it twice).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

# an agent written the way Flink Agents' e2e agents are, its imports changed; its own
# connection stands in for the provider
AGENT = """
    from typing import Any

    from flink_agents_py.compat import (
        Agent, BaseChatModelConnection, ChatMessage, ChatRequestEvent, ChatResponseEvent,
        InputEvent, MessageRole, OutputEvent, ResourceDescriptor, ResourceName,
        RunnerContext, action, chat_model_connection, chat_model_setup)


    class EchoConnection(BaseChatModelConnection):
        def chat(self, messages, tools=None, **kwargs: Any) -> ChatMessage:
            return ChatMessage(role=MessageRole.ASSISTANT,
                               content="seen " + messages[-1].content)


    class QwenAgent(Agent):
        @chat_model_connection
        @staticmethod
        def echo_connection() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=f"{__name__}.EchoConnection")

        @chat_model_setup
        @staticmethod
        def qwen() -> ResourceDescriptor:
            return ResourceDescriptor(
                clazz=ResourceName.ChatModel.OPENAI_COMPLETIONS_SETUP,
                connection="echo_connection", model="qwen", think=False)

        @action(InputEvent)
        @staticmethod
        def ask(event: InputEvent, ctx: RunnerContext) -> None:
            ctx.send_event(ChatRequestEvent(model="qwen", messages=[
                ChatMessage(role=MessageRole.USER, content=str(event.input))]))

        @action(ChatResponseEvent)
        @staticmethod
        def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output=event.response.content))
"""

PROGRAM = """
    import sys

    from pyflink.datastream import StreamExecutionEnvironment

    from flink_agents_py.compat import AgentsExecutionEnvironment
    from qwen_agent import QwenAgent

    if sys.argv[1] == "local":
        agents_env = AgentsExecutionEnvironment.get_execution_environment()
        out = agents_env.from_list([{"key": "a", "value": "hi"}]).apply(QwenAgent()).to_list()
        agents_env.execute()
        print("OUT", out)
    else:
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(1)
        agents_env = AgentsExecutionEnvironment.get_execution_environment(env)
        outputs = (agents_env.from_datastream(env.from_collection(["hi"]), key_selector=str)
                   .apply(QwenAgent()).to_datastream())
        outputs.map(lambda x: "OUT " + x).print()
        agents_env.execute()
"""

DROPPED = "OpenAIChatModelSetup: argument 'think' (False) has no effect here; dropped"


def _run(tmp_path: Path, mode: str) -> subprocess.CompletedProcess[str]:
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "qwen_agent.py").write_text(textwrap.dedent(AGENT))
    (tmp_path / "prog.py").write_text(textwrap.dedent(PROGRAM))
    env = {
        **{k: v for k, v in os.environ.items() if k != "FLINK_CONF_DIR"},
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        [str(PYTHON), "prog.py", mode],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


def test_a_dropped_argument_is_warned_of_once_on_the_local_runner(tmp_path: Path) -> None:
    proc = _run(tmp_path, "local")
    assert "OUT [{'a': 'seen hi'}]" in proc.stdout
    assert proc.stderr.count(DROPPED) == 1, proc.stderr[-3000:]


@pytest.mark.flink
@pytest.mark.timeout(600)
def test_a_dropped_argument_is_warned_of_in_the_program_on_a_minicluster(tmp_path) -> None:
    proc = _run(tmp_path, "flink")
    assert "OUT seen hi" in proc.stdout, proc.stdout[-3000:]
    assert proc.stderr.count(DROPPED) == 1, proc.stderr[-3000:]
