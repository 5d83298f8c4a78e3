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


# Flink Agents' ``ChatMessage.role`` is a ``MessageRole`` (a ``str`` enum): programs compare
# it with the members, read ``.value``, rebuild it with ``MessageRole(...)`` and switch on
# it. Ours was kept as its text (``use_enum_values``), so ``message.role.value`` was an
# ``AttributeError`` failing the action, and ``role is MessageRole.USER`` was false.


def test_a_message_role_is_the_enum_member():
    message = ChatMessage(role="user", content="hi")
    assert message.role is MessageRole.USER
    assert message.role.value == "user"
    assert message.role == "user" and message.role == MessageRole.USER
    assert MessageRole(message.role) is MessageRole.USER
    assert MessageRole(message.role.value) is MessageRole.USER
    assert ChatMessage.of(MessageRole.SYSTEM, "s").role.name == "SYSTEM"
    assert ChatMessage.tool("42").role is MessageRole.TOOL
    assert {MessageRole.USER: 1}[message.role] == 1
    # its text is its value (a transcript or a chat template reads "user")
    assert f"{message.role}: {message.content}" == "user: hi" == str(message)
    assert str(message.role) == "user" and f"{message.role:>5}" == " user"
    # its JSON form is the value, and reading it back gives the member again
    dumped = message.model_dump(mode="json")
    assert dumped["role"] == "user" and type(dumped["role"]) is str
    assert ChatMessage.model_validate_json(message.model_dump_json()).role is MessageRole.USER
    assert ChatMessage.model_validate(message.model_dump()).role is MessageRole.USER


class RoleCheckingConnection(BaseChatModelConnection):
    """Answers with what it reads of the roles, as Flink Agents' connections read them."""

    def chat(self, messages: Sequence[ChatMessage], tools: Any = None,
             **kwargs: Any) -> ChatMessage:
        roles = [m.role.value for m in messages]
        assert all(isinstance(m.role, MessageRole) for m in messages), roles
        return ChatMessage(role=MessageRole("assistant"), content=",".join(roles))


class RoleAgent(Agent):
    @chat_model_connection
    @staticmethod
    def role_connection() -> ResourceDescriptor:
        return ResourceDescriptor(clazz=f"{__name__}.RoleCheckingConnection")

    @chat_model_setup
    @staticmethod
    def role_model() -> ResourceDescriptor:
        return ResourceDescriptor(clazz="flink_agents_py.compat.OllamaChatModelSetup",
                                  connection="role_connection", model="m")

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.short_term_memory.set("asked", ChatMessage(role=MessageRole.SYSTEM, content="x"))
        ctx.send_event(ChatRequestEvent(model="role_model", messages=[
            ChatMessage(role=MessageRole.SYSTEM, content="be brief"),
            ChatMessage(role=MessageRole.USER, content=event.input)]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        stored = ctx.short_term_memory.get("asked")  # back from the key's memory
        message = event.response
        assert message.role == MessageRole.ASSISTANT, message.role
        ctx.send_event(OutputEvent(output={
            "said": message.content, "role": message.role.value,
            "stored": f"{stored.role.value}:{stored.role is MessageRole.SYSTEM}"}))


def test_a_program_reads_roles_as_the_enum_in_connections_memory_and_responses():
    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": "hello"}]).apply(RoleAgent()).to_list()
    env.execute()
    assert out == [{"k": {"said": "system,user", "role": "assistant",
                          "stored": "system:True"}}]


def test_roles_read_as_the_enum_after_every_restore():
    from flink_agents_py.testing import check_replay_safety

    report = check_replay_safety(RoleAgent(), ["hello", "again"], key_selector=lambda r: r,
                                 other_process=False)
    assert report.ok, report
