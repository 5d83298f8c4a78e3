"""The agents of ``test_subagent_neighbours``: a child that polls a remote run when its call
is cancelled, and a handle awaited by an action other than the one that submitted it.

``Lingering`` is an async remote whose runs stay running for ``LINGER_POLLS`` status probes,
then complete: long enough that a test sees whether a cancellation ended the polling, short
enough that a run which does not end it still finishes (a failed assertion, not a hang).
"""

from __future__ import annotations

import time
from typing import Any

from flink_agents_py.api import (
    Agent,
    AsyncSubagentSetup,
    DeferredSubagentSetup,
    InputEvent,
    InternalSubagent,
    OutputEvent,
    PreparedCall,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    RunStatus,
    SubagentResult,
    action,
)
from support.probes import count, current, gate, store
from support.waiting import QUICK_S

LINGER_POLLS = 2000
"""How many status probes a ``Lingering`` run answers "running" to (5 ms apart: ~10 s)."""


class Lingering(AsyncSubagentSetup):
    """An async remote whose runs stay running for ``LINGER_POLLS`` probes, then complete."""

    def call_submit_request(self, session_id: str, call_id: str, input: Any) -> None:
        count("submit")

    def call_query_status(self, session_id: str, call_id: str) -> RunStatus:
        if count("status") < LINGER_POLLS:
            return RunStatus.running()
        return RunStatus.completed()

    def call_fetch_result(self, session_id: str, call_id: str) -> SubagentResult:
        count("fetch")
        return SubagentResult.ok("finished")

    def call_cancel_request(self, session_id: str, call_id: str) -> None:
        count("cancel")


class CountingRemote(DeferredSubagentSetup):
    """A deferred remote that counts its prepares and requests."""

    def prepare(self, ctx: RunnerContext, input: Any, session_id: str, call_id: str
                ) -> PreparedCall:
        count("prepare")

        def call() -> SubagentResult:
            count("request")
            return SubagentResult.ok("answered")

        return f"{session_id}#{call_id}", call, None


def polled(n: int) -> bool:
    """Wait until the remote's status was probed ``n`` times."""
    deadline = time.monotonic() + QUICK_S
    while current()["status"] < n:
        assert time.monotonic() < deadline, "the remote run was never polled"
        time.sleep(0.005)
    return True


def gated(tag: str) -> str:
    """Note that the child started, then wait for the test's gate ``child``."""
    gate("child_started").set()
    assert gate("child").wait(QUICK_S), "the child's gate never opened"
    return tag


def child_started() -> bool:
    return gate("child_started").wait(QUICK_S)


class PollingChild(Agent):
    """Submits to a remote (after a gated call, with ``input["gated"]``), awaits it: the
    async one, or the deferred one with ``input["deferred"]``."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input.get("gated"):
            await ctx.durable_execute_async(gated, "first")
        name = "deferred" if event.input.get("deferred") else "remote"
        result = await (await ctx.submit_subagent(name, {"q": 1}))
        ctx.send_event(OutputEvent(output=result.model_dump()))


def polling_child() -> Agent:
    child = PollingChild()
    child.add_resource("remote", ResourceType.AGENT, ResourceDescriptor(
        Lingering, status_poll_interval_millis=5))
    child.add_resource("deferred", ResourceType.AGENT, ResourceDescriptor(CountingRemote))
    return child


class CancellingParent(Agent):
    """Calls the polling child and cancels the call while the child polls (``"while"``) or
    before the child submits (``"before"``; to the deferred remote with ``"deferred"``)."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        when = event.input["cancel"]
        h = await ctx.submit_subagent("kid", {"gated": when != "while",
                                              "deferred": when == "deferred"})
        if when == "while":
            await ctx.durable_execute_async(polled, 3)
        else:
            await ctx.durable_execute_async(child_started)
        await h.cancel()
        if when != "while":
            gate("child").set()  # the child goes on to submit inside the cancelled call
        result = await h
        ctx.send_event(OutputEvent(output=result.model_dump()))


