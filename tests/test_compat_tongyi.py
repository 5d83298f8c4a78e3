"""Flink Agents' Tongyi (DashScope) chat model classes, over DashScope's OpenAI-compatible mode.

Flink Agents' chat model example imports ``TongyiChatModelConnection`` /
``TongyiChatModelSetup`` by module and declares them beside its Ollama and OpenAI ones,
running whichever has a key; the import failed here (``ImportError``), so not even the Ollama
run started, and ``ResourceName.ChatModel.TONGYI_*`` was a resource refusing to be built.

``extract_reasoning=True`` puts a thinking model's ``reasoning_content`` (QwQ, Qwen3 with
``enable_thinking``) into ``extra_args["reasoning"]``, as Flink Agents' Tongyi setup does;
only a ``<think>`` block in the text was taken before, so it was never there.
"""

from __future__ import annotations

import pytest
from support.providers import WireServer, openai_reply

from flink_agents_py.compat import (
    Agent,
    AgentsExecutionEnvironment,
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceName,
    RunnerContext,
    TongyiChatModelConnection,
    TongyiChatModelSetup,
    action,
    chat_model_connection,
    chat_model_setup,
    tool,
)
from flink_agents_py.compat._resources import DASHSCOPE_COMPATIBLE_URL

pytestmark = pytest.mark.timeout(120)

BASE_URL = ""


class TongyiAgent(Agent):
    """Flink Agents' chat model example's Tongyi backend (its ``add`` tool, a math chat)."""

    @chat_model_connection
    @staticmethod
    def tongyi_connection() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=TongyiChatModelConnection, base_url=BASE_URL)

    @chat_model_setup
    @staticmethod
    def math_chat_model() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=TongyiChatModelSetup, connection="tongyi_connection",
                                  tools=["add"], temperature=0.2)

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
        ctx.send_event(OutputEvent(output=event.response.content))


def _answer(request: dict) -> tuple[int, dict]:
    messages = request["body"]["messages"]
    if messages[-1]["role"] == "tool":
        return 200, openai_reply(f"sum={messages[-1]['content']}", model="qwen-plus")
    return 200, openai_reply(None, [("call_1", "add", {"a": 1, "b": 2})], model="qwen-plus")


def test_tongyi_classes_chat_through_dashscope_compatible_mode(monkeypatch):
    global BASE_URL
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-dashscope-test")
    with WireServer(_answer) as srv:
        BASE_URL = srv.url + "/compatible-mode/v1"
        env = AgentsExecutionEnvironment.get_execution_environment()
        out = env.from_list([{"key": "0001", "value": "calculate the sum of 1 and 2."}]
                            ).apply(TongyiAgent()).to_list()
        env.execute()
    assert out == [{"0001": "sum=3"}]
    first = srv.requests[0]
    assert first["path"] == "/compatible-mode/v1/chat/completions"
    assert first["headers"]["authorization"] == "Bearer sk-dashscope-test"
    assert first["body"]["model"] == "qwen-plus" and first["body"]["temperature"] == 0.2
    assert [t["function"]["name"] for t in first["body"]["tools"]] == ["add"]


def test_tongyi_defaults_are_dashscope_and_resource_names_point_at_them():
    connection = TongyiChatModelConnection(request_timeout=30.0)
    assert connection.base_url == DASHSCOPE_COMPATIBLE_URL
    assert connection.api_key_env == "DASHSCOPE_API_KEY" and connection.timeout_s == 30.0
    assert ResourceName.ChatModel.TONGYI_CONNECTION.endswith(".TongyiChatModelConnection")
    assert ResourceName.ChatModel.TONGYI_SETUP.endswith(".TongyiChatModelSetup")


class ThinkingTongyiAgent(Agent):
    """A Tongyi setup with ``extract_reasoning=True``; outputs the answer and its reasoning."""

    @chat_model_connection
    @staticmethod
    def tongyi_connection() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=TongyiChatModelConnection, base_url=BASE_URL)

    @chat_model_setup
    @staticmethod
    def qwq() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=TongyiChatModelSetup, connection="tongyi_connection",
                                  model="qwq-plus", extract_reasoning=True,
                                  additional_kwargs={"enable_thinking": True})

    @action(InputEvent)
    @staticmethod
    def process_input(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(ChatRequestEvent(model="qwq", messages=[
            ChatMessage(role=MessageRole.USER, content=event.input)]))

    @action(ChatResponseEvent)
    @staticmethod
    def process_chat_response(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        response = event.response
        ctx.send_event(OutputEvent(output={"content": response.content,
                                           "reasoning": response.extra_args.get("reasoning")}))


def _thinking_answer(request: dict) -> tuple[int, dict]:
    body = openai_reply("3", model="qwq-plus")
    body["choices"][0]["message"]["reasoning_content"] = "1 plus 2 is 3."
    return 200, body


def test_tongyi_extract_reasoning_takes_dashscopes_reasoning_content(monkeypatch):
    global BASE_URL
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-dashscope-test")
    with WireServer(_thinking_answer) as srv:
        BASE_URL = srv.url + "/compatible-mode/v1"
        env = AgentsExecutionEnvironment.get_execution_environment()
        out = env.from_list([{"key": "0001", "value": "1 + 2?"}]
                            ).apply(ThinkingTongyiAgent()).to_list()
        env.execute()
    assert out == [{"0001": {"content": "3", "reasoning": "1 plus 2 is 3."}}]
    assert srv.requests[0]["body"]["enable_thinking"] is True
