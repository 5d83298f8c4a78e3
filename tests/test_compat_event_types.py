"""An event class of a program's own with fields, given the ``type`` it routes by.

In Apache Flink Agents 0.3.1 every ``Event`` has a required ``type`` field
(``api/events/event.py``: ``type: str``; extra fields allowed), so an event class written
with fields (``class ScoredEvent(Event): score: int``, Flink Agents 0.1's way) is built
with the type it routes by, ``ScoredEvent(type="scored", score=4)``, and an action listens
to that string (``@action("scored")``: its ``@action`` takes type strings). Before this port
found it, such an event was refused (``ScoredEvent has type 'ScoredEvent', not 'scored'``),
failing the action that built it. A class that declares its own ``EVENT_TYPE`` still
refuses another type (a typo stays an error). ``Event.from_json`` of such an event's JSON
gives an ad-hoc ``Event`` holding its other fields as attributes, as Flink Agents' does
(it was a ``ValidationError``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, ClassVar

import pydantic
import pytest

from flink_agents_py.compat import Event

ROOT = Path(__file__).resolve().parents[1]


class Scored(Event):
    score: int
    note: Any = None


class Pinned(Event):
    EVENT_TYPE: ClassVar[str] = "pinned"
    score: int = 0


def test_a_field_style_event_takes_the_type_it_is_given():
    event = Scored(type="scored", score=4)
    assert (event.type, event.score) == ("scored", 4)
    assert Scored(score=1).type == "Scored"
    with pytest.raises(pydantic.ValidationError, match="has type 'pinned'"):
        Pinned(type="pined")
    back = Event.from_json(event.model_dump_json())
    assert (back.type, back.get_attr("score"), back.id) == ("scored", 4, event.id)


PROGRAM = """
    from typing import Any
    from flink_agents_py.compat import (Agent, AgentsExecutionEnvironment, Event, InputEvent,
        OutputEvent, RunnerContext, action)


    class ScoredEvent(Event):
        score: int
        note: Any = None


    class ScoreAgent(Agent):
        @action(InputEvent.EVENT_TYPE)
        @staticmethod
        def score(event: Event, ctx: RunnerContext) -> None:
            ctx.send_event(ScoredEvent(type="scored", score=event.input * 2, note={"k": 1}))

        @action("scored")
        @staticmethod
        def scored(event: Event, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output=[type(event).__name__, event.type,
                                               event.score, event.note]))


    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "a", "value": 2}]).apply(ScoreAgent()).to_list()
    env.execute()
    print(out)
"""


def test_an_agent_routes_a_field_style_event_by_its_given_type(tmp_path):
    (tmp_path / "prog.py").write_text(textwrap.dedent(PROGRAM))
    done = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[{'a': ['ScoredEvent', 'scored', 4, {'k': 1}]}]"
