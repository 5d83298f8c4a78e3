"""Upgraded twins of the scenario agents (tests/test_crash_checker_upgrade.py).

Of ``Restorable`` (tests/support/restorable_agents.py):

- ``RestorableWithAudit``: a safe upgrade. The same durable calls in the same order with
  the same arguments; the output event carries a new field, and a new action handles a new
  event (``Audited``) that the upgraded action sends after its last call.
- ``RestorableReordered``: calls ``fetch`` before ``stamp`` (a reorder: a divergence).
- ``RestorableNewArguments``: calls ``fetch`` with another version (the recorded outcome
  would be handed to a call with other arguments).
- ``RestorableFewerCalls``: drops the failing ``lookup`` call.
- ``RestorablePatched``: ``RestorableNewArguments``' change under ``ctx.patched`` (safe).
- ``RestorableRenamed``: the same action under another name.

Of ``DurableChatAgent`` (tests/support/durability_agents.py):

- ``DurableChatNewAnswer``: a safe upgrade that changes only the output's text, after the
  chat (its last call).
- ``DurableChatNoteFirst``: makes a new call before the audit (the audit may be in flight
  at the crash: the new call would take its identity).
"""

from __future__ import annotations

from flink_agents_py.api import (
    Agent,
    ChatResponseEvent,
    Event,
    InputEvent,
    OutputEvent,
    RunnerContext,
    action,
)
from support.durability_agents import DurableChatAgent, audit
from support.restorable_agents import (
    ARG_VERSION,
    Restorable,
    compute,
    fetch,
    lookup,
    reconcile_compute,
    stamp,
)

__all__ = ["Audited", "RestorableWithAudit", "RestorableReordered", "RestorableNewArguments",
           "RestorableFewerCalls", "RestorablePatched", "RestorableRenamed", "DurableChatNewAnswer",
           "DurableChatNoteFirst", "Restorable", "DurableChatAgent", "note"]


def note(x: int) -> str:
    """The new action's durable call."""
    return f"noted {x}"


class Audited(Event):
    """A new event: only the upgraded agent sends it."""

    x: int


async def _restorable(event: InputEvent, ctx: RunnerContext, *, reorder: bool = False,
                      version: int | None = None, lookup_too: bool = True,
                      patched: bool = False) -> dict:
    """``Restorable.on_input``'s body, with the changes each twin makes."""
    x = event.input["x"]
    stm = ctx.short_term_memory
    stm.set("runs", stm.get("runs", 0) + 1)
    stm.set("inputs", [*stm.get("inputs", []), x])
    ctx.sensory_memory.set("seen", x)
    v = ARG_VERSION["v"] if version is None else version
    if patched and ctx.patched("fetch-v2"):  # the upgrade recipe: old runs keep version 1
        v = 2
    if reorder:
        b = await ctx.durable_execute_async(fetch, x, v)
        a = ctx.durable_execute(stamp, x)
    else:
        a = ctx.durable_execute(stamp, x)
        b = await ctx.durable_execute_async(fetch, x, v)
    err = None
    if lookup_too:
        try:
            await ctx.durable_execute_async(lookup, x)
        except LookupError as e:
            err = ["LookupError", str(e)]
    reconciler = (lambda: reconcile_compute(x)) if event.input.get("reconcile") else None
    c = await ctx.durable_execute_async(compute, x, reconciler=reconciler)
    return {"x": x, "a": a, "b": b, "err": err, "c": c, "runs": stm.get("runs"),
            "seen": ctx.sensory_memory.get("seen")}


class RestorableWithAudit(Agent):
    """Safe: same calls; a new output field and a new action for a new event."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        out = await _restorable(event, ctx)
        ctx.send_event(OutputEvent(output={**out, "schema": 2}))
        ctx.send_event(Audited(x=out["x"]))

    @action(Audited)
    @staticmethod
    async def on_audited(event: Audited, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=await ctx.durable_execute_async(note, event.x)))


class RestorableReordered(Agent):
    """Unsafe: ``fetch`` before ``stamp``."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=await _restorable(event, ctx, reorder=True)))


class RestorableNewArguments(Agent):
    """Unsafe: ``fetch`` with version 2 at the position of the recorded version-1 call."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=await _restorable(event, ctx, version=2)))


class RestorableFewerCalls(Agent):
    """Unsafe: no ``lookup`` call any more (``compute`` takes its position)."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=await _restorable(event, ctx, lookup_too=False)))


class RestorablePatched(Agent):
    """Safe: ``RestorableNewArguments``' change, guarded by ``ctx.patched("fetch-v2")``."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=await _restorable(event, ctx, patched=True)))


class RestorableRenamed(Agent):
    """Unsafe: the same calls in an action of another name (runs in flight in ``on_input``
    cannot resume)."""

    @action(InputEvent)
    @staticmethod
    async def handle(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=await _restorable(event, ctx)))


class DurableChatNewAnswer(DurableChatAgent):
    """Safe: the output's text changes, after the chat."""

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        content = event.response.message.content if event.response else None
        ctx.send_event(OutputEvent(output={"key": ctx.key, "answer": f"v2: {content}",
                                           "error": event.error}))


class DurableChatNoteFirst(DurableChatAgent):
    """Unsafe: a new call before the audit takes the identity of the audit in flight."""

    @action(ChatResponseEvent)
    @staticmethod
    async def audit_after_output(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        task = ctx.sensory_memory.get("task")
        if task["scenario"] == "after_output_before_run_complete":
            await ctx.durable_execute_async(note, 0)
            await ctx.durable_execute_async(audit, task)
