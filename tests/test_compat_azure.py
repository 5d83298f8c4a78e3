"""Flink Agents' Azure OpenAI chat model classes, over the openai SDK's Azure client.

``ResourceName.ChatModel.AZURE_OPENAI_CONNECTION`` / ``_SETUP`` pointed at placeholders
refusing to be built, so a Flink Agents program chatting through Azure OpenAI (its
``AzureOpenAIChatModelConnection(api_key=..., api_version=..., azure_endpoint=...)`` and
``AzureOpenAIChatModelSetup(azure_deployment=..., model=...)``) failed its first chat.
Requests now go to the deployment's URL with Azure's ``api-key`` header, tools and all.
"""

from __future__ import annotations

import pytest
from support.providers import WireServer, openai_reply

from flink_agents_py.compat import (
    Agent,
    AgentsExecutionEnvironment,
    AzureOpenAIChatModelConnection,
    AzureOpenAIChatModelSetup,
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceName,
    RunnerContext,
    action,
    chat_model_connection,
    chat_model_setup,
    tool,
)

pytest.importorskip("openai")

pytestmark = pytest.mark.timeout(120)

ENDPOINT = ""


class AzureAgent(Agent):
    """Flink Agents' chat model example on Azure OpenAI: its ``add`` tool, a math chat."""

    @chat_model_connection
    @staticmethod
    def azure_openai_connection() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=ResourceName.ChatModel.AZURE_OPENAI_CONNECTION,
                                  api_key="azure-key-123", api_version="2024-10-21",
                                  azure_endpoint=ENDPOINT)

    @chat_model_setup
    @staticmethod
    def math_chat_model() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=ResourceName.ChatModel.AZURE_OPENAI_SETUP,
                                  connection="azure_openai_connection",
                                  azure_deployment="my-gpt4o", model="gpt-4o",
                                  temperature=0, max_tokens=100, tools=["add"])

    @tool
    @staticmethod
    def add(a: int, b: int) -> int:
        """Calculate the sum of a and b.

        Args:
            a: the first operand.
            b: the second operand.
        """
        return a + b

    @action(InputEvent)
    @staticmethod
    def process_input(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(ChatRequestEvent(model="math_chat_model", messages=[
            ChatMessage(role=MessageRole.USER, content=event.input)]))

    @action(ChatResponseEvent)
    @staticmethod
    def process_chat_response(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=event.response.content if event.response
                                   else event.error))


def _answer(request: dict) -> tuple[int, dict]:
    messages = request["body"]["messages"]
    if messages[-1]["role"] == "tool":
        return 200, openai_reply(f"sum={messages[-1]['content']}", model="gpt-4o")
    return 200, openai_reply(None, [("call_1", "add", {"a": 1, "b": 2})], model="gpt-4o")


def _run(records: list) -> list:
    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list(records).apply(AzureAgent()).to_list()
    env.execute()
    return out


def test_azure_classes_chat_with_the_deployment_and_the_api_key_header():
    global ENDPOINT
    with WireServer(_answer) as srv:
        ENDPOINT = srv.url
        out = _run([{"key": "0001", "value": "calculate the sum of 1 and 2."}])
    assert out == [{"0001": "sum=3"}]
    first, second = srv.requests
    assert first["path"] == "/openai/deployments/my-gpt4o/chat/completions?api-version=2024-10-21"
    assert first["headers"]["api-key"] == "azure-key-123"
    body = first["body"]
    assert body["model"] == "my-gpt4o" and body["temperature"] == 0 and body["max_tokens"] == 100
    assert [t["function"]["name"] for t in body["tools"]] == ["add"]
    assert second["body"]["messages"][-1] == {"role": "tool", "tool_call_id": "call_1",
                                              "content": "3"}


def test_what_azure_needs_is_named_when_missing(monkeypatch):
    for var in ("AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION", "AZURE_OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(Exception) as e:
        AzureOpenAIChatModelConnection(api_key="k").check()
    assert "azure_endpoint (or $AZURE_OPENAI_ENDPOINT) and api_version" in str(e.value)
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://res.openai.azure.com")
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-10-21")
    with pytest.raises(Exception) as e:
        AzureOpenAIChatModelConnection().check()
    assert "AZURE_OPENAI_API_KEY" in str(e.value)
    AzureOpenAIChatModelConnection(api_key="k").check()
    # the deployment is the model sent; without one, the model (Flink Agents' e2e agent)
    assert AzureOpenAIChatModelSetup(connection="c", azure_deployment="d", model="gpt-4o",
                                     )._call_options()["model"] == "d"
    assert AzureOpenAIChatModelSetup(connection="c", model="gpt-5")._call_options()["model"] \
        == "gpt-5"
    with pytest.raises(Exception) as e:
        AzureOpenAIChatModelSetup(connection="c")._call_options()
    assert "needs azure_deployment" in str(e.value)
