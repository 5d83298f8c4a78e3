"""Calls in flight at a restore into code without their action: what the log says of them.

A run restored with a chat (or an internal sub-agent call) in flight, into code that renamed
its action, fails with a ``ReplayDivergenceError``; the open call is then cancelled. Before,
the WARNING about it said the *user* never awaited a "sub-agent 'model'" and told them to
await its handle: advice for a bug they did not write (seen deploying on a standalone
cluster: stop with a savepoint, rename the action, ``flink run -s``).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from support.harness import KEY, new_core, poll_until, resume, snapshot_of
from support.probes import count, current, gate

from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    InputEvent,
    InternalSubagent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
    chat_model_connection,
    chat_model_setup,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState

pytestmark = pytest.mark.timeout(60)


def slow_answer(request: Any) -> str:
    count("model")
    assert gate().wait(10), "gate never opened"
    return "answered"


class Child(Agent):
    @action(InputEvent)
    @staticmethod
    async def work(event: InputEvent, ctx: RunnerContext) -> None:
        reply = await ctx.chat("model", [ChatMessage(content="child")])
        ctx.send_event(OutputEvent(output=reply.message.content))


class _Base(Agent):
    def __init__(self) -> None:
        super().__init__()
        self.add_resource(
            "child",
            ResourceType.AGENT,
            ResourceDescriptor(InternalSubagent, agent=Child, description="asks the model"),
        )

    @chat_model_connection
    @staticmethod
    def conn() -> ResourceDescriptor:
        return ResourceDescriptor(ScriptedChatModel, function=slow_answer)

    @chat_model_setup
    @staticmethod
    def model() -> ResourceDescriptor:
        return ResourceDescriptor(ChatModelSetup, connection="conn")


async def _ask(event: InputEvent, ctx: RunnerContext) -> None:
    if event.input["via"] == "chat":
        reply = await ctx.chat("model", [ChatMessage(content="hi")])
        ctx.send_event(OutputEvent(output=reply.message.content))
    else:
        ctx.send_event(OutputEvent(output=await (await ctx.submit_subagent("child", {}))))


class Old(_Base):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        await _ask(event, ctx)


class Renamed(_Base):
    @action(InputEvent)
    @staticmethod
    async def handle(event: InputEvent, ctx: RunnerContext) -> None:
        await _ask(event, ctx)


def _snapshot_with_the_model_call_in_flight(via: str) -> InMemoryKeyState:
    core = new_core(AgentPlan.from_agent(Old()))
    try:
        state = InMemoryKeyState()
        res = core.on_input(KEY, {"key": KEY, "via": via}, state)
        assert res.errors == [] and res.outputs == []
        poll_until(core, state, lambda _state: current().counts().get("model", 0) >= 1)
        return snapshot_of(state, "json")
    finally:
        gate().set()
        core.close()


@pytest.mark.parametrize(
    ("via", "what"), [("chat", "chat 'model'"), ("subagent", "sub-agent 'child'")]
)
def test_a_call_cancelled_by_a_divergence_is_not_blamed_on_a_handle_never_awaited(
    via, what, probes, caplog
):
    snap = _snapshot_with_the_model_call_in_flight(via)
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, _ = resume(AgentPlan.from_agent(Renamed()), snap)
    assert outputs == []
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and "'on_input'" in err.message
    warned = [r.getMessage() for r in caplog.records if "was cancelled" in r.getMessage()]
    assert warned, "no word of the cancelled call"
    assert all("never awaited" not in w and "await its handle" not in w for w in warned)
    assert any(what in w and "replay divergence" in w and "r0/on_input" in w for w in warned)
