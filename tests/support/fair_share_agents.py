"""Agents of the fair-share tests (``test_key_fair_share_runs``): a hot key's fan-out of calls
beside another key's one call, and the run shapes that could stall a key against its own
slot share (nested durable calls, a chat's tool calls, sub-agent fan-outs, deferred calls).

The gate is a file (its path in the record), so the same agents work on the local runner, in
a subprocess and in a Flink job's Python workers: the hot key's calls wait until it exists,
and only the other key's call makes it.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    DeferredSubagentSetup,
    InputEvent,
    InternalSubagent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    SubagentResult,
    action,
)
from flink_agents_py.testing import model_from_function, tool_call, tool_calls

GATE_WAIT_S = 30.0
"""How long a hot call waits for its gate before it answers ``"starved"``."""


def hot_call(gate: str, i: int) -> str:
    """A call of the hot key: waits (polling) until the file ``gate`` exists."""
    deadline = time.monotonic() + GATE_WAIT_S
    while not os.path.exists(gate):
        if time.monotonic() > deadline:
            return "starved"
        time.sleep(0.005)
    return f"hot{i}"


def cool_call(gate: str) -> str:
    """The other key's call: opens the gate."""
    with open(gate, "w") as f:
        f.write("open")
    return "cool"


def leaf(tag: str) -> str:
    """A call that just answers."""
    return f"leaf-{tag}"


class FanOut(Agent):
    """``n`` > 0: starts ``n`` hot calls at once and awaits them; else one cool call."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        gate, n = event.input["gate"], event.input["n"]
        if n:
            calls = [ctx.durable_execute_async(hot_call, gate, i) for i in range(n)]
            got = [await c for c in calls]
        else:
            got = [await ctx.durable_execute_async(cool_call, gate)]
        ctx.send_event(OutputEvent(output={"key": event.input["key"], "got": got}))


# ----------------------------------------------------------------- a key against its own share


class Child(Agent):
    """A sub-agent that makes two durable calls at once."""

    @action(InputEvent)
    @staticmethod
    async def work(event: InputEvent, ctx: RunnerContext) -> None:
        a = ctx.durable_execute_async(leaf, f"{event.input}-a")
        b = ctx.durable_execute_async(leaf, f"{event.input}-b")
        ctx.send_event(OutputEvent(output=[await a, await b]))


class Remote(DeferredSubagentSetup):
    """A deferred external sub-agent answering at once (its call holds a slot meanwhile)."""

    def prepare(self, ctx: RunnerContext, input: Any, session_id: str, call_id: str):
        return f"{session_id}#{call_id}", lambda: SubagentResult.ok({"echo": input}), None


def _answer(request: Any) -> Any:
    if not request.tool_results:  # three tool calls in one turn
        return tool_calls(*(tool_call("leaf", f"c{i}", tag=f"t{i}") for i in range(3)))
    return json.dumps(sorted(m.content for m in request.tool_results))


class Shapes(Agent):
    """Runs the shape named by ``input["do"]`` with several calls of its key at once."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        do = event.input["do"]
        if do == "nested":

            async def outer(tag: str) -> str:
                inner = await ctx.durable_execute_async(leaf, tag)  # inside its caller's slot
                return f"outer({inner})"

            calls = [ctx.durable_execute_async(outer, str(i)) for i in range(3)]
            out: Any = [await c for c in calls]
        elif do == "chat":
            reply = await ctx.chat("model", [ChatMessage(content="go")])
            out = reply.message.content
        elif do == "subagents":
            handles = [await ctx.submit_subagent("child", str(i)) for i in range(3)]
            results = [await h for h in handles]
            out = [r.result if r.success else str(r.error_message) for r in results]
        else:  # "deferred"
            handles = [await ctx.submit_subagent("remote", i) for i in range(3)]
            out = [(await h).result for h in handles]
        ctx.send_event(OutputEvent(output={"do": do, "out": out}))


def shapes() -> Shapes:
    """``Shapes`` with its model (asks for three tool calls), tool and sub-agents."""
    agent = Shapes()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(_answer))
    agent.add_resource(
        "model",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor(ChatModelSetup, connection="conn", tools=["leaf"]),
    )
    agent.add_resource("leaf", ResourceType.TOOL, leaf)
    agent.add_resource(
        "child", ResourceType.AGENT, ResourceDescriptor(InternalSubagent, agent=Child)
    )
    agent.add_resource("remote", ResourceType.AGENT, ResourceDescriptor(Remote))
    return agent


# ----------------------------------------------------------------- calls queued at a snapshot


def counted(i: int) -> int:
    """Counts its runs (``call<i>``) in the test's probes; waits for the gate ``slot``."""
    from support.probes import count, gate  # the test's probes (only the core tests use it)

    count(f"call{i}")
    assert gate("slot").wait(30), "the slot gate never opened"
    return i


class Queued(Agent):
    """Starts six calls at once; with one slot per key, five wait for one."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        calls = [ctx.durable_execute_async(counted, i) for i in range(6)]
        ctx.send_event(OutputEvent(output=[await c for c in calls]))
