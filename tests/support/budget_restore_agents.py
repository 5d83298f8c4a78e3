"""The agent and failpoint of ``test_budgets_restore``: an agent budget across a restore.

Imported by the Flink workers by reference (``tests/`` is on ``sys.path``). Each key but
``hold`` asks one chat through ``model``, whose agent budget (``scope="agent"``) allows three
calls of 15 tokens; key ``hold`` keeps a durable call in flight until the job was crashed, so
the job stays alive (and keeps its timers) while checkpoints cover the first chats.
"""

from __future__ import annotations

from typing import Any

from flink_agents_py.api import (
    Agent,
    Budget,
    ChatMessage,
    ChatModelConnection,
    ChatModelSetup,
    ChatResponse,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    TokenUsage,
    action,
)
from support.crash import CrashOnceBase, first_attempt, hold, pace

__all__ = ["Metered", "Spender", "spender", "CrashWhenSpent", "Pick", "pace", "LAST",
           "record_of"]

LAST = 120
"""The last number of the paced source (~6 s of open input at 50 ms a number)."""

BEFORE = {0: "hold", 1: "a0", 2: "a1"}
"""The records of the first attempt, by source number."""
AFTER = {LAST - 2: "a2", LAST - 1: "a3", LAST: "a4"}
"""The records that arrive only after the restore (new keys that never spent)."""


class Metered(ChatModelConnection):
    """Answers at once and reports 10 input and 5 output tokens a call."""

    def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content="ok"),
                            usage=TokenUsage(input_tokens=10, output_tokens=5))


class Spender(Agent):
    """One chat per key (``hold``: one held call), and what came of it."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        key = event.input["key"]
        if key == "hold":
            await ctx.durable_execute_async(hold, event.input["dir"])
            ctx.send_event(OutputEvent(output={"key": key}))
            return
        try:
            r = await ctx.chat("model", [ChatMessage(content=key)])
        except Exception as e:  # noqa: BLE001 - the budget's refusal is the answer here
            out = {"key": key, "refused": "budget" if "BudgetExceededError" in str(e) else repr(e)}
        else:
            spent = r.metadata["budget"]["spent"]  # the subtask's, after this call
            out = {"key": key, "spent": spent["input"] + spent["output"]}
        ctx.send_event(OutputEvent(output=out))


def spender() -> Spender:
    agent = Spender()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(Metered))
    agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", budget=Budget(max_tokens=45, scope="agent")))
    return agent


def record_of(d: str, n: int) -> dict[str, Any]:
    """The record of source number ``n`` (one ``Pick`` let through)."""
    return {"key": BEFORE.get(n) or AFTER[n], "dir": d}


class Pick:
    """The first attempt's numbers always, the later keys' only after the restore."""

    def __init__(self, d: str) -> None:
        self.d = d

    def __call__(self, n: int) -> bool:
        return n in BEFORE or (n in AFTER and not first_attempt(self.d))


class CrashWhenSpent(CrashOnceBase):
    """Crash once the outputs of ``a0`` and ``a1`` (their spend in their keyed memory) are
    under a completed checkpoint, while ``hold``'s call is in flight."""

    def __call__(self, point: str, key: Any, info: dict[str, Any]) -> None:
        if not self.first_attempt():
            return
        if point == "outputs_emitted":
            for out in info["outputs"]:
                if isinstance(out, dict) and "spent" in out:
                    self.note(out["key"])
        elif point == "timer" and {"a0", "a1"} <= set(self.seen) and all(
                self.checkpointed_since(self.seen[k]) for k in ("a0", "a1")):
            self.crash("a0+a1", "injected crash: two keys spent, checkpointed")
