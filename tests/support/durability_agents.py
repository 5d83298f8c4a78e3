"""Agents, fake model and tools, and the crash-injecting failpoint of the durability tests.

Importable by Flink workers (thread mode imports by reference). Everything a worker needs
(the count directory, the scenario) travels in the input record, and from there in the chat
messages and tool arguments, so no process-wide setting is needed.

Counting: every request the fake model or a tool *receives* appends one line to
``<dir>/calls.log`` (``<who> <key>``), including requests of an attempt that is later
crashed. A fake service is "slow" on the first attempt (before the crash marker exists) so
the failpoint can find it in flight.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    RunnerContext,
    ToolCall,
    action,
    chat_model_connection,
    chat_model_setup,
    tool,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from support.crash import CrashOnceBase, count_call, first_attempt, pace, read_counts
from support.tool_messages import tool_value

__all__ = ["CrashOnce", "DurableChatAgent", "audit", "pace", "read_counts", "script", "tool_a",
           "tool_b"]

SLOW_S = 2.5


def script(request: Any) -> Any:
    """The fake model: round 1 calls tool_a and tool_b; round 2 answers from their results."""
    task = orjson.loads(request.messages[-1].content if request.messages[-1].role == "user"
                        else next(m.content for m in request.messages if m.role == "user"))
    d, key, scenario = task["dir"], task["key"], task["scenario"]
    results = request.tool_results
    count_call(d, "model_r2" if results else "model_r1", key)
    if not results:
        return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
            ToolCall(id="a", name="tool_a", arguments={"task": task}),
            ToolCall(id="b", name="tool_b", arguments={"task": task}),
        ])
    if scenario == "after_tool_before_second_model" and first_attempt(d):
        time.sleep(SLOW_S)
    return orjson.dumps({m.tool_call_id: tool_value(m) for m in results}).decode()


@tool
def tool_a(task: dict) -> str:
    """Fast tool A."""
    count_call(task["dir"], "tool_a", task["key"])
    if task["scenario"] == "after_model_before_tool" and first_attempt(task["dir"]):
        time.sleep(SLOW_S)
    return f"A({task['key']})"


@tool
def tool_b(task: dict) -> str:
    """Tool B, slow in the scenarios that catch it in flight."""
    count_call(task["dir"], "tool_b", task["key"])
    if task["scenario"] in ("after_model_before_tool", "mid_batch", "journal_window") \
            and first_attempt(task["dir"]):
        time.sleep(SLOW_S)
    return f"B({task['key']})"


def audit(task: dict) -> str:
    """A slow side call made after the output was emitted (scenario after_output)."""
    count_call(task["dir"], "audit", task["key"])
    if first_attempt(task["dir"]):
        time.sleep(SLOW_S)
    return "audited"


class DurableChatAgent(Agent):
    """Input -> chat with a two-tool round -> output; plus an audit after the output."""

    @chat_model_connection
    @staticmethod
    def fake_connection() -> ResourceDescriptor:
        return ResourceDescriptor(ScriptedChatModel, function="support.durability_agents:script")

    @chat_model_setup
    @staticmethod
    def fake_model() -> ResourceDescriptor:
        return ResourceDescriptor(ChatModelSetup, connection="fake_connection",
                                  tools=["tool_a", "tool_b"])

    tool_a = staticmethod(tool_a)
    tool_b = staticmethod(tool_b)

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.sensory_memory.set("task", event.input)
        ctx.send_event(ChatRequestEvent(model="fake_model", messages=[
            ChatMessage(content=orjson.dumps(event.input).decode())]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={
            "key": ctx.key, "answer": event.response.message.content if event.response else None,
            "error": event.error}))

    @action(ChatResponseEvent)
    @staticmethod
    async def audit_after_output(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        task = ctx.sensory_memory.get("task")
        if task["scenario"] == "after_output_before_run_complete":
            await ctx.durable_execute_async(audit, task)


def _kind(call_id: str) -> str:
    if "audit_after_output" in call_id:
        return "audit"
    if call_id.endswith("_tool_call_action/c0"):
        return "tool_a"
    if call_id.endswith("_tool_call_action/c1"):
        return "tool_b"
    return "model_r2" if "_tool_call_action" in call_id else "model_r1"


class CrashOnce(CrashOnceBase):
    """Crash the job once, at a named point, after a checkpoint covers the named record.

    Args:
        d: the scenario's directory (marker file ``crashed``; checkpoints under
            ``checkpoints/``).
        scenario: which point (see the test module).
    """

    AFTER = {  # scenario -> (recorded call a checkpoint must cover, what must still be open)
        "after_model_before_tool": ("model_r1", "tool_b"),
        "after_tool_before_second_model": ("tool_b", "model_r2"),
        "mid_batch": ("tool_a", "tool_b"),
        "after_output_before_run_complete": ("output", "audit"),
        "journal_window": ("tool_a", None),
    }

    def __init__(self, d: str, scenario: str) -> None:
        super().__init__(d)
        self.scenario = scenario

    def _crash(self, why: str) -> None:
        self.crash(why, f"injected crash: {self.scenario}: {why}")

    def __call__(self, point: str, key: Any, info: dict[str, Any]) -> None:
        if not self.first_attempt():
            return
        covered, still_open = self.AFTER[self.scenario]
        if point == "call_recorded":
            kind = _kind(info["call_id"])
            self.note(kind)
            if self.scenario == "journal_window" and kind == "tool_b" and "tool_a" in self.seen \
                    and self.checkpointed_since(self.seen["tool_a"]):
                self._crash("tool_b completed after the last checkpoint")
        elif point == "outputs_emitted":
            self.note("output")
        elif point == "timer" and covered in self.seen and still_open not in self.seen \
                and still_open is not None and self.checkpointed_since(self.seen[covered]):
            self._crash(f"{covered} checkpointed, {still_open} in flight")
