"""What the per-record path checks still refuses after its calls were cut (issue 31, part 4).

The chat's path lost calls in ``send_event`` (an event's class tested once per class, a
chain's length counted only in an id that long, a built event's id dropped from a dict),
in the ownership checks (the stepped id source compared with the context's own), in
memory operations (cached paths read by subscript, the clock's usual tick inline) and in
the stepping loop (set once when one action starts another at its end). Each test here
drives a neighbour of one of those shortcuts: the case the shortcut skips must still be
refused, kept or restored as before.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from flink_agents_py.api import (
    Agent,
    Event,
    EventChainLimitError,
    InputEvent,
    OutputEvent,
    RunnerContext,
    action,
)
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore
from flink_agents_py.runtime.recorder._state import InMemoryKeyState

pytestmark = pytest.mark.timeout(60)


class Note(Event):
    text: str = ""


def _run(agent: Agent, inputs: list[Any]) -> tuple[list[Any], list[Any]]:
    """Outputs and errors of ``inputs`` (one key each), as a host's callbacks give them."""
    core = AgentCore(AgentPlan.from_agent(agent))
    core.open()
    outputs: list[Any] = []
    errors: list[Any] = []
    try:
        for i, record in enumerate(inputs):
            state = InMemoryKeyState()
            res = core.on_input(f"k{i}", record, state, fresh=True)
            while True:
                assert asyncio.events._get_running_loop() is None  # the stand-in loop is gone
                outputs += res.outputs
                errors += res.errors
                if not res.busy:
                    break
                core.wait_for(f"k{i}", 5.0)  # its durable call, on the I/O executor
                res = core.advance(f"k{i}", state)
    finally:
        core.close()
    return outputs, errors


class Sender(Agent):
    """Sends what its input names: events of several classes, then one that is none."""

    @action(InputEvent)
    @staticmethod
    def send(event: InputEvent, ctx: RunnerContext) -> None:
        kind = type("Fresh", (Event,), {"__annotations__": {"n": int}, "n": 0})
        for what in event.input["send"]:
            if what == "note":
                ctx.send_event(Note(text="a"))
            elif what == "fresh":  # a class made at run time: an event like any other
                ctx.send_event(kind(n=1))
            elif what == "output":
                ctx.send_event(OutputEvent(output="out"))
            else:
                ctx.send_event(what)


def test_a_value_that_is_no_event_is_refused_after_events_of_every_kind_were_sent():
    outputs, errors = _run(
        Sender(),
        [
            {"send": ["note", "fresh", "output"]},
            {"send": ["note", "output", {"output": 1}]},
            {"send": ["fresh", "text"]},
        ],
    )
    assert outputs == ["out"]  # the first run's; a failed action sends nothing
    assert [(e.error_type, e.message.split(":")[0]) for e in errors] == [
        ("TypeError", "send_event takes an Event, got dict"),
        ("TypeError", "send_event takes an Event, got str"),
    ]
    assert all("send OutputEvent(output=...)" in e.message for e in errors)


class Twice(Agent):
    """Builds one event and sends it twice; the action it triggers outputs each id."""

    @action(InputEvent)
    @staticmethod
    def send(event: InputEvent, ctx: RunnerContext) -> None:
        note = Note(text="same")
        ctx.send_event(note)
        ctx.send_event(note)

    @action(Note)
    @staticmethod
    def seen(event: Note, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=event.id))


def test_an_event_built_in_its_action_keeps_its_id_once_a_second_send_gets_its_own():
    outputs, errors = _run(Twice(), [{"n": 1}])
    assert not errors
    assert outputs == ["r0/send/e0", "r0/send/e1"]


class Relay(Agent):
    """Input -> Note -> output: each action sends one event."""

    @action(InputEvent)
    @staticmethod
    def first(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(Note(text="x"))

    @action(Note)
    @staticmethod
    def second(event: Note, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=event.text))


@pytest.mark.parametrize("limit, failed", [(0, "first"), (1, "second"), (2, None)])
def test_a_chain_longer_than_a_tiny_limit_still_fails_where_it_passes_the_limit(
    monkeypatch, limit, failed
):
    # ids shorter than twice the limit are not counted: here every id is that short
    monkeypatch.setattr(EventChainLimitError, "LIMIT", limit)
    outputs, errors = _run(Relay(), [{"n": 1}])
    assert [e.action for e in errors] == ([failed] if failed else [])
    assert all(e.error_type == "EventChainLimitError" for e in errors)
    assert outputs == ([] if failed else ["x"])


class Paths(Agent):
    """Reads and writes its sensory memory at the path its input gives."""

    @action(InputEvent)
    @staticmethod
    def use(event: InputEvent, ctx: RunnerContext) -> None:
        path = event.input["path"]
        memory = ctx.sensory_memory
        for attempt in (lambda: memory.get(path), lambda: memory.set(path, 1)):
            try:
                attempt()
            except ValueError as e:
                ctx.send_event(OutputEvent(output=str(e)[:30]))


def test_a_memory_path_that_is_no_dotted_string_is_refused_on_read_and_write():
    outputs, errors = _run(Paths(), [{"path": ["a"]}, {"path": "a..b"}, {"path": ""}])
    assert not errors
    assert outputs == ["memory path must be dotted nam"] * 6


def _echo(text: str) -> str:
    return text


class Nested(Agent):
    """An action started at once at another's end (in its frame) still has no real loop."""

    @action(InputEvent)
    @staticmethod
    async def first(event: InputEvent, ctx: RunnerContext) -> None:
        text = await ctx.durable_execute_async(_echo, "x")  # its end: in a later callback
        ctx.send_event(Note(text=text))

    @action(Note)
    @staticmethod
    async def second(event: Note, ctx: RunnerContext) -> None:
        asyncio.get_running_loop().time()  # the stand-in's (no loop: a RuntimeError)


def test_an_action_started_in_the_frame_of_another_refuses_asyncio_and_the_loop_is_left():
    outputs, errors = _run(Nested(), [{"n": 1}, {"n": 2}])
    assert outputs == []
    assert [(e.action, e.error_type) for e in errors] == [("second", "UnsupportedAwaitError")] * 2
