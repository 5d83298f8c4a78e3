"""A secret registered while a chat's answer is on its way is masked in what is recorded.

A chat's answer is made ready to record on the I/O thread (``recorder/_prestored.py``), and
only when no secret is known there; the operator thread then keeps what was made. A secret
registered between the two (another key's action made a connection with its API key, a tool
called ``register_secret``) must still be masked in the recorded answer and in what the
chat's action gets, as ``store_outcome`` masks any result: the key must enter neither keyed
state, the journal, nor the agent's outputs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_prestored_answer import _answer, _known, _stored, no_secrets  # noqa: F401

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
    register_secret,
)
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore
from flink_agents_py.runtime.recorder._prestored import Prestored, prestore
from flink_agents_py.runtime.recorder._state import InMemoryKeyState

pytestmark = pytest.mark.timeout(60)

SECRET = "sk-late-registered-0123456789abcdef"


def test_a_secret_registered_after_the_answer_was_prestored_is_masked():
    _known()
    ready = prestore(_answer(f"the key is {SECRET}"))
    assert isinstance(ready, Prestored)  # no secret known yet where the call ran
    register_secret(SECRET, "test")  # then one is, before the operator thread records it
    rec, (ok, value) = _stored(ready)
    assert ok
    assert SECRET not in json.dumps(rec.value)
    assert SECRET not in value.message.content and "the key is" in value.message.content


class Echoing(ChatModelConnection):
    """Answers with a secret the job registers only later."""

    def chat(self, messages: list[ChatMessage], **kwargs: Any) -> ChatResponse:
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content=f"the key is {SECRET}")
        )


class Asker(Agent):
    @chat_model_connection
    @staticmethod
    def conn() -> ResourceDescriptor:
        return ResourceDescriptor(Echoing)

    @chat_model_setup
    @staticmethod
    def model() -> ResourceDescriptor:
        return ResourceDescriptor(ChatModelSetup, connection="conn")

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input == "register":  # another key's action learns the secret
            register_secret(SECRET, "an action")
            return
        ctx.send_event(
            ChatRequestEvent(model="model", messages=[ChatMessage(role="user", content="hi")])
        )

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        assert event.response is not None
        ctx.short_term_memory.set("answer", event.response.message.content)
        ctx.send_event(OutputEvent(output=event.response.message.content))


def test_a_chat_answered_before_another_key_registers_the_secret_records_it_masked():
    core = AgentCore(AgentPlan.from_agent(Asker()))
    core.open()
    try:
        asking, other = InMemoryKeyState(), InMemoryKeyState()
        res = core.on_input("a", "ask", asking)
        assert asking.run is not None and not res.outputs
        core.wait_for("a", 10.0)  # the answer is in: made ready on the I/O thread
        assert core.has_deliveries("a")
        core.on_input("b", "register", other)  # the secret becomes known on the operator
        outputs = []
        while asking.run is not None:
            outputs.extend(core.advance("a", asking).outputs)
            if asking.run is not None:
                core.wait_for("a", 10.0)
        assert outputs and all(SECRET not in o for o in outputs)
        assert "the key is" in outputs[0]
        assert SECRET not in json.dumps(asking.memory)
    finally:
        core.close()
