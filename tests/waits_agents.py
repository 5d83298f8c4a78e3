"""Agents that wait for outside events and timers (local and MiniCluster tests of waits).

Importable by Flink workers. The record names a directory (``dir``): each call of ``note``
appends ``note <key>`` to ``<dir>/calls.log`` and writes ``<dir>/waiting-<key>`` (what an
outside-event source waits for before sending), so a test counts executions across
re-entries and restores.
"""

from __future__ import annotations

import os
from typing import Any

from support.crash import append_line

from flink_agents_py.api import (
    Agent,
    InputEvent,
    OutputEvent,
    RunnerContext,
    WaitTimeoutError,
    action,
)


def note(d: str, key: str) -> str:
    """A durable call made before the wait: logged, and marks the key as waiting."""
    if d:
        append_line(d, "calls.log", f"note {key}")
        with open(os.path.join(d, f"waiting-{key}"), "w") as f:
            f.write("1")
    return f"noted {key}"


def mark_done(d: str, key: str, what: str) -> None:
    """A durable call after the wait: ``<dir>/done-<key>`` holds what the wait gave."""
    if d:
        with open(os.path.join(d, f"done-{key}"), "w") as f:
            f.write(what)


class Approver(Agent):
    """Notes the request, waits for ``go-<key>`` (timeout from the record), outputs the result."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        rec: dict[str, Any] = event.input
        d = rec.get("dir", "")
        noted = await ctx.durable_execute_async(note, d, str(ctx.key))
        try:
            got = await ctx.wait_for(f"go-{ctx.key}", timeout_s=rec.get("timeout_s"))
            outcome = {"approved": got}
        except WaitTimeoutError as e:
            outcome = {"timed_out": str(e), "correlation_id": e.correlation_id}
        await ctx.durable_execute_async(mark_done, d, str(ctx.key), str(sorted(outcome)))
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": rec.get("n"), "noted": noted,
                                           **outcome}))


class Sleeper(Agent):
    """Sleeps ``sleep_s`` seconds, then outputs."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        rec: dict[str, Any] = event.input
        await ctx.durable_execute_async(note, rec.get("dir", ""), str(ctx.key))
        await ctx.sleep(rec["sleep_s"])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "slept": rec["sleep_s"]}))


class BadWaits(Agent):
    """Waits wrongly, as the record says: an empty id, a '#' id, a bad timeout, a bad sleep."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        how = event.input["how"]
        if how == "empty":
            await ctx.wait_for("")
        elif how == "hash":
            await ctx.wait_for("#x")
        elif how == "timeout":
            await ctx.wait_for("x", timeout_s=-1)
        elif how == "sleep":
            await ctx.sleep(float("nan"))
        elif how == "twice":
            first = ctx.wait_for("same", timeout_s=1)
            second = ctx.wait_for("same", timeout_s=1)
            await first
            await second