def cancelling_parent() -> Agent:
    parent = CancellingParent()
    parent.add_resource("kid", ResourceType.AGENT, ResourceDescriptor(
        InternalSubagent, agent=polling_child(), description="polls a remote",
        input_schema='{"type":"object"}'))
    return parent


# --------------------------------------------------------------------------- handles


def echo(value: Any) -> Any:
    return value


class EchoChild(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input.get("gated"):
            await ctx.durable_execute_async(gated, "first")
        ctx.send_event(OutputEvent(output=event.input))


def _plain(value: Any) -> Any:
    return value.model_dump() if isinstance(value, SubagentResult) else value


def stored() -> bool:
    """Wait until the giving action stashed its handle."""
    deadline = time.monotonic() + QUICK_S
    while "h" not in store("handles", dict):
        assert time.monotonic() < deadline, "no handle was stashed"
        time.sleep(0.005)
    return True


def taken() -> bool:
    return gate("taken").wait(QUICK_S)


class HandingParent(Agent):
    """Key ``give`` submits to its child (or, with ``input["what"] == "call"``, makes a
    durable call) and stashes the handle (the call); key ``take`` awaits it.

    The giver either returns at once (``input["finish"]``: its call still pending), or waits
    until the taker tried and then awaits its handle itself.
    """

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input["role"] == "give":
            h: Any = (await ctx.submit_subagent("kid", {"gated": True})
                      if event.input.get("what", "kid") == "kid"
                      else ctx.durable_execute_async(gated, "call"))
            store("handles", dict)["h"] = h
            if event.input.get("finish"):
                return
            await ctx.durable_execute_async(taken)
            gate("child").set()
            ctx.send_event(OutputEvent(output={"given": _plain(await h)}))
            return
        await ctx.durable_execute_async(stored)
        h = store("handles", dict)["h"]
        try:
            out: dict[str, Any] = {"result": _plain(await h)}
        except Exception as e:  # noqa: BLE001 - what the test looks at
            out = {"error": type(e).__name__, "message": str(e)}
        finally:
            gate("taken").set()
            gate("child").set()
        ctx.send_event(OutputEvent(output=out))


def handing_parent() -> Agent:
    parent = HandingParent()
    parent.add_resource("kid", ResourceType.AGENT, ResourceDescriptor(
        InternalSubagent, agent=EchoChild, description="echoes",
        input_schema='{"type":"object"}'))
    return parent


# --------------------------------------------------------------------------- setups' returns


class TextStatus(AsyncSubagentSetup):
    """Answers its status probe with text instead of a ``RunStatus``."""

    def call_submit_request(self, session_id: str, call_id: str, input: Any) -> None:
        count("submit")

    def call_query_status(self, session_id: str, call_id: str) -> Any:
        return "completed"

    def call_fetch_result(self, session_id: str, call_id: str) -> SubagentResult:
        return SubagentResult.ok("never")


class PairPrepare(DeferredSubagentSetup):
    """``prepare`` returns ``(key, call)``, forgetting the reconciler."""

    def prepare(self, ctx: RunnerContext, input: Any, session_id: str, call_id: str) -> Any:
        return call_id, lambda: SubagentResult.ok("never")


class Caller(Agent):
    """Calls the sub-agent ``input["name"]`` and outputs its result (with ``input["abandon"]``,
    submits and outputs ``"went on"`` without awaiting the handle)."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input.get("abandon"):
            await ctx.submit_subagent(event.input["name"], {})  # ABANDONED
            ctx.send_event(OutputEvent(output="went on"))
            return
        result = await (await ctx.submit_subagent(event.input["name"], {}))
        ctx.send_event(OutputEvent(output=result.model_dump()))


def caller() -> Agent:
    agent = Caller()
    agent.add_resource("text_status", ResourceType.AGENT, ResourceDescriptor(TextStatus))
    agent.add_resource("pair_prepare", ResourceType.AGENT, ResourceDescriptor(PairPrepare))
    agent.add_resource("lingering", ResourceType.AGENT, ResourceDescriptor(Lingering))
    agent.add_resource("deferred", ResourceType.AGENT, ResourceDescriptor(CountingRemote))
    return agent
