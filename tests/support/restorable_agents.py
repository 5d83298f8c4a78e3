"""The ``Restorable`` agent and its fakes: a run with sync, async, failing and reconciled
durable calls, snapshotted mid-way (tests/test_core_restore.py, tests/test_crash_checker.py);
``SendsTwins``: two identical sibling events, whose actions each keep their own calls.
"""

from __future__ import annotations

import collections
import threading

from flink_agents_py.api import Agent, Event, InputEvent, OutputEvent, RunnerContext, action

__all__ = ["Restorable", "COUNTS", "ARG_VERSION", "stamp", "fetch", "lookup", "compute",
           "reconcile_compute", "Twin", "SendsTwins"]

COUNTS: collections.Counter[str] = collections.Counter()
_LOCK = threading.Lock()
ARG_VERSION = {"v": 1}


def _count(name: str) -> int:
    with _LOCK:
        COUNTS[name] += 1
        return COUNTS[name]


def stamp(x: int) -> str:
    _count("stamp")
    return f"stamp-{x}"


def fetch(x: int, version: int) -> dict[str, int]:
    _count("fetch")
    return {"fetched": x, "version": version}


def lookup(x: int) -> None:
    _count("lookup")
    raise LookupError(f"nothing for {x}")


def compute(x: int) -> int:
    _count("compute")
    return x * 2


def reconcile_compute(x: int) -> int:
    _count("reconcile")
    return x * 1000


class Restorable(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        x = event.input["x"]
        stm = ctx.short_term_memory
        stm.set("runs", stm.get("runs", 0) + 1)
        stm.set("inputs", [*stm.get("inputs", []), x])
        ctx.sensory_memory.set("seen", x)
        a = ctx.durable_execute(stamp, x)                      # c0, sync
        b = await ctx.durable_execute_async(fetch, x, ARG_VERSION["v"])  # c1
        try:
            await ctx.durable_execute_async(lookup, x)         # c2, raises
            err = None
        except LookupError as e:
            err = ["LookupError", str(e)]
        reconciler = (lambda: reconcile_compute(x)) if event.input.get("reconcile") else None
        c = await ctx.durable_execute_async(                   # c3, in flight at snapshot
            compute, x, reconciler=reconciler)
        ctx.send_event(OutputEvent(output={
            "x": x, "a": a, "b": b, "err": err, "c": c, "runs": stm.get("runs"),
            "seen": ctx.sensory_memory.get("seen")}))


class Twin(Event):
    """An event sent twice, with identical fields."""

    payload: str = "same"


class SendsTwins(Agent):
    """Sends two identical ``Twin`` events per input; a subclass adds the ``Twin`` action."""

    @action(InputEvent)
    @staticmethod
    def start(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(Twin())
        ctx.send_event(Twin())
