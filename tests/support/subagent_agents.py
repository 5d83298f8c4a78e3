"""The agents and fakes of the sub-agent tests (``test_subagents``), also run by the
replay-safety checker (``test_crash_checker``).

A parent agent whose input record picks what it does with its sub-agents (``SCENARIOS``):
internal children, a deferred remote (``Remote``) and an async remote (``Pubsub``). The fakes
count the requests they receive and wait on gates in the test's probes (``support.probes``).
"""


from __future__ import annotations

import threading
import time
from typing import Any

from flink_agents_py.api import (
    Agent,
    AsyncSubagentSetup,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    DeferredSubagentSetup,
    Event,
    InputEvent,
    InternalSubagent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    RunStatus,
    SubagentResult,
    action,
    qualified_name,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.plan import AgentPlan
from flink_agents_py.testing import ScriptedRequest
from support.probes import count, current, gate, note, store
from support.waiting import QUICK_S


def barrier() -> threading.Barrier:
    """The test's barrier for three calls (``barrier_wait``)."""
    return store("barrier", lambda: threading.Barrier(3, timeout=QUICK_S))


# --------------------------------------------------------------------------- fakes


def script(req: ScriptedRequest) -> Any:
    """The fake model: answers with the system messages it was given."""
    count("model")
    return " | ".join(m.content for m in req.messages if m.role == MessageRole.SYSTEM)


def durable(tag: str) -> str:
    count(tag)
    return f"done-{tag}"


def gated_child_call(tag: str) -> str:
    count(tag)
    gate("child_started").set()
    assert gate("child").wait(QUICK_S), "child gate never opened"
    return f"done-{tag}"


def wait_child_started() -> bool:
    return gate("child_started").wait(QUICK_S)


def barrier_wait(tag: str) -> str:
    count("barrier")
    barrier().wait()  # raises BrokenBarrierError unless three calls are in flight at once
    return tag


def slow(tag: str) -> str:
    time.sleep(0.15)
    note(f"{tag}:done")
    return tag


def gated_after(value: Any) -> Any:
    count("after")
    assert gate("after").wait(QUICK_S), "after gate never opened"
    return value


def wait_polls(n: int) -> int:
    deadline = time.monotonic() + QUICK_S
    while current()["status:running"] < n:
        assert time.monotonic() < deadline, "the remote run was not polled"
        time.sleep(0.005)
    return current()["status:running"]


class Remote(DeferredSubagentSetup):
    """A deferred external sub-agent; ``input["mode"]`` picks its behaviour."""

    endpoint: str = ""

    def prepare(self, ctx: RunnerContext, input: Any, session_id: str, call_id: str):
        count("prepare")
        store("prepared", list).append((session_id, call_id))
        mode = input.get("mode") if isinstance(input, dict) else None
        if mode == "prepare_raises":
            raise ConnectionError("cannot reach the remote")
        key = f"{session_id}#{call_id}"

        def call() -> SubagentResult:
            count("deferred")
            if mode in ("gated", "gated_reconcile"):
                assert gate("deferred").wait(QUICK_S), "deferred gate never opened"
            if mode == "raise":
                raise RuntimeError("remote exploded")
            if mode == "error":
                return SubagentResult.failed("remote said no")
            return SubagentResult.ok({"echo": input, "key": key, "endpoint": self.endpoint})

        def reconcile() -> SubagentResult:
            count("reconcile")
            return SubagentResult.ok({"reconciled": key})

        return key, call, (reconcile if mode == "gated_reconcile" else None)


class Pubsub(AsyncSubagentSetup):
    """An async external sub-agent: runs complete at once unless ``input["wait"]``."""

    def call_submit_request(self, session_id: str, call_id: str, input: Any) -> None:
        count("submit")
        store("remote_runs")[call_id] = input

    def call_query_status(self, session_id: str, call_id: str) -> RunStatus:
        count("status")
        if call_id not in store("remote_runs"):
            return RunStatus.not_started()
        given = store("remote_runs")[call_id]
        if isinstance(given, dict) and given.get("fail"):
            return RunStatus.failed("remote broke")
        if isinstance(given, dict) and given.get("wait") and not gate("async").is_set():
            count("status:running")
            return RunStatus.running()
        return RunStatus.completed()

    def call_fetch_result(self, session_id: str, call_id: str) -> SubagentResult:
        count("fetch")
        return SubagentResult.ok({"async": store("remote_runs")[call_id]})

    def call_cancel_request(self, session_id: str, call_id: str) -> None:
        count("cancel")


class RunningPubsub(AsyncSubagentSetup):
    """An async remote whose runs stay running; counts submits and cancels (for cancels and
    divergences while a run is in flight)."""

    def call_submit_request(self, session_id: str, call_id: str, input: Any) -> None:
        count("submit")

    def call_query_status(self, session_id: str, call_id: str) -> RunStatus:
        return RunStatus.running()

    def call_fetch_result(self, session_id: str, call_id: str) -> SubagentResult:
        return SubagentResult.ok("never")

    def call_cancel_request(self, session_id: str, call_id: str) -> None:
        count("cancel")


# --------------------------------------------------------------------------- children


class Stage2(Event):
    pass


class Next(Event):
    pass


class EchoChild(Agent):
    @action(InputEvent)
    @staticmethod
    def echo(event: InputEvent, ctx: RunnerContext) -> None:
        count("echo_runs")
        stm = ctx.short_term_memory
        before = stm.to_dict()
        stm.set("count", stm.get("count", 0) + 1)
        ctx.send_event(OutputEvent(output={
            "input": event.input, "stm_before": before,
            "sensory_keys": sorted(ctx.sensory_memory.to_dict())}))


class PromptChild(Agent):
    """Asks its own chat model twice: by ``ctx.chat`` and by a ``ChatRequestEvent``."""

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        r = await ctx.chat("cm", [ChatMessage(content="by chat")])
        ctx.send_event(ChatRequestEvent(model="cm", messages=[ChatMessage(content="by event")]))
        ctx.send_event(OutputEvent(output={"via": "ctx.chat", "system": r.message.content}))

    @action(ChatResponseEvent)
    @staticmethod
    def answered(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"via": "event",
                                           "system": event.response.message.content}))


