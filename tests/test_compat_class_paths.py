"""Apache Flink Agents' class paths written out in a ported program name our classes.

Flink Agents' ``ResourceDescriptor`` documents its use as ``ResourceDescriptor(clazz=
"flink_agents.integrations.chat_models.ollama_chat_model.OllamaChatModelConnection", ...)``,
and its ``ResourceName`` constants are such paths, which a program may write out. With only
its imports changed, such a program stopped at the plan: ``cannot import module
'flink_agents.integrations...': No module named 'flink_agents'``. A path of one of its
resource classes now names the class here that stands for it (the modules moved between its
versions, so the class name decides); one of a class with no counterpart still fails, and
its error says so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flink_agents_py.api import ResourceError
from flink_agents_py.compat import (
    ResourceDescriptor,
    ResourceName,
)

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

# a program in the shape of Flink Agents' workflow agents, its class paths written out as
# its ResourceDescriptor's docstring writes them; its own connection stands in for Ollama
PROGRAM = """
    from typing import Any

    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, BaseChatModelConnection, ChatMessage,
        ChatRequestEvent, ChatResponseEvent, InputEvent, MessageRole, OutputEvent, Prompt,
        ResourceDescriptor, RunnerContext, action, chat_model_connection, chat_model_setup,
        prompt)


    class LocalConnection(BaseChatModelConnection):
        def chat(self, messages, tools=None, **kwargs: Any) -> ChatMessage:
            return ChatMessage(role=MessageRole.ASSISTANT,
                               content=" | ".join(m.content for m in messages))


    class ReviewAgent(Agent):
        @prompt
        @staticmethod
        def review_prompt() -> Prompt:
            return Prompt.from_text("Rate this review: {input}")

        @chat_model_connection
        @staticmethod
        def ollama_server() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=f"{__name__}.LocalConnection")

        @chat_model_setup
        @staticmethod
        def review_model() -> ResourceDescriptor:
            return ResourceDescriptor(
                clazz="flink_agents.integrations.chat_models.ollama_chat_model."
                      "OllamaChatModelSetup",
                connection="ollama_server", model="qwen3:8b", prompt="review_prompt",
                extract_reasoning=True)

        @action(InputEvent)
        @staticmethod
        def process_input(event: InputEvent, ctx: RunnerContext) -> None:
            ctx.send_event(ChatRequestEvent(
                model="review_model", messages=[ChatMessage(role=MessageRole.USER)],
                prompt_args={"input": event.input}))

        @action(ChatResponseEvent)
        @staticmethod
        def process_chat_response(event: ChatResponseEvent, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output=event.response.content))


    if __name__ == "__main__":
        env = AgentsExecutionEnvironment.get_execution_environment()
        out = env.from_list([{"key": "r1", "value": "great shoes"}]).apply(
            ReviewAgent()).to_list()
        env.execute()
        print("OUT", out)
"""


def test_a_program_naming_flink_agents_class_paths_runs(tmp_path: Path) -> None:
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "review_agent.py").write_text(textwrap.dedent(PROGRAM))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [str(PYTHON), "review_agent.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "OUT [{'r1': 'Rate this review: great shoes'}]" in proc.stdout, proc.stdout


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [
        # its main branch's paths (ResourceName's values there) and an older module layout
        (
            "flink_agents.integrations.chat_models.openai.openai_chat_model."
            "OpenAIChatModelConnection",
            ResourceName.ChatModel.OPENAI_COMPLETIONS_CONNECTION,
        ),
        (
            "flink_agents.integrations.chat_models.vllm.vllm_chat_model.VLLMChatModelSetup",
            ResourceName.ChatModel.OPENAI_COMPLETIONS_SETUP,
        ),
        (
            "flink_agents.integrations.embedding_models.local.ollama_embedding_model."
            "OllamaEmbeddingModelSetup",
            ResourceName.EmbeddingModel.OLLAMA_SETUP,
        ),
        (
            "flink_agents.integrations.embedding_models.ollama_embedding_model."
            "OllamaEmbeddingModelConnection",
            ResourceName.EmbeddingModel.OLLAMA_CONNECTION,
        ),
        (
            "flink_agents.integrations.vector_stores.chroma.chroma_vector_store.ChromaVectorStore",
            ResourceName.VectorStore.CHROMA_VECTOR_STORE,
        ),
        ("flink_agents.integrations.mcp.mcp.MCPServer", ResourceName.MCP_SERVER),
        (
            "flink_agents.api.chat_models.java_chat_model.JavaChatModelSetup",
            ResourceName.ChatModel.JAVA_WRAPPER_SETUP,
        ),
    ],
)
def test_a_flink_agents_class_path_names_the_class_standing_for_it(theirs, ours):
    assert ResourceDescriptor(clazz=theirs).clazz == ours
    module, _, name = theirs.rpartition(".")
    assert ResourceDescriptor(target_module=module, target_clazz=name).clazz == ours


def test_other_class_paths_are_kept():
    assert ResourceDescriptor(clazz="my_app.flink_agents.Conn").clazz == "my_app.flink_agents.Conn"
    assert ResourceDescriptor(clazz="flink_agents_py.compat.McpServer").clazz == (
        "flink_agents_py.compat.McpServer"
    )


def test_a_flink_agents_class_with_no_counterpart_says_so():
    descriptor = ResourceDescriptor(
        clazz="flink_agents.integrations.chat_models.watsonx.watsonx_chat_model."
        "WatsonxChatModelConnection"
    )
    with pytest.raises(ResourceError) as err:
        descriptor.build()
    assert "'flink_agents.integrations.chat_models.watsonx.watsonx_chat_model'" in str(err.value)
    assert "Apache Flink Agents' class, which has no counterpart here" in str(err.value)
    assert "flink_agents_py.compat.ResourceName" in str(err.value)


YAML = """
agents:
  - name: reviewer
    chat_model_connections:
      - name: ollama_server
        clazz: flink_agents.integrations.chat_models.ollama_chat_model.OllamaChatModelConnection
        request_timeout: 30
    chat_model_setups:
      - name: review_model
        clazz: flink_agents.integrations.chat_models.ollama_chat_model.OllamaChatModelSetup
        connection: ollama_server
        model: qwen3:8b
    actions:
      - name: noop
        on: [InputEvent]
        function: yaml_actions:noop
"""


def test_a_yaml_document_naming_flink_agents_class_paths_loads(tmp_path, monkeypatch):
    from flink_agents_py.compat import AgentsExecutionEnvironment
    from flink_agents_py.yaml import load_agents

    (tmp_path / "yaml_actions.py").write_text("def noop(event, ctx):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "agents.yaml"
    path.write_text(YAML)
    (agent,) = load_agents(path).values()
    resources = {name: value.clazz for _, name, value in agent.declared_resources()}
    assert resources == {
        "ollama_server": ResourceName.ChatModel.OLLAMA_CONNECTION,
        "review_model": ResourceName.ChatModel.OLLAMA_SETUP,
    }
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.load_yaml(str(path))  # it stopped here (cannot import module 'flink_agents...')
