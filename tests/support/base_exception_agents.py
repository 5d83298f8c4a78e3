"""Actions that raise what is not an ``Exception``: a ``CancelledError`` or a
``GeneratorExit`` of their own, or a ``BaseException`` subclass of the user's.

Importable by Flink workers (thread mode imports by reference). Used by
``tests/test_action_base_exceptions*.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


class Abort(BaseException):
    """A user's own ``BaseException`` subclass (as some libraries define)."""


RAISED: dict[str, type[BaseException]] = {
    "cancelled": asyncio.CancelledError,
    "generator_exit": GeneratorExit,
    "abort": Abort,
}


def double(n: int) -> int:
    """A durable call's function."""
    return 2 * n


class RaiseBase(Agent):
    """Raises the record's ``do`` (``RAISED``), at once or after a durable call
    (``"after": True``); else outputs the key and ``n``."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        record: dict[str, Any] = event.input
        if record.get("after"):
            await ctx.durable_execute_async(double, record["n"])
        raised = RAISED.get(record.get("do", ""))
        if raised is not None:
            raise raised(f"{record['do']} {record['n']}")
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": record["n"]}))


class PlainRaiseBase(Agent):
    """``RaiseBase`` as a plain (not ``async``) action, no durable call."""

    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        record: dict[str, Any] = event.input
        raised = RAISED.get(record.get("do", ""))
        if raised is not None:
            raise raised(f"{record['do']} {record['n']}")
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": record["n"]}))


RECORDS: list[dict[str, Any]] = [
    {"key": "a", "n": 0},
    {"key": "a", "n": 1, "do": "cancelled"},
    {"key": "a", "n": 2},
    {"key": "a", "n": 3, "do": "generator_exit", "after": True},
    {"key": "b", "n": 4, "do": "abort"},
    {"key": "b", "n": 5, "after": True},
    {"key": "a", "n": 6, "do": "abort", "after": True},
    {"key": "a", "n": 7},
]
"""Records for ``RaiseBase``: each one that raises fails alone, its key goes on."""

GOOD = [{"key": "a", "n": 0}, {"key": "a", "n": 2}, {"key": "b", "n": 5}, {"key": "a", "n": 7}]
FAILED = [
    ("a", 1, "CancelledError", "cancelled 1"),
    ("a", 3, "GeneratorExit", "generator_exit 3"),
    ("b", 0, "Abort", "abort 4"),
    ("a", 4, "Abort", "abort 6"),
]
"""(key, position of the record within its key, error type, message) per failed record."""


def key_or_cancelled(record: dict[str, Any]) -> Any:
    """A key selector raising a ``CancelledError`` of its own for a record with ``"cancel"``."""
    if record.get("cancel"):
        raise asyncio.CancelledError(f"no key for {record['n']}")
    return record["key"]
