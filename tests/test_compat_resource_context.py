"""Resources written for Apache Flink Agents find other resources through
``self.resource_context``, and are built outside an agent with ``resource_context=``.

Flink Agents' ``Resource`` (``api/resource.py``, 0.3.1) has a ``resource_context`` field,
on which its setups, embedding setups and vector stores call ``get_resource(name, type)``,
and its own unit tests build a setup with ``resource_context=MagicMock(spec=
ResourceContext)`` whose ``get_resource`` is a function of theirs
(``integrations/chat_models/tests/test_ollama_chat_model.py``). Before this port found it,
only our chat model setups had ``resource_context``, ``resource_context=`` was refused
(``extra inputs are not permitted``), ``ResourceContext`` was an ``ImportError``, and the
``name=`` those tests give a connection was refused too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

from flink_agents_py.compat import (
    Agent,
    AgentsExecutionEnvironment,
    BaseChatModelConnection,
    BaseEmbeddingModelConnection,
    BaseEmbeddingModelSetup,
    ChatMessage,
    Event,
    EventType,
    MessageRole,
    OllamaChatModelSetup,
    OutputEvent,
    ResourceContext,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
    embedding_model_connection,
    embedding_model_setup,
)

ROOT = Path(__file__).resolve().parents[1]


class FixedEmbeddings(BaseEmbeddingModelConnection):
    """An embedding connection written against Flink Agents' ``embed(text)``."""

    def embed(self, text: Any, **kwargs: Any) -> Any:
        vector = [float(len(t)) for t in ([text] if isinstance(text, str) else text)]
        return vector if isinstance(text, str) else [[v] for v in vector]


class DoublingSetup(BaseEmbeddingModelSetup):
    """A custom setup finding its connection as Flink Agents' own setups do."""

    def doubled(self, text: str) -> list[float]:
        """The connection's vector for ``text``, twice."""
        connection = self.resource_context.get_resource(
            self.connection, ResourceType.EMBEDDING_MODEL_CONNECTION)
        return list(connection.embed(text)) * 2


class ContextAgent(Agent):
    @embedding_model_connection
    @staticmethod
    def lengths() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=f"{__name__}.FixedEmbeddings")

    @embedding_model_setup
    @staticmethod
    def doubling() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=f"{__name__}.DoublingSetup", connection="lengths",
                                  model="m")

    @action(EventType.InputEvent)
    @staticmethod
    def go(event: Event, ctx: RunnerContext) -> None:
        setup = ctx.get_resource("doubling", ResourceType.EMBEDDING_MODEL)
        ctx.send_event(OutputEvent(output=setup.doubled(event.input)))


def test_a_custom_resource_finds_other_resources_through_resource_context():
    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": "abc"}]).apply(ContextAgent()).to_list()
    env.execute()
    assert out == [{"k": [3.0, 3.0]}]


class Echo(BaseChatModelConnection):
    def chat(self, messages: Sequence[ChatMessage], tools: Any = None,
             **kwargs: Any) -> ChatMessage:
        return ChatMessage(role=MessageRole.ASSISTANT, content="echo " + messages[-1].content)


def test_a_resource_built_with_a_resource_context_uses_it():
    asked: list[tuple[str, ResourceType]] = []

    def get_resource(name: str, type: ResourceType) -> Any:  # noqa: A002 - theirs
        asked.append((name, type))
        return Echo()

    context = MagicMock(spec=ResourceContext)
    context.get_resource = get_resource
    setup = OllamaChatModelSetup(name="ollama", connection="echo", model="m",
                                 resource_context=context)
    assert setup.resource_context is context
    answer = setup.chat([ChatMessage(role=MessageRole.USER, content="hi")])
    assert answer.content == "echo hi"
    assert asked == [("echo", ResourceType.CHAT_MODEL_CONNECTION)]

    embedding = DoublingSetup(connection="c", model="m", resource_context=context)
    context.get_resource = lambda name, type: FixedEmbeddings()  # noqa: A006
    assert embedding.doubled("ab") == [2.0, 2.0]


def test_flink_agents_resource_unit_test_runs_from_a_users_directory(tmp_path):
    # Flink Agents' Ollama setup test, its imports changed and Ollama swapped for a
    # connection of the program's own
    (tmp_path / "prog.py").write_text(textwrap.dedent("""
        from unittest.mock import MagicMock
        from flink_agents_py.compat import (BaseChatModelConnection, ChatMessage,
            MessageRole, OllamaChatModelConnection, OllamaChatModelSetup, Resource,
            ResourceContext, ResourceType)

        class Local(BaseChatModelConnection):
            def chat(self, messages, tools=None, **kwargs):
                return ChatMessage(role=MessageRole.ASSISTANT, content="3")

        connection = OllamaChatModelConnection(name="ollama", request_timeout=120.0)
        def get_resource(name: str, type: ResourceType) -> Resource:
            return Local()
        mock_ctx = MagicMock(spec=ResourceContext)
        mock_ctx.get_resource = get_resource
        llm = OllamaChatModelSetup(name="ollama", connection="ollama", model="qwen3:0.6b",
                                   resource_context=mock_ctx)
        llm.open()
        response = llm.chat([ChatMessage(role=MessageRole.USER, content="1 + 2?")])
        print(response.content, connection.timeout_s)
    """))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3", "120.0"]
