"""Agents and resources used by the benchmarks.

Kept in an importable module (not in ``__main__`` or a function body) so Flink workers can
unpickle them by reference. No PyFlink import here: the local benchmarks load this too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

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

__all__ = ["EchoAgent", "SlowChatModel", "SlowChatAgent", "LATENCY_S"]

LATENCY_S = 0.2
"""The simulated chat model's latency (P3)."""


class EchoAgent(Agent):
    """One async action: echo the input with its key (P1, P2)."""

    @action(InputEvent)
    @staticmethod
    async def echo(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "echo": event.input}))


class SlowChatModel(ChatModelConnection):
    """A chat model that answers after ``latency_s`` seconds of ``asyncio.sleep`` (P3)."""

    latency_s: float = LATENCY_S

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        await asyncio.sleep(self.latency_s)
        text = messages[-1].content if messages else ""
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=f"re: {text}"))


class SlowChatAgent(Agent):
    """Input -> one chat (through the built-in chat action) -> output (P3).

    The input's ``t`` (a wall-clock stamp taken at the source, Flink only) is carried through
    sensory memory to the output so the job can be timed from its first input; ``t_op`` is
    the wall clock when the action first saw the input, so it can be timed from when the
    operator took its first input, too (without the skew of its tasks' start-up).
    """

    @chat_model_connection
    @staticmethod
    def slow_connection() -> ResourceDescriptor:
        return ResourceDescriptor(SlowChatModel, latency_s=LATENCY_S)

    @chat_model_setup
    @staticmethod
    def slow_model() -> ResourceDescriptor:
        return ResourceDescriptor(ChatModelSetup, connection="slow_connection")

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.sensory_memory.set("t", event.input.get("t"))
        ctx.sensory_memory.set("t_op", time.time())
        ctx.send_event(ChatRequestEvent(
            model="slow_model", messages=[ChatMessage(content=str(event.input.get("n")))]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={
            "key": ctx.key, "t": ctx.sensory_memory.get("t"), "error": event.error,
            "t_op": ctx.sensory_memory.get("t_op"),
        }))
