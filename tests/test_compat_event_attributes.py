"""A built-in event's ``attributes`` hold its payload, as in Apache Flink Agents.

Flink Agents 0.3.1 builds its built-in events as ``Event(type=..., attributes={...})``
(``api/events/event.py``: ``InputEvent(input)`` keeps ``{"input": input}`` in
``attributes``; ``api/events/chat_event.py`` the same for ``model``, ``messages``...), and
its documentation (``workflow_agent.md``, "Event") says every event carries its payload in
its ``attributes`` map, ``InputEvent`` "in its ``input`` attribute". Before this port found
it, ``event.attributes`` of ours held only free attributes: ``event.attributes["input"]``
was a ``KeyError`` failing the action.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flink_agents_py.api import UsageError
from flink_agents_py.compat import (
    ChatMessage,
    ChatRequestEvent,
    Event,
    InputEvent,
    MessageRole,
    OutputEvent,
    ToolRequestEvent,
)

ROOT = Path(__file__).resolve().parents[1]


def test_built_in_events_show_their_payload_in_attributes():
    assert InputEvent(input={"a": 1}).attributes == {"input": {"a": 1}}
    assert OutputEvent("x").attributes["output"] == "x"
    request = ChatRequestEvent(model="m", messages=[ChatMessage(role=MessageRole.USER,
                                                                content="hi")])
    assert sorted(request.attributes) == ["messages", "model", "output_schema", "prompt_args"]
    assert request.attributes["model"] == "m"
    assert ToolRequestEvent(model="m", tool_calls=[]).attributes == {"model": "m",
                                                                      "tool_calls": []}
    # an ad-hoc event and an event class of a program's own keep theirs as they were
    assert Event(type="x", attributes={"k": 1}).attributes == {"k": 1}


class Flagged(OutputEvent):
    """A program's own subclass of a built-in event: its field stays a field."""

    flag: bool = False


def test_a_subclass_of_a_built_in_event_keeps_its_attributes():
    event = Flagged(output=1, flag=True, attributes={"k": 2})
    assert event.attributes == {"output": 1, "k": 2}
    assert event.flag is True
    assert event.to_json()["attributes"] == {"k": 2}
    assert Flagged(output=2).to_json()["attributes"] == {}


def test_a_free_attribute_set_through_attributes_is_the_events():
    event = OutputEvent(output=1)
    event.attributes["note"] = "n"
    event.set_attr("more", 2)
    assert event.attributes == {"output": 1, "note": "n", "more": 2}
    assert event.to_json()["attributes"] == {"note": "n", "more": 2}  # stored once
    assert Event.from_json(event.model_dump_json()).attributes == event.attributes
    with pytest.raises(UsageError, match="immutable"):
        event.attributes["output"] = 2
    assert event.output == 1


PROGRAM = """
    from flink_agents_py.compat import (Agent, AgentsExecutionEnvironment, Event, InputEvent,
        OutputEvent, RunnerContext, action)


    class AttributesAgent(Agent):
        @action(InputEvent)
        @staticmethod
        def first(event: Event, ctx: RunnerContext) -> None:
            data = event.attributes["input"]
            ctx.send_event(Event(type="step", attributes={"text": data["text"].upper()}))

        @action("step")
        @staticmethod
        def second(event: Event, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output={"text": event.attributes["text"],
                                               "type": event.type}))


    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "k", "value": {"text": "hi"}}]).apply(AttributesAgent()).to_list()
    env.execute()
    print(out)
"""


def test_an_agent_reading_attributes_runs_from_a_users_directory(tmp_path):
    (tmp_path / "prog.py").write_text(textwrap.dedent(PROGRAM))
    done = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[{'k': {'text': 'HI', 'type': 'step'}}]"
