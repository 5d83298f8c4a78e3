"""Apache Flink Agents' event listeners (its main branch, newer than 0.3).

``api/listener/event_listener.py`` there: an ``EventListener`` class (``str(cls)`` is
``module:Class.on_event_processed``, a class defined in a function is refused) named in
``AgentConfigOptions.EVENT_LISTENERS`` is told of every event the agent processes, with an
``EventContext`` (``eventType``, ``timestamp``; ``api/event_context.py``); what it raises is
logged and changes nothing (its ``api/tests/test_event_listener.py`` pins the naming).
Before this port found it, ``EventListener`` was an ``ImportError`` and the option was
taken and changed nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flink_agents_py.compat import Event, EventContext, EventListener

ROOT = Path(__file__).resolve().parents[1]


class GlobalListener(EventListener):
    def on_event_processed(self, context: EventContext, event: Event) -> None:
        pass


def test_a_listener_class_is_named_as_flink_agents_names_it():
    assert str(GlobalListener) == f"{__name__}:GlobalListener.on_event_processed"

    def local() -> type:
        class Local(EventListener):
            def on_event_processed(self, context: EventContext, event: Event) -> None:
                pass

        return Local

    with pytest.raises(ValueError, match="Cannot instantiate local class"):
        str(local())


LISTENERS = """
    import json, os
    from flink_agents_py.compat import Event, EventContext, EventListener


    class FileListener(EventListener):
        def on_event_processed(self, context: EventContext, event: Event) -> None:
            with open(os.environ["LISTEN_OUT"], "a") as f:
                f.write(json.dumps([context.eventType, event.get_attr("x")]) + "\\n")


    class Broken(EventListener):
        def on_event_processed(self, context, event):
            raise RuntimeError("boom")
"""

PROGRAM = """
    from flink_agents_py.compat import (Agent, AgentConfigOptions, AgentsExecutionEnvironment,
        Event, InputEvent, OutputEvent, RunnerContext, action)
    from my_listeners import Broken, FileListener


    class Echo(Agent):
        @action(InputEvent)
        @staticmethod
        def go(event: Event, ctx: RunnerContext) -> None:
            ctx.send_event(Event(type="step", attributes={"x": event.input}))

        @action("step")
        @staticmethod
        def step(event: Event, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output=event.attributes["x"]))


    env = AgentsExecutionEnvironment.get_execution_environment()
    env.get_config().set(AgentConfigOptions.EVENT_LISTENERS, [FileListener, str(Broken)])
    out = env.from_list([{"key": "a", "value": 1}]).apply(Echo()).to_list()
    env.execute()
    print(out)
"""


def test_configured_listeners_see_every_event_and_one_that_raises_changes_nothing(tmp_path):
    (tmp_path / "my_listeners.py").write_text(textwrap.dedent(LISTENERS))
    (tmp_path / "prog.py").write_text(textwrap.dedent(PROGRAM))
    seen = tmp_path / "seen.jsonl"
    done = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "LISTEN_OUT": str(seen)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[{'a': 1}]"
    assert [json.loads(line) for line in seen.read_text().splitlines()] == [
        ["_input_event", None], ["step", 1], ["_output_event", None]]
    assert "RuntimeError: boom" in done.stderr  # logged, the run went on
