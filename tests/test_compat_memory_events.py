"""Apache Flink Agents' memory observation events (its main branch, newer than 0.3).

``api/events/memory_event.py`` there defines ``ShortTermWriteEvent`` and six more kinds
(``{id, type, attributes: {key, value}}``), ``MemoryEventOptions`` their switches (writes
on by default), and its runtime sends a write event when an action that wrote that memory
finishes (its ``api/tests/test_memory_event.py`` pins the classes, these tests follow it).
Before this port found it, importing them was an ``ImportError`` and nothing was sent, so an
action listening to ``ShortTermWriteEvent`` never ran.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flink_agents_py.compat import (
    Event,
    EventType,
    LongTermGetEvent,
    LongTermSearchEvent,
    LongTermUpdateEvent,
    MemoryEvent,
    MemoryEventOptions,
    SensoryWriteEvent,
    ShortTermWriteEvent,
)

ROOT = Path(__file__).resolve().parents[1]


def test_memory_event_classes_are_flink_agents():
    assert ShortTermWriteEvent.EVENT_TYPE == "_short_term_write_event"
    assert SensoryWriteEvent.EVENT_TYPE == EventType.SensoryWriteEvent
    assert LongTermSearchEvent(key="k", value={}).type == "_long_term_search_event"
    written = ShortTermWriteEvent(key="user-42", value={"user.tier": "gold"})
    assert written.attributes == {"key": "user-42", "value": {"user.tier": "gold"}}
    assert (written.key, written.value["user.tier"]) == ("user-42", "gold")
    assert MemoryEvent.is_memory_type("_short_term_write_event")
    assert not MemoryEvent.is_memory_type(None)
    with pytest.raises(TypeError, match="abstract"):
        MemoryEvent(key="k", value={})
    with pytest.raises(TypeError, match="key"):
        ShortTermWriteEvent(key=None, value={})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="value"):
        MemoryEvent.from_event(Event(type=ShortTermWriteEvent.EVENT_TYPE,
                                     attributes={"key": "k"}))
    with pytest.raises(ValueError, match="Not a memory event type"):
        MemoryEvent.from_event(Event(type="other", attributes={"key": "k", "value": {}}))
    generic = Event(type=LongTermGetEvent.EVENT_TYPE,
                    attributes={"key": "k", "value": {"s.m1": "v"}})
    typed = MemoryEvent.from_event(generic)
    assert isinstance(typed, LongTermGetEvent) and typed.value == {"s.m1": "v"}
    assert typed.id == generic.id
    assert LongTermUpdateEvent(key="k", value={}, cleared_sets=["a"]).cleared_sets == ["a"]
    assert type(Event.from_json(written.model_dump_json())) is ShortTermWriteEvent
    assert MemoryEventOptions.SHORT_TERM_WRITE.get_key() == \
        "memory.generate-event.short-term-write"
    assert MemoryEventOptions.AGENT_RUN_BEGIN_EVENT.get_key() == "agent-run.begin-event"


PROGRAM = """
    from flink_agents_py.compat import (Agent, AgentsExecutionEnvironment, Event, InputEvent,
        MemoryEventOptions, OutputEvent, RunnerContext, SensoryWriteEvent,
        ShortTermWriteEvent, action)


    class Audit(Agent):
        @action(InputEvent)
        @staticmethod
        def visit(event: Event, ctx: RunnerContext) -> None:
            stm = ctx.short_term_memory
            stm.set("visits", (stm.get("visits") or 0) + 1)
            stm.set("user.tier", "silver")
            stm.set("user.tier", "gold")
            ctx.sensory_memory.set("scratch", event.input)

        @action(ShortTermWriteEvent)
        @staticmethod
        def audit(event: Event, ctx: RunnerContext) -> None:
            written = ShortTermWriteEvent.from_event(event)
            ctx.send_event(OutputEvent(output=[written.key, written.value]))

        @action(SensoryWriteEvent.EVENT_TYPE)
        @staticmethod
        def sensed(event: Event, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output=event.attributes["value"]))


    def run(off):
        env = AgentsExecutionEnvironment.get_execution_environment()
        if off:
            env.get_config().set(MemoryEventOptions.SHORT_TERM_WRITE, False)
        out = env.from_list([{"key": "u1", "value": 7}, {"key": "u1", "value": 8}]) \\
            .apply(Audit()).to_list()
        env.execute()
        return out


    print(run(False))
    print(run(True))
"""


def test_write_events_reach_the_actions_listening_to_them(tmp_path):
    (tmp_path / "prog.py").write_text(textwrap.dedent(PROGRAM))
    done = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    on, off = done.stdout.strip().splitlines()
    assert on == str([{"u1": ["u1", {"visits": 1, "user.tier": "gold"}]},
                      {"u1": {"scratch": 7}},
                      {"u1": ["u1", {"visits": 2, "user.tier": "gold"}]},
                      {"u1": {"scratch": 8}}])
    assert off == str([{"u1": {"scratch": 7}}, {"u1": {"scratch": 8}}])


DELETING = """
    from pydantic import BaseModel
    from flink_agents_py.compat import (Agent, AgentsExecutionEnvironment, Event, InputEvent,
        OutputEvent, RunnerContext, SensoryWriteEvent, ShortTermWriteEvent, action)


    class Cart(BaseModel):
        items: list[str]


    class Checkout(Agent):
        @action(InputEvent)
        @staticmethod
        def pay(event: Event, ctx: RunnerContext) -> None:
            stm = ctx.short_term_memory
            stm.set("cart", Cart(items=["pen"]))
            stm.set("receipt", b"%PDF")
            stm.delete("cart")  # paid: the cart goes
            stm.delete("never.there")
            ctx.sensory_memory.set("tmp", 1)
            ctx.sensory_memory.delete("tmp")

        @action(ShortTermWriteEvent)
        @staticmethod
        def audit(event: Event, ctx: RunnerContext) -> None:
            value = ShortTermWriteEvent.from_event(event).value
            ctx.send_event(OutputEvent(output={k: repr(v) for k, v in value.items()}))

        @action(SensoryWriteEvent)
        @staticmethod
        def sensed(event: Event, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output=event.attributes["value"]))

        @action(InputEvent)
        @staticmethod
        def keep(event: Event, ctx: RunnerContext) -> None:
            ctx.short_term_memory.set("last", Cart(items=[str(event.input)]))


    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "u1", "value": 7}]).apply(Checkout()).to_list()
    env.execute()
    print(sorted(map(repr, out)))
"""


def test_write_events_name_deleted_paths_and_carry_values_as_read(tmp_path):
    """A delete failed the action that made it (``SerializationError``: the runtime's marker
    of a deleted path has no JSON form) and a stored model or ``bytes`` came in the runtime's
    stored form (``{"$model": ..., "data": ...}``); now a deleted path is ``None`` and a value
    is plain JSON, as Flink Agents' event holds it (a model's fields, bytes as base64)."""
    (tmp_path / "prog.py").write_text(textwrap.dedent(DELETING))
    done = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == str(sorted(map(repr, [
        {"u1": {"cart": "None", "receipt": repr("JVBERg=="), "never.there": "None"}},
        {"u1": {"last": repr({"items": ["7"]})}},
        {"u1": {"tmp": None}}])))
