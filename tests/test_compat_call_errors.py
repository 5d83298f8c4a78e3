"""Mistakes Apache Flink Agents reports at the call, reported here at the same call.

Each test runs a program written for Flink Agents (its imports changed to
``flink_agents_py.compat``) from a temporary directory outside the repository, as a user
runs it, and checks what the program sees: the exception class and message it catches.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(120)


def run_program(tmp_path: Path, text: str) -> str:
    """Write ``text`` as ``main.py`` in ``tmp_path``, run it there and return its stdout."""
    (tmp_path / "main.py").write_text(textwrap.dedent(text))
    done = subprocess.run([str(PYTHON), "main.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=100, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert done.returncode == 0, done.stderr
    return done.stdout


ADD_TWICE = '''
from flink_agents_py.compat import (
    Agent, InputEvent, OutputEvent, Prompt, ResourceType,
    AgentsExecutionEnvironment,
)


def echo(event, ctx):
    ctx.send_event(OutputEvent(output=event.input))


agent = Agent()
agent.add_action(name="echo", trigger_conditions=["_input_event"], func=echo)
try:
    agent.add_action(name="echo", trigger_conditions=["_input_event"], func=echo)
except ValueError as e:
    print("action:", e)
agent.add_resource(name="p", resource_type=ResourceType.PROMPT,
                   instance=Prompt.from_text("hi"))
try:
    agent.add_resource(name="p", resource_type=ResourceType.PROMPT,
                       instance=Prompt.from_text("again"))
except ValueError as e:
    print("resource:", e)
# the same name for another type is fine, as in Flink Agents
agent.add_resource(name="p", resource_type=ResourceType.TOOL, instance=lambda x: x)

env = AgentsExecutionEnvironment.get_execution_environment()
env.add_resource("shared", ResourceType.PROMPT, Prompt.from_text("one"))
try:
    env.add_resource("shared", ResourceType.PROMPT, Prompt.from_text("two"))
except ValueError as e:
    print("environment:", e)
out = env.from_list([{"key": "k", "value": 1}]).apply(agent).to_list()
env.execute()
print("outputs:", out)
'''


def test_adding_an_action_or_resource_twice_raises_value_error_at_the_call(tmp_path):
    out = run_program(tmp_path, ADD_TWICE)
    assert "action: Action 'echo' already defined" in out
    assert "resource: prompt 'p' already defined" in out
    assert "override_resource('p', ...)" in out
    assert "environment: prompt 'shared' already defined on this environment" in out
    # the first of each stays, and the agent runs
    assert "outputs: [{'k': 1}]" in out


EXTRA_FIELDS = '''
import json

from flink_agents_py.compat import (
    Agent, AgentsExecutionEnvironment, Event, InputEvent, OutputEvent, action,
)


class Scoring(Agent):
    @action(InputEvent)
    @staticmethod
    def score(event, ctx):
        scored = Event(type="Scored", review=event.input, score=len(event.input))
        scored.checked = True          # set as a field, as Flink Agents' events allow
        ctx.send_event(scored)

    @action("Scored")
    @staticmethod
    def report(event, ctx):
        ctx.send_event(OutputEvent(output=[event.review, event.score, event.checked,
                                           event.get_attr("score")]))


e = Event(type="Scored", a=1, attributes={"b": 2})
again = Event.from_json(json.dumps(e.to_json()))
print("json:", again.a, again.b, again.attributes)
try:
    Event(type="Scored", a=1, attributes={"a": 2})
except TypeError as err:
    print("twice:", err)
try:
    InputEvent(input=1, inptu=2)   # a typed event still refuses a typo
except ValueError:
    print("typed: refused")

env = AgentsExecutionEnvironment.get_execution_environment()
out = env.from_list([{"key": "k", "value": "great"}]).apply(Scoring()).to_list()
env.execute()
print("outputs:", out)
'''


def test_an_ad_hoc_event_takes_extra_keyword_fields_as_attributes(tmp_path):
    out = run_program(tmp_path, EXTRA_FIELDS)
    assert "json: 1 2 {'b': 2, 'a': 1}" in out
    assert "twice: Event() got 'a' as a keyword and in attributes" in out
    assert "typed: refused" in out
    # built in one action, read as fields in the next (through the event's JSON form)
    assert "outputs: [{'k': ['great', 5, True, 5]}]" in out
