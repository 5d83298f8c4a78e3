"""A model call's digest is made of its messages as they are, whatever built them.

The chat action writes the usual message's JSON form directly (``_chat_steps.
model_call_json``) instead of through the general walk, reading its fields as validation
leaves them. A message built without validation (``ChatMessage.model_construct``, as a
setup's own ``build_messages`` may build them) holds its role as text: the call must go as
it went through the general walk (the same digest, the model asked once, its answer the
chat's), not fail the chat on the direct form's assumption.
"""

from __future__ import annotations

from typing import Any

import pytest

from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelConnection,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponse,
    ChatResponseEvent,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    RunnerContext,
    action,
    chat_model_connection,
    chat_model_setup,
)
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore
from flink_agents_py.runtime._chat_steps import model_call_json
from flink_agents_py.runtime._serde import to_json_value
from flink_agents_py.runtime.recorder._state import InMemoryKeyState

pytestmark = pytest.mark.timeout(60)


def _unvalidated(role: Any, content: Any = "hi", **fields: Any) -> ChatMessage:
    given = {"tool_calls": [], "tool_call_id": None, "name": None, "extra_args": {}, **fields}
    return ChatMessage.model_construct(role=role, content=content, **given)


@pytest.mark.parametrize(
    "message",
    [
        _unvalidated("user"),
        _unvalidated("system"),
        _unvalidated(MessageRole.USER, 7),
        _unvalidated(MessageRole.ASSISTANT),
        _unvalidated(MessageRole.USER, tool_calls=None),
        _unvalidated(MessageRole.USER, tool_calls=0),
        _unvalidated(MessageRole.USER, tool_calls=()),
        _unvalidated(MessageRole.USER, extra_args=None),
        _unvalidated(MessageRole.USER, extra_args=[]),
        _unvalidated(MessageRole.USER, reasoning=None),
        _unvalidated(MessageRole.USER, reasoning=""),
    ],
)
def test_the_direct_form_of_an_unvalidated_message_is_the_general_walks(message):
    for schema in (None, {"type": "object"}):
        assert model_call_json([message], schema) == to_json_value([[message], schema], "x")


class Answering(ChatModelConnection):
    def chat(self, messages: list[ChatMessage], **kwargs: Any) -> ChatResponse:
        said = ",".join(f"{m.role}:{m.content}" for m in messages)
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=said))


class Unvalidated(ChatModelSetup):
    """A setup whose own ``build_messages`` builds its messages without validation."""

    def build_messages(self, messages: Any, prompt_args: Any = None) -> list[ChatMessage]:
        return [_unvalidated("user", f"asked {m.content}") for m in messages]


class Asker(Agent):
    @chat_model_connection
    @staticmethod
    def conn() -> ResourceDescriptor:
        return ResourceDescriptor(Answering)

    @chat_model_setup
    @staticmethod
    def model() -> ResourceDescriptor:
        return ResourceDescriptor(Unvalidated, connection="conn")

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(
            ChatRequestEvent(model="model", messages=[ChatMessage(role="user", content="q")])
        )

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(
            OutputEvent(output=event.error or event.response.message.content)  # type: ignore[union-attr]
        )


def test_a_chat_of_messages_its_setup_built_without_validation_is_answered():
    core = AgentCore(AgentPlan.from_agent(Asker()))
    core.open()
    try:
        state = InMemoryKeyState()
        outputs = list(core.on_input("k", "go", state).outputs)
        while state.run is not None:
            core.wait_for("k", 10.0)
            res = core.advance("k", state)
            outputs.extend(res.outputs)
            assert not res.errors
        assert outputs == ["user:asked q"]
    finally:
        core.close()
