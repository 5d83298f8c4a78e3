"""Actions that send events and then fail, written as each kind of action function."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from flink_agents_py.api import Agent, Event, InputEvent, OutputEvent, RunnerContext, action


def _double(n: int) -> int:
    return n * 2


class Sent(Event):
    """What a failing action sends to another action before it fails."""

    n: int


class SendsThenFails(Agent):
    """Per input ``{"key", "n", "kind"}``: sends an output and an event, then (for an odd
    ``n``) fails, from a plain function, a generator (``yield from ctx.execute_async``) or a
    coroutine, as ``kind`` says; ``relay`` outputs what reached it."""

    @action(InputEvent)
    @staticmethod
    def plain(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input["kind"] == "plain":
            _send_then_fail(event.input, ctx, event.input["n"] * 2)

    @action(InputEvent)
    @staticmethod
    def generator(event: InputEvent, ctx: RunnerContext) -> Generator[Any, Any, None]:
        if event.input["kind"] == "generator":
            doubled = yield from ctx.execute_async(_double, event.input["n"])
            _send_then_fail(event.input, ctx, doubled)

    @action(InputEvent)
    @staticmethod
    async def coroutine(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input["kind"] == "coroutine":
            doubled = await ctx.durable_execute_async(_double, event.input["n"])
            _send_then_fail(event.input, ctx, doubled)

    @action(Sent)
    @staticmethod
    def relay(event: Sent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "relayed": event.n}))


def _send_then_fail(record: dict[str, Any], ctx: RunnerContext, doubled: int) -> None:
    ctx.send_event(OutputEvent(output={"key": ctx.key, "sent": doubled}))
    ctx.send_event(Sent(n=doubled))
    ctx.short_term_memory.set("written", doubled)
    if record["n"] % 2:
        raise RuntimeError(f"failed after sending {doubled}")


KINDS = ("plain", "generator", "coroutine")
RECORDS = [{"key": f"{kind}-{n}", "n": n, "kind": kind} for kind in KINDS for n in (1, 2)]
"""Each kind once failing (``n`` 1) and once not (``n`` 2)."""
