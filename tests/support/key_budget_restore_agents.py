"""The agent and failpoint of ``test_key_budget_restore_flink``: a per-key budget across a crash.

Imported by the Flink workers by reference (``tests/`` is on ``sys.path``). Records ``a0`` to
``a4`` are all of key ``a`` and each asks one chat through ``model``, whose per-key budget
allows three calls of 15 tokens; key ``hold`` keeps a durable call in flight until the job
was crashed, so the job stays alive while checkpoints cover the first chats. The key's calls
go through a ledger in the process (``runtime._key_spend``): after the crash a new process
must start it from the spend the key's keyed memory holds.
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
from support.budget_restore_agents import LAST
from support.crash import CrashOnceBase, count_call, first_attempt, hold, pace

__all__ = ["CrashWhenKeySpent", "KeyPick", "LAST", "key_spender", "pace", "record_of"]

BEFORE = {0: "hold", 1: "a0", 2: "a1"}
AFTER = {LAST - 2: "a2", LAST - 1: "a3", LAST: "a4"}


class CountedMetered(ChatModelConnection):
    """Answers at once with 10 input and 5 output tokens, logging each request it gets."""

    dir: str = ""

    def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        count_call(self.dir, "model", str(messages[-1].content))
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content="ok"),
            usage=TokenUsage(input_tokens=10, output_tokens=5),
        )


class KeySpender(Agent):
    """One chat per record (``hold``: one held call), and what came of it."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        tag = event.input["tag"]
        if tag == "hold":
            await ctx.durable_execute_async(hold, event.input["dir"])
            ctx.send_event(OutputEvent(output={"tag": tag}))
            return
        try:
            r = await ctx.chat("model", [ChatMessage(content=tag)])
        except Exception as e:  # noqa: BLE001 - the budget's refusal is the answer here
            out = {"tag": tag, "refused": "budget" if "BudgetExceededError" in str(e) else repr(e)}
        else:
            spent = r.metadata["budget"]["spent"]  # the key's, after this call
            out = {"tag": tag, "spent": spent["input"] + spent["output"]}
        ctx.send_event(OutputEvent(output=out))


def key_spender(d: str) -> KeySpender:
    agent = KeySpender()
    agent.add_resource(
        "conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(CountedMetered, dir=d)
    )
    agent.add_resource(
        "model",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor(ChatModelSetup, connection="conn", budget=Budget(max_tokens=45)),
    )
    return agent


def record_of(d: str, n: int) -> dict[str, Any]:
    """The record of source number ``n``: key ``a`` for every chat, ``hold`` for the hold."""
    tag = BEFORE.get(n) or AFTER[n]
    return {"key": "hold" if tag == "hold" else "a", "tag": tag, "dir": d}


class KeyPick:
    """The first attempt's numbers always, the later records only after the restore."""

    def __init__(self, d: str) -> None:
        self.d = d

    def __call__(self, n: int) -> bool:
        return n in BEFORE or (n in AFTER and not first_attempt(self.d))


class CrashWhenKeySpent(CrashOnceBase):
    """Crash once the outputs of ``a0`` and ``a1`` are under a completed checkpoint."""

    def __call__(self, point: str, key: Any, info: dict[str, Any]) -> None:
        if not self.first_attempt():
            return
        if point == "outputs_emitted":
            for out in info["outputs"]:
                if isinstance(out, dict) and "spent" in out:
                    self.note(out["tag"])
        elif (
            point == "timer"
            and {"a0", "a1"} <= set(self.seen)
            and all(self.checkpointed_since(self.seen[k]) for k in ("a0", "a1"))
        ):
            self.crash("a0+a1", "injected crash: key a spent twice, checkpointed")
