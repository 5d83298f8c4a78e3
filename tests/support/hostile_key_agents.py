"""Records whose keys or contents misbehave, and an agent that echoes what it ran.

Importable by Flink workers (thread mode imports by reference), so the classes a record
holds unpickle there. Used by the ``tests/test_*_flink.py`` modules that apply them.
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


class StrRaises(Exception):
    """An exception whose ``__str__`` (and ``repr``) raises."""

    def __str__(self) -> str:
        raise RuntimeError("str of StrRaises")

    __repr__ = __str__


def fail_strangely(n: int) -> int:
    """A durable call's function raising ``StrRaises``."""
    raise StrRaises(n)


def key_or_strange_failure(record: dict[str, Any]) -> Any:
    """The key selector: ``record["k"]``; ``StrRaises`` for a record with ``"fail"``."""
    if "fail" in record:
        raise StrRaises(record["fail"])
    return record["k"]


class FailStrangely(Agent):
    """Raises ``StrRaises`` (mode ``"raise"``), or awaits a durable call raising it and
    outputs what it caught (mode ``"call"``); else outputs the key and ``n``."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        mode, n = event.input.get("mode"), event.input["n"]
        if mode == "raise":
            raise StrRaises(n)
        if mode == "call":
            try:
                await ctx.durable_execute_async(fail_strangely, n)
            except StrRaises as e:
                ctx.send_event(OutputEvent(output={"key": ctx.key, "n": n,
                                                   "caught": type(e).__name__}))
            return
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": n}))


class EmitOrFail(Agent):
    """Outputs the record's ``"out"`` as it is; a record with ``"fail"`` fails the action."""

    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        if "fail" in event.input:
            raise ValueError(event.input["fail"])
        ctx.send_event(OutputEvent(output=event.input["out"]))
