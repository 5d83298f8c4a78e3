"""Agents for the memory and started-call replay tests (top level: other processes import
them by name)."""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


def slow(tag: str, delay: float) -> str:
    time.sleep(delay)
    return f"done:{tag}"


class GatherAgent(Agent):
    """``gather`` reads memory, starts three calls at once (the fastest last), submits two
    more and awaits them in the other order; ``bump`` (triggered by the same input) bumps
    the counter meanwhile."""

    @action(InputEvent)
    @staticmethod
    async def gather(event: InputEvent, ctx: RunnerContext) -> None:
        n = event.input["n"]
        seen = ctx.short_term_memory.get("count", 0)
        started = [ctx.durable_execute_async(slow, f"{n}-{i}", d)
                   for i, d in enumerate((0.03, 0.01, 0.0))]
        first = [await c for c in reversed(started)]
        later = ctx.short_term_memory.get("count", 0)
        a = ctx.durable_execute_async(slow, f"{n}-a", 0.02)
        b = ctx.durable_execute_async(slow, f"{n}-b", 0.0)
        got_b, got_a = await b, await a
        ctx.send_event(OutputEvent(output={"n": n, "seen": seen, "later": later,
                                           "calls": [*first, got_a, got_b]}))

    @action(InputEvent)
    @staticmethod
    def bump(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.short_term_memory.set("count", ctx.short_term_memory.get("count", 0) + 1)


def inputs() -> list[dict[str, Any]]:
    """Three records of one key and one of another."""
    return [{"key": "a", "n": 0}, {"key": "a", "n": 1}, {"key": "b", "n": 2},
            {"key": "a", "n": 3}]


class LtmPair(Agent):
    """Two actions of one input on long-term memory: ``note`` searches, waits on a call and
    adds; ``tally`` (meanwhile) adds to a shared set and deletes what is over two items."""

    @action(InputEvent)
    @staticmethod
    async def note(event: InputEvent, ctx: RunnerContext) -> None:
        notes = ctx.long_term_memory.get_memory_set("notes")
        before = [i.value for i in notes.get()]
        found = [i.value for i in await notes.asearch(event.input["text"], 2)]
        await ctx.durable_execute_async(slow, event.input["text"], 0.01)
        notes.add(event.input["text"])
        ctx.send_event(OutputEvent(output={"before": before, "found": found,
                                           "size": notes.size()}))

    @action(InputEvent)
    @staticmethod
    def tally(event: InputEvent, ctx: RunnerContext) -> None:
        everyone = ctx.long_term_memory.get_memory_set("everyone", shared=True)
        items = everyone.get()
        if len(items) >= 2:
            everyone.delete([items[0].id])
        everyone.add(f"{ctx.key}:{event.input['text']}")


def answer(request: Any) -> Any:
    """A scripted model: tool ``add`` for "sum", then the tool's result; else an echo."""
    from flink_agents_py.testing import tool_call

    text = request.last_user_text
    if text.startswith("sum") and not request.tool_results:
        return tool_call("add", a=2, b=3)
    if request.tool_results:
        return f"sum is {request.tool_results[-1]}"
    return f"echo {text}"


def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: one.
        b: the other.
    """
    time.sleep(0.01)
    return a + b


class ChatPair(Agent):
    """Two chats made at once and awaited in the other order, a call made between them, and
    memory read before and after."""

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        from flink_agents_py.api import ChatMessage

        n = event.input["n"]
        seen = ctx.short_term_memory.get("asked", 0)
        first = ctx.chat("model", [ChatMessage(content=f"hello {n}")])
        second = ctx.chat("model", [ChatMessage(content=f"sum {n}")])
        mid = ctx.durable_execute_async(slow, f"mid-{n}", 0.01)
        got2 = (await second).message.content
        got_mid = await mid
        got1 = (await first).message.content
        ctx.short_term_memory.set("asked", seen + 1)
        ctx.send_event(OutputEvent(output={"n": n, "seen": seen, "got": [got1, got2, got_mid]}))

    @action(InputEvent)
    @staticmethod
    def count_too(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.short_term_memory.set("counted", ctx.short_term_memory.get("counted", 0) + 1)


class ModelFields(Agent):
    """``read`` reads a stored model, awaits a call and reads it again; ``upgrade`` (the
    same input, meanwhile) writes a field below it, which makes it an object."""

    @action(InputEvent)
    @staticmethod
    async def read(event: InputEvent, ctx: RunnerContext) -> None:
        memory = ctx.short_term_memory
        first = repr(memory.get("user"))
        await ctx.durable_execute_async(slow, str(event.input["n"]), 0.01)
        ctx.send_event(OutputEvent(output={"n": event.input["n"], "first": first,
                                           "then": repr(memory.get("user")),
                                           "names": sorted(memory.to_dict())}))

    @action(InputEvent)
    @staticmethod
    def upgrade(event: InputEvent, ctx: RunnerContext) -> None:
        memory = ctx.short_term_memory
        if event.input["n"] % 2 == 0:
            memory.set("user", Tier(name=f"u{event.input['n']}"))
        else:
            memory.set("user.tier", "gold")


class Tier(BaseModel):
    """A stored model (``ModelFields``)."""

    name: str
