"""Kinds that exist as enums are enum members wherever they are kept (str enums: a
comparison with the stored text still holds)."""

from __future__ import annotations

from typing import Any

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    AsyncSubagentSetup,
    DeferredSubagentSetup,
    InputEvent,
    InternalSubagent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    RunStatus,
    SubagentResult,
    action,
)
from flink_agents_py.runtime import CallKind, RunState
from flink_agents_py.runtime.recorder._state import Invocation


class Child(Agent):
    @action(InputEvent)
    @staticmethod
    async def echo(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=event.input))


class Remote(DeferredSubagentSetup):
    def prepare(self, ctx: RunnerContext, input: Any, session_id: str, call_id: str):
        return f"{session_id}#{call_id}", lambda: SubagentResult.ok(input), None


class Pubsub(AsyncSubagentSetup):
    def call_submit_request(self, session_id: str, call_id: str, input: Any) -> None:
        return None

    def call_query_status(self, session_id: str, call_id: str) -> RunStatus:
        return RunStatus.completed()

    def call_fetch_result(self, session_id: str, call_id: str) -> SubagentResult:
        return SubagentResult.ok("fetched")


class Delegator(Agent):
    @action(InputEvent)
    @staticmethod
    async def delegate(event: InputEvent, ctx: RunnerContext) -> None:
        kinds = {}
        for name in ("child", "remote", "pubsub", "nobody"):
            handle = await ctx.submit_subagent(name, {"n": 1})
            await handle
            kind = handle.kind  # type: ignore[attr-defined]
            kinds[name] = [type(kind).__name__, kind.value, kind == kind.value]
        ctx.send_event(OutputEvent(output={"key": event.input["key"], "kinds": kinds}))


def test_a_sub_agent_handle_kind_is_its_calls_call_kind():
    agent = Delegator()
    schema = '{"type": "object"}'
    agent.add_resource("child", ResourceType.AGENT, ResourceDescriptor(
        InternalSubagent, agent=Child(), input_schema=schema))
    agent.add_resource("remote", ResourceType.AGENT, ResourceDescriptor(Remote))
    agent.add_resource("pubsub", ResourceType.AGENT, ResourceDescriptor(
        Pubsub, status_poll_interval_millis=1))
    [out] = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(agent).collect()
    assert out["kinds"] == {
        "child": ["CallKind", "subagent", True],
        "remote": ["CallKind", "subagent_deferred", True],
        "pubsub": ["CallKind", "subagent_result", True],
        "nobody": ["CallKind", "subagent_refused", True],
    }


def test_an_invocation_kind_is_a_call_kind_stored_as_the_same_text():
    run = RunState(seq=1)
    run.invocations["r1/a/c0"] = Invocation(kind=CallKind.CHAT, name="m", caller="r1/a",
                                            ordinal=0)
    run.invocations["r1/a/c1"] = Invocation(kind=CallKind.SUBAGENT, name="child",
                                            caller="r1/a", ordinal=1)
    stored = run.to_stored()
    assert '"kind":"chat"' in stored and '"kind":"subagent"' in stored  # the format as before
    back = RunState.from_stored(stored)
    assert [inv.kind for inv in back.invocations.values()] == [CallKind.CHAT, CallKind.SUBAGENT]
    assert all(isinstance(inv.kind, CallKind) for inv in back.invocations.values())
    assert back.invocations["r1/a/c0"].kind == "chat"  # a str enum: text still compares
