"""A plan problem about a name that points nowhere says what is declared, and the near name.

Found by a newcomer: ``ChatModelSetup(connection="con")`` beside a connection ``conn`` was
refused with ``names connection 'con', which is not declared`` and nothing else, while the
same mistake in ``tools`` listed the declared tools. Every such problem (a setup's
connection and offered sub-agents, an embedding model's connection, a vector store's
embedding model, the long-term memory's vector store) now names the declared resources of
that type and, when one is close, asks ``did you mean ...?``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flink_agents_py.api import (
    Agent,
    ChatModelSetup,
    EmbeddingModelSetup,
    InputEvent,
    InternalSubagent,
    LongTermMemoryOptions,
    PlanError,
    ResourceDescriptor,
    ResourceType,
    action,
    embedding_model_connection,
    embedding_model_setup,
    vector_store,
)
from flink_agents_py.plan import AgentPlan
from flink_agents_py.testing import model_from_turns

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(120)

USER_PROGRAM = """
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent, OutputEvent,
                                 ResourceDescriptor, ResourceType, action)
from flink_agents_py.testing import model_from_turns


class Ask(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event, ctx):
        reply = await ctx.chat("model", [ChatMessage(content="hi")])
        ctx.send_event(OutputEvent(output=reply.message.content))


agent = Ask()
agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_turns(["ok"]))
agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
    ChatModelSetup, connection="con"))
AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(agent).run()
"""


def test_a_misspelt_connection_is_refused_naming_the_declared_one(tmp_path):
    # as a user runs it: their own module, from a directory outside the repository
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "mine.py").write_text(textwrap.dedent(USER_PROGRAM))
    done = subprocess.run(
        [sys.executable, "mine.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert done.returncode == 1
    assert (
        "chat_model resource 'model' names connection 'con', which is not declared "
        "(declared chat_model_connection resources: 'conn'; did you mean 'conn'?)" in done.stderr
    ), done.stderr[-3000:]


class _Leaf(Agent):
    @action(InputEvent)
    @staticmethod
    def go(event, ctx):
        pass


def _problems(agent: Agent) -> str:
    with pytest.raises(PlanError) as e:
        AgentPlan.from_agent(agent)
    return str(e.value)


def test_an_offered_sub_agent_that_is_not_declared_names_the_declared_ones():
    agent = _Leaf()
    agent.add_resource(
        "reviewer",
        ResourceType.AGENT,
        ResourceDescriptor(
            InternalSubagent,
            agent=_Leaf,
            description="Rates a review.",
            input_schema='{"type": "object"}',
        ),
    )
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_turns(["ok"]))
    agent.add_resource(
        "model",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor(ChatModelSetup, connection="conn", subagents=["reviewr"]),
    )
    assert (
        "names sub-agent 'reviewr', which is not declared as an agent resource "
        "(declared agent resources: 'reviewer'; did you mean 'reviewer'?)" in _problems(agent)
    )


def test_no_near_name_lists_the_declared_ones_without_a_guess():
    agent = _Leaf()
    agent.add_resource("openai", ResourceType.CHAT_MODEL_CONNECTION, model_from_turns(["ok"]))
    agent.add_resource(
        "model", ResourceType.CHAT_MODEL, ResourceDescriptor(ChatModelSetup, connection="anthropic")
    )
    text = _problems(agent)
    assert (
        "names connection 'anthropic', which is not declared (declared "
        "chat_model_connection resources: 'openai')"
    ) in text
    assert "did you mean" not in text


def test_knowledge_references_name_the_declared_resources():
    pytest.importorskip("chromadb")  # the vector store's class is imported by the plan

    class Knowledge(Agent):
        @embedding_model_connection
        @staticmethod
        def minilm():
            return ResourceDescriptor(
                "flink_agents_py.integrations.embedding_models.MiniLMEmbeddingModel"
            )

        @embedding_model_setup
        @staticmethod
        def embedder():
            return ResourceDescriptor(EmbeddingModelSetup, connection="minilm2")

        @vector_store
        @staticmethod
        def kb():
            return ResourceDescriptor(
                "flink_agents_py.integrations.vector_stores.ChromaVectorStore",
                embedding_model="embeder",
            )

        @action(InputEvent)
        @staticmethod
        def go(event, ctx):
            pass

    text = _problems(Knowledge().set_config(**{LongTermMemoryOptions.VECTOR_STORE: "kbb"}))
    assert (
        "names connection 'minilm2', which is not declared (declared "
        "embedding_model_connection resources: 'minilm'; did you mean 'minilm'?)"
    ) in text
    assert (
        "names embedding model 'embeder', which is not declared (declared "
        "embedding_model resources: 'embedder'; did you mean 'embedder'?)"
    ) in text
    assert (
        "names vector store 'kbb', which is not declared (declared vector_store "
        "resources: 'kb'; did you mean 'kb'?)"
    ) in text