class OutputThenMoreChild(Agent):
    """Sends an output, then an event whose action sends another output."""

    @action(InputEvent)
    @staticmethod
    def first(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output="first"))
        ctx.send_event(Next())

    @action(Next)
    @staticmethod
    def second(event: Next, ctx: RunnerContext) -> None:
        count("second_runs")
        ctx.send_event(OutputEvent(output="second"))


class BarrierChild(Agent):
    @action(InputEvent)
    @staticmethod
    async def meet(event: InputEvent, ctx: RunnerContext) -> None:
        tag = await ctx.durable_execute_async(barrier_wait, event.input["tag"])
        ctx.send_event(OutputEvent(output={"tag": tag}))


class CancelChild(Agent):
    @action(InputEvent)
    @staticmethod
    async def first(event: InputEvent, ctx: RunnerContext) -> None:
        count("first_runs")
        await ctx.durable_execute_async(gated_child_call, "first_call")
        ctx.send_event(Next())
        ctx.send_event(OutputEvent(output="first"))

    @action(Next)
    @staticmethod
    def successor(event: Next, ctx: RunnerContext) -> None:
        count("successor_runs")
        ctx.send_event(OutputEvent(output="successor"))


class RaisingChild(Agent):
    @action(InputEvent)
    @staticmethod
    def judge(event: InputEvent, ctx: RunnerContext) -> None:
        count("raiser_runs")
        raise ValueError("bad review")


class FailWithSiblingChild(Agent):
    @action(InputEvent)
    @staticmethod
    def fail_now(event: InputEvent, ctx: RunnerContext) -> None:
        raise KeyError("missing field")

    @action(InputEvent)
    @staticmethod
    async def slow_sibling(event: InputEvent, ctx: RunnerContext) -> None:
        await ctx.durable_execute_async(slow, "sibling")
        ctx.send_event(Next())

    @action(Next)
    @staticmethod
    def successor(event: Next, ctx: RunnerContext) -> None:
        count("successor_runs")


class StagesChild(Agent):
    @action(InputEvent)
    @staticmethod
    async def stage1(event: InputEvent, ctx: RunnerContext) -> None:
        count("stage1_runs")
        await ctx.durable_execute_async(durable, "s1")
        ctx.short_term_memory.set("stage1", True)
        ctx.send_event(Stage2())

    @action(Stage2)
    @staticmethod
    async def stage2(event: Stage2, ctx: RunnerContext) -> None:
        count("stage2_runs")
        a = await ctx.durable_execute_async(durable, "s2a")
        b = await ctx.durable_execute_async(gated_child_call, "s2b")
        ctx.send_event(OutputEvent(output={"a": a, "b": b,
                                           "stage1": ctx.short_term_memory.get("stage1")}))


# --------------------------------------------------------------------------- parent


