"""A chat message prints as Apache Flink Agents prints one: ``"role: content"``.

Flink Agents' ``ChatMessage.__str__`` (``api/chat_message.py``, 0.3.1) returns
``f"{self.role.value}: {self.content}"``, and its ``Prompt.format_string`` of a message
list is those lines joined; programs build transcripts the same way
(``"\\n".join(str(m) for m in history)``) and print ``event.response``. Before this port
found it, ``str(message)`` was pydantic's field dump (``role='user' content='hi'
tool_calls=[] ...``), so such a transcript sent the model every field of every message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flink_agents_py.compat import (
    Agent,
    AgentsExecutionEnvironment,
    BaseChatModelConnection,
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    Event,
    EventType,
    InputEvent,
    MessageRole,
    OutputEvent,
    Prompt,
    ResourceDescriptor,
    RunnerContext,
    action,
    chat_model_connection,
    chat_model_setup,
)


def test_a_message_prints_as_role_and_content():
    assert str(ChatMessage(role=MessageRole.USER, content="hi")) == "user: hi"
    assert f"{ChatMessage(role='assistant', content='ok')}" == "assistant: ok"
    history = [ChatMessage(role=MessageRole.SYSTEM, content="be brief"),
               ChatMessage(role=MessageRole.USER, content="hi")]
    # the same text as Flink Agents' format_string of a message-list prompt
    assert "\n".join(map(str, history)) == Prompt.from_messages(history).format_string()
    assert "role=" in repr(history[0])  # repr still shows the fields


class TranscriptConnection(BaseChatModelConnection):
    """Answers with the transcript it was given, as the program built it."""

    def chat(self, messages: Sequence[ChatMessage], tools: Any = None,
             **kwargs: Any) -> ChatMessage:
        return ChatMessage(role=MessageRole.ASSISTANT,
                           content=f"seen {len(messages)}: {messages[-1].content}")


class TranscriptAgent(Agent):
    @chat_model_connection
    @staticmethod
    def transcript_connection() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=f"{__name__}.TranscriptConnection")

    @chat_model_setup
    @staticmethod
    def transcript_model() -> ResourceDescriptor:
        return ResourceDescriptor(clazz="flink_agents_py.compat.OllamaChatModelSetup",
                                  connection="transcript_connection", model="m")

    @action(EventType.InputEvent)
    @staticmethod
    def ask(event: Event, ctx: RunnerContext) -> None:
        history = [ChatMessage(role=MessageRole.USER, content=InputEvent.from_event(event).input),
                   ChatMessage(role=MessageRole.ASSISTANT, content="noted")]
        transcript = "\n".join(str(m) for m in history)
        ctx.send_event(ChatRequestEvent(model="transcript_model", messages=[
            ChatMessage(role=MessageRole.USER, content=transcript)]))

    @action(EventType.ChatResponseEvent)
    @staticmethod
    def answer(event: Event, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=str(ChatResponseEvent.from_event(event).response)))


def test_an_agent_builds_a_transcript_and_prints_the_response():
    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": "hello"}]).apply(TranscriptAgent()).to_list()
    env.execute()
    assert out == [{"k": "assistant: seen 1: user: hello\nassistant: noted"}]
