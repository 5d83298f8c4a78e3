"""Apache Flink Agents' documentation snippets, assembled into programs with their imports
changed only and run from a directory outside the repository as a user runs them (each
finding of the docs audit, one test)."""

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

pytestmark = pytest.mark.timeout(120)


def _run(tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` (dedented) as ``prog.py`` in ``tmp_path`` with the project importable."""
    (tmp_path / "prog.py").write_text(textwrap.dedent(script))
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([str(PYTHON), "prog.py"], cwd=tmp_path, env=environ,
                          capture_output=True, text=True, timeout=100)


# chat_models.md, "Custom Providers": a connection implementing ``chat(messages, tools,
# **kwargs)`` and a setup whose ``model_kwargs`` returns ``{"model": self.model, ...}``. The
# model was passed twice (``achat() got multiple values for keyword argument 'model'``), so
# every chat failed.
CUSTOM_PROVIDER = """
    from typing import Any, Dict, List, Sequence
    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, BaseChatModelConnection, BaseChatModelSetup,
        ChatMessage, ChatRequestEvent, ChatResponseEvent, Event, InputEvent, MessageRole,
        OutputEvent, ResourceDescriptor, RunnerContext, Tool, action, chat_model_connection,
        chat_model_setup)


    class MyChatModelConnection(BaseChatModelConnection):
        def chat(self, messages: Sequence[ChatMessage], tools: List[Tool] | None = None,
                 **kwargs: Any) -> ChatMessage:
            return ChatMessage(role=MessageRole.ASSISTANT, content=(
                f"{kwargs['model']} t={kwargs['temperature']}: {messages[-1].content}"))


    class MyChatModelSetup(BaseChatModelSetup):
        @property
        def model_kwargs(self) -> Dict[str, Any]:
            return {"model": self.model, "temperature": 0.7}


    class MyAgent(Agent):
        @chat_model_connection
        @staticmethod
        def my_connection() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=MyChatModelConnection)

        @chat_model_setup
        @staticmethod
        def my_chat_model() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=MyChatModelSetup, connection="my_connection",
                                      model="mine")

        @action(InputEvent.EVENT_TYPE)
        @staticmethod
        def process_input(event: Event, ctx: RunnerContext) -> None:
            input_event = InputEvent.from_event(event)
            user_message = ChatMessage(role=MessageRole.USER,
                                       content=f"input: {input_event.input}")
            ctx.send_event(ChatRequestEvent(model="my_chat_model", messages=[user_message]))

        @action(ChatResponseEvent.EVENT_TYPE)
        @staticmethod
        def process_response(event: Event, ctx: RunnerContext) -> None:
            chat_response = ChatResponseEvent.from_event(event)
            ctx.send_event(OutputEvent(output=chat_response.response.content))


    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": "hello"}]).apply(MyAgent()).to_list()
    env.execute()
    print("OUT", out)
"""


def test_a_custom_setup_naming_the_model_in_model_kwargs(tmp_path):
    proc = _run(tmp_path, CUSTOM_PROVIDER)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "OUT [{'k': 'mine t=0.7: input: hello'}]" in proc.stdout, proc.stderr[-3000:]