class Parent(Agent):
    """Runs the scenario named by ``input["do"]``; outputs what it saw."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        do = event.input["do"]
        out: dict[str, Any] = await SCENARIOS[do](event.input, ctx)
        ctx.send_event(OutputEvent(output={"do": do, **out}))


def dump(r: SubagentResult) -> dict[str, Any]:
    return r.model_dump()


async def sc_call(inp: dict, ctx: RunnerContext) -> dict:
    """Submit ``inp["name"]`` with ``inp["input"]``; await; optionally a gated call after."""
    h = await ctx.submit_subagent(inp["name"], inp.get("input"))
    r = await h
    out: dict[str, Any] = {"result": dump(r)}
    if inp.get("after"):
        out["after"] = await ctx.durable_execute_async(gated_after, "after-value")
    return out


async def sc_memory(inp: dict, ctx: RunnerContext) -> dict:
    ctx.short_term_memory.set("p", 1)
    ctx.sensory_memory.set("ps", 1)
    echo = ctx.get_resource("echo", ResourceType.AGENT)
    first = await (await echo.submit(ctx, {"n": 1}))
    second = await (await echo.submit(ctx, {"n": 2}))
    return {"first": dump(first), "second": dump(second),
            "parent_stm": ctx.short_term_memory.to_dict(),
            "parent_sensory": ctx.sensory_memory.to_dict()}


async def sc_many(inp: dict, ctx: RunnerContext) -> dict:
    h1 = await ctx.submit_subagent("barrier", {"tag": "one"})
    h2 = await ctx.submit_subagent("barrier", {"tag": "two"})
    h3 = await ctx.submit_subagent("barrier", {"tag": "three"})
    hd = await ctx.submit_subagent("remote", {"n": 4})
    ha = await ctx.submit_subagent("pubsub", {"n": 5})
    got = {"three": await h3, "remote": await hd, "one": await h1, "pubsub": await ha,
           "two": await h2, "one_again": await h1}
    return {k: dump(v) for k, v in got.items()}


async def sc_cancel_internal(inp: dict, ctx: RunnerContext) -> dict:
    h = await ctx.submit_subagent("canceller", {"x": 1})
    await ctx.durable_execute_async(wait_child_started)
    await h.cancel()
    gate("child").set()  # let the child's in-flight action retire
    r = await h
    return {"result": dump(r), "again": dump(await h)}


async def sc_cancel_internal_before_start(inp: dict, ctx: RunnerContext) -> dict:
    h = await ctx.submit_subagent("canceller", {"x": 1})
    await h.cancel()
    gate("child").set()
    return {"result": dump(await h)}


async def sc_cancel_deferred(inp: dict, ctx: RunnerContext) -> dict:
    h = await ctx.submit_subagent("remote", {"mode": "ok"})
    await h.cancel()
    return {"result": dump(await h)}


async def sc_cancel_async(inp: dict, ctx: RunnerContext) -> dict:
    h = await ctx.submit_subagent("pubsub", {"wait": True})
    await h.cancel()
    r = await h
    await h.cancel()  # a finished call is unaffected
    return {"result": dump(r), "again": dump(await h)}


async def sc_fail_with_sibling(inp: dict, ctx: RunnerContext) -> dict:
    h = await ctx.submit_subagent("failer", {"x": 1})
    r = await h
    note("parent:result")
    return {"result": dump(r)}


async def sc_refused(inp: dict, ctx: RunnerContext) -> dict:
    unknown = await (await ctx.submit_subagent("nope", 1))
    not_agent = await (await ctx.submit_subagent("double", 1))
    return {"unknown": dump(unknown), "not_agent": dump(not_agent)}


async def sc_after_completion(inp: dict, ctx: RunnerContext) -> dict:
    """Submit an internal child, then wait on another call while the child completes."""
    h = await ctx.submit_subagent("echo", {"n": 7})
    await ctx.durable_execute_async(gated_after, "after")
    return {"result": dump(await h)}


async def sc_wait_other_key(inp: dict, ctx: RunnerContext) -> dict:
    """Runs on another key while key "a" polls its remote run: proves polling is off-thread."""
    polls = await ctx.durable_execute_async(wait_polls, 2)
    note("b:polled")
    gate("async").set()
    return {"polls_seen": polls >= 2}


SCENARIOS = {
    "call": sc_call, "memory": sc_memory, "many": sc_many,
    "cancel_internal": sc_cancel_internal,
    "cancel_internal_before_start": sc_cancel_internal_before_start,
    "cancel_deferred": sc_cancel_deferred, "cancel_async": sc_cancel_async,
    "fail_with_sibling": sc_fail_with_sibling, "refused": sc_refused,
    "after_completion": sc_after_completion, "wait_other_key": sc_wait_other_key,
}


def internal(child: Agent | type[Agent], **kw: Any) -> ResourceDescriptor:
    return ResourceDescriptor(InternalSubagent, agent=child, **kw)


def prompt_child() -> Agent:
    child = PromptChild()
    child.add_resource("cc", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(ScriptedChatModel, function=qualified_name(script)))
    child.add_resource("cm", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="cc", prompt="Review {product} for {audience} ({missing})."))
    return child


def make_parent() -> Agent:
    p = Parent()
    p.add_resource("echo", ResourceType.AGENT, internal(EchoChild, description="echoes"))
    p.add_resource("prompted", ResourceType.AGENT, internal(prompt_child()))
    p.add_resource("barrier", ResourceType.AGENT, internal(BarrierChild))
    p.add_resource("output_then_more", ResourceType.AGENT, internal(OutputThenMoreChild))
    p.add_resource("canceller", ResourceType.AGENT, internal(CancelChild))
    p.add_resource("raiser", ResourceType.AGENT, internal(RaisingChild))
    p.add_resource("failer", ResourceType.AGENT, internal(FailWithSiblingChild))
    p.add_resource("stages", ResourceType.AGENT, internal(StagesChild))
    p.add_resource("remote", ResourceType.AGENT, ResourceDescriptor(
        Remote, endpoint="http://remote", description="a remote reviewer",
        input_schema='{"type": "object"}'))
    p.add_resource("pubsub", ResourceType.AGENT, ResourceDescriptor(
        Pubsub, status_poll_interval_millis=5))
    p.add_resource("double", ResourceType.TOOL, durable)
    return p


PLAN = AgentPlan.from_agent(make_parent())
