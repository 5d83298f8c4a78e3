"""Agents for the memory and started-call replay tests (top level: other processes import
them by name)."""

from __future__ import annotations

import time
from typing import Any

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
