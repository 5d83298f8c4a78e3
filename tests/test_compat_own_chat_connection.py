"""A Flink Agents setup with its own ``chat`` naming an undeclared connection runs its chats.

Flink Agents' built-in action async execution e2e test declares a ``BaseChatModelSetup``
subclass with its own ``chat`` and ``connection="placement"``, a name declared nowhere:
Flink Agents calls the setup's ``chat`` and never resolves it. Here every chat failed
(``ResourceNotFoundError: no chat_model_connection resource named 'placement'``): the model
call looked the connection up to pace the call by its flow controller.
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

pytestmark = pytest.mark.timeout(60)

AGENT = """
    from typing import Any, Dict, Sequence

    from flink_agents_py.compat import (
        Agent, BaseChatModelSetup, ChatMessage, ChatRequestEvent, ChatResponseEvent, Event,
        InputEvent, MessageRole, OutputEvent, ResourceDescriptor, RunnerContext, ToolType,
        action, chat_model_setup, tool)


    class EchoSetup(BaseChatModelSetup):
        def open(self) -> None:
            pass

        @property
        def model_kwargs(self) -> Dict[str, Any]:
            return {}

        def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
            if "sum" in messages[-1].content:
                call = {"id": "c1", "type": ToolType.FUNCTION,
                        "function": {"name": "add", "arguments": {"a": 1, "b": 2}}}
                return ChatMessage(role=MessageRole.ASSISTANT, content=messages[-1].content,
                                   tool_calls=[call])
            return ChatMessage(role=MessageRole.ASSISTANT,
                               content="|".join(m.content for m in messages))


    class OwnChatAgent(Agent):
        @chat_model_setup
        @staticmethod
        def echo() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=f"{EchoSetup.__module__}.{EchoSetup.__name__}",
                                      connection="placement", tools=["add"])

        @tool
        @staticmethod
        def add(a: int, b: int) -> int:
            \"\"\"Calculate the sum of a and b.\"\"\"
            return a + b

        @action(InputEvent.EVENT_TYPE)
        @staticmethod
        def process_input(event: Event, ctx: RunnerContext) -> None:
            text = InputEvent.from_event(event).input
            ctx.send_event(ChatRequestEvent(
                model="echo", messages=[ChatMessage(role=MessageRole.USER, content=text)]))

        @action(ChatResponseEvent.EVENT_TYPE)
        @staticmethod
        def process_chat_response(event: Event, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output=ChatResponseEvent.from_event(event).response.content))
"""

PROGRAM = """
    from flink_agents_py.compat import AgentsExecutionEnvironment
    from own_chat_agent import OwnChatAgent

    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": "the sum of 1 and 2"}]).apply(OwnChatAgent()
                                                                          ).to_list()
    env.execute()
    print(out)
"""


def test_a_setup_with_its_own_chat_needs_no_declared_connection(tmp_path: Path) -> None:
    (tmp_path / "own_chat_agent.py").write_text(textwrap.dedent(AGENT))
    (tmp_path / "prog.py").write_text(textwrap.dedent(PROGRAM))
    proc = subprocess.run([str(PYTHON), "prog.py"], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=50)
    assert proc.returncode == 0, proc.stderr
    assert "placement" not in proc.stderr
    assert proc.stdout.strip() == "[{'k': 'the sum of 1 and 2|the sum of 1 and 2|3'}]"


def test_a_setup_without_its_own_chat_still_needs_its_connection() -> None:
    from flink_agents_py.api import ChatModelSetup, ResourceNotFoundError
    from flink_agents_py.runtime._own_chat import pacing_connection

    setup = ChatModelSetup(connection="placement", model="m")

    def nothing(name: str, kind: object) -> object:
        raise ResourceNotFoundError(f"no resource {name!r}")

    setup.bind(nothing, "plain")
    with pytest.raises(ResourceNotFoundError, match="placement"):
        pacing_connection(setup)
