"""Records whose keys or contents misbehave, and an agent that echoes what it ran.

Importable by Flink workers (thread mode imports by reference), so the classes a record
holds unpickle there. Used by ``tests/test_hostile_keys_flink.py``,
``tests/test_row_records_flink.py`` and ``tests/test_table_types_flink.py``.
"""

from __future__ import annotations

from typing import Any

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


class ReprRaises:
    """A hashable key whose ``repr`` (and ``str``) raises."""

    def __repr__(self) -> str:
        raise RuntimeError("repr of ReprRaises")

    __str__ = __repr__

    def __hash__(self) -> int:
        return 7

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ReprRaises)


class UnhashableReprRaises:
    """An unhashable key whose ``repr`` raises."""

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        raise RuntimeError("repr of UnhashableReprRaises")


class Opaque:
    """A value pydantic cannot serialize (a class of its own, no JSON form)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"Opaque({self.n})"


def key_of(record: dict[str, Any]) -> Any:
    """The key selector: ``record["k"]``; a record with ``"fail"`` makes it raise its text."""
    if "fail" in record:
        raise ValueError(f"no key for {record['fail']}")
    return record["k"]


class Echo(Agent):
    """Outputs the key and the record's ``n``."""

    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": event.input["n"]}))


class Count(Agent):
    """Outputs the key, the record's ``x`` and how many records the key has seen (memory)."""

    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        seen = ctx.short_term_memory.get("seen", 0) + 1
        ctx.short_term_memory.set("seen", seen)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "x": event.input["x"], "seen": seen}))


class EmitOutput(Agent):
    """Outputs the record's ``"out"`` as it is."""

    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=event.input["out"]))
