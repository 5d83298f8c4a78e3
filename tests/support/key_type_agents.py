"""Agents and a key selector for jobs keyed by ``UUID``s and ``datetime``s.

Importable by Flink workers (thread mode imports by reference). Used by
``tests/test_key_types_flink.py`` and ``tests/test_unread_errors_flink.py``.
"""

from __future__ import annotations

import datetime
import os
import uuid
from typing import Any

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


def key_of(record: dict[str, Any]) -> Any:
    """A record's key: ``UUID(record["id"])``, else ``datetime.fromisoformat(record["at"])``."""
    if "id" in record:
        return uuid.UUID(record["id"])
    return datetime.datetime.fromisoformat(record["at"])


class CountByKey(Agent):
    """Counts its key's records in short-term memory, keeps the key there and echoes it
    through a durable call; a record with ``"fail"`` raises after the call."""

    @action(InputEvent)
    @staticmethod
    async def count(event: InputEvent, ctx: RunnerContext) -> None:
        stm = ctx.short_term_memory
        stm.set("seen", stm.get("seen", 0) + 1)
        stm.set("key", ctx.key)
        echoed = await ctx.durable_execute_async(repr, ctx.key)
        if event.input.get("fail"):
            raise ValueError(f"record {event.input['n']} fails")
        ctx.send_event(OutputEvent(output={
            "n": event.input["n"], "key": ctx.key, "type": type(ctx.key).__name__,
            "kept": stm.get("key") == ctx.key, "echoed": echoed, "seen": stm.get("seen"),
            "pid": os.getpid()}))


class FailsOnBad(Agent):
    """Outputs its input; an input that starts with ``"bad"`` raises, quoting it."""

    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        if str(event.input).startswith("bad"):
            raise ValueError(f"cannot handle {event.input}")
        ctx.send_event(OutputEvent(output=event.input))
