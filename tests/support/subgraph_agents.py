"""Agents, fakes and the crash-injecting failpoint of the sub-graph MiniCluster test.

Importable by Flink workers (thread mode imports by reference). Everything a worker needs
(the count directory, whether to be slow) travels in the input record: to the chat (as the
user message), the tool (in its arguments), the internal child and the deferred remote (as
their input).

Counting: every request a fake receives appends ``<who> <key>`` to ``<dir>/calls.log``,
attempts cut short by the crash included. The tool is slow for a ``slow`` record on the
first attempt (before the ``crashed`` marker exists), so the failpoint finds it in flight.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    DeferredSubagentSetup,
    Event,
    InputEvent,
    InternalSubagent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    SubagentResult,
    ToolCall,
    action,
    chat_model_connection,
    chat_model_setup,
    tool,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from support.crash import CrashOnceBase, count_call, first_attempt, pace, read_counts
from support.tool_messages import tool_value

__all__ = ["Child", "ChildNext", "CrashOnce", "Remote", "SubgraphAgent", "build", "child_call",
           "kind", "lookup", "pace", "read_counts", "script"]

SLOW_S = 3.0


def script(request: Any) -> Any:
    """The fake model: round 1 calls ``lookup``; round 2 answers from its result."""
    task = orjson.loads(next(m.content for m in request.messages if m.role == MessageRole.USER))
    results = request.tool_results
    count_call(task["dir"], "model_r2" if results else "model_r1", task["key"])
    if not results:
        return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
            ToolCall(id="l", name="lookup", arguments={"task": task})])
    return orjson.dumps({"looked_up": tool_value(results[0])}).decode()


@tool
def lookup(task: dict) -> str:
    """Look the task up (slow on the first attempt for a slow record)."""
    count_call(task["dir"], "tool", task["key"])
    if task.get("slow") and first_attempt(task["dir"]):
        time.sleep(SLOW_S)
    return f"L({task['key']})"


def child_call(task: dict, who: str) -> str:
    count_call(task["dir"], who, task["key"])
    return f"{who}({task['key']})"


class ChildNext(Event):
    pass


class Child(Agent):
    """Two actions in sequence, each with one durable call."""

    @action(InputEvent)
    @staticmethod
    async def step_a(event: InputEvent, ctx: RunnerContext) -> None:
        a = await ctx.durable_execute_async(child_call, event.input, "child_a")
        ctx.short_term_memory.set("a", a)
        ctx.send_event(ChildNext())

    @action(ChildNext)
    @staticmethod
    async def step_b(event: ChildNext, ctx: RunnerContext) -> None:
        task = ctx.sensory_memory.get("_subagent.input")
        b = await ctx.durable_execute_async(child_call, task, "child_b")
        ctx.send_event(OutputEvent(output={"a": ctx.short_term_memory.get("a"), "b": b}))


class Remote(DeferredSubagentSetup):
    """A deferred external sub-agent; its call counts as ``deferred``."""

    def prepare(self, ctx: RunnerContext, input: Any, session_id: str, call_id: str):
        key = f"{session_id}#{call_id}"

        def call() -> SubagentResult:
            count_call(input["dir"], "deferred", input["key"])
            return SubagentResult.ok({"remote": input["key"], "idempotency_key": key})

        return key, call, None


class SubgraphAgent(Agent):
    """Input -> internal child (submitted first) + deferred remote + chat with a tool round."""

    @chat_model_connection
    @staticmethod
    def fake_connection() -> ResourceDescriptor:
        return ResourceDescriptor(ScriptedChatModel, function="support.subgraph_agents:script")

    @chat_model_setup
    @staticmethod
    def fake_model() -> ResourceDescriptor:
        return ResourceDescriptor(ChatModelSetup, connection="fake_connection", tools=["lookup"])

    lookup = staticmethod(lookup)

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        task = event.input
        child = await ctx.submit_subagent("child", task)       # c0, starts at once
        remote = await ctx.submit_subagent("remote", task)     # c1, runs when awaited
        deferred = await remote
        chat = await ctx.chat("fake_model", [ChatMessage(content=orjson.dumps(task).decode())])
        sub = await child
        ctx.send_event(OutputEvent(output={
            "key": ctx.key, "answer": chat.message.content, "child": sub.result,
            "child_ok": sub.success, "deferred": deferred.result}))


def build() -> SubgraphAgent:
    agent = SubgraphAgent()
    agent.add_resource("child", ResourceType.AGENT,
                       ResourceDescriptor(InternalSubagent, agent=Child))
    agent.add_resource("remote", ResourceType.AGENT,
                       ResourceDescriptor("support.subgraph_agents.Remote"))
    return agent


def kind(call_id: str) -> str:
    """What a recorded call id of run ``r0`` of ``SubgraphAgent`` is."""
    exact = {"r0/go/c0": "child_done", "r0/go/c1": "deferred", "r0/go/c2": "chat_done"}
    if call_id in exact:
        return exact[call_id]
    if call_id.endswith("/step_a/c0"):
        return "child_a"
    if call_id.endswith("/step_b/c0"):
        return "child_b"
    if call_id.endswith("_tool_call_action/c0"):
        return "tool"
    if "_tool_call_action" in call_id:
        return "model_r2"
    if call_id.endswith("_chat_model_action/c0"):
        return "model_r1"
    return "other"


class CrashOnce(CrashOnceBase):
    """Crash the job once, while ``key``'s tool call is in flight, after a completed
    checkpoint covers its chat's first model answer, its child's completion and its deferred
    call.

    Args:
        d: the test's directory (marker file ``crashed``; checkpoints under ``checkpoints/``).
        key: the key to watch.
    """

    COVERED = ("model_r1", "child_done", "deferred")
    OPEN = "tool"

    def __init__(self, d: str, key: str) -> None:
        super().__init__(d)
        self.key = key

    def __call__(self, point: str, key: Any, info: dict[str, Any]) -> None:
        if not self.first_attempt() or key != self.key:
            return
        if point == "call_recorded":
            self.note(kind(info["call_id"]))
        elif point == "timer" and all(c in self.seen for c in self.COVERED) \
                and self.OPEN not in self.seen \
                and self.checkpointed_since(max(self.seen[c] for c in self.COVERED)):
            self.crash(f"seen {sorted(self.seen)}",
                       f"injected crash: {sorted(self.seen)} checkpointed, {self.OPEN} in flight")
