"""An event type no action listens to is dropped with one warning, not silently."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, Event, InputEvent, OutputEvent, RunnerContext, action


class Lost(Event):
    n: int = 0


class Forgetful(Agent):
    """Sends a ``Lost`` per input (no action takes it) and an output."""

    @action(InputEvent)
    @staticmethod
    def go(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(Lost(n=event.input["n"]))
        ctx.send_event(OutputEvent(output=event.input["n"]))


def test_a_dropped_event_type_is_warned_about_once(caplog):
    records = [{"key": f"k{i % 2}", "n": i} for i in range(4)]
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        res = AgentsExecutionEnvironment.local().from_list(records).apply(Forgetful()).run()
    assert sorted(res.outputs) == [0, 1, 2, 3] and res.errors == []
    warned = [r.getMessage() for r in caplog.records if "trigger no action" in r.getMessage()]
    assert warned == ["events of type 'Lost' trigger no action of the agent (its actions: go) "
                      "and are dropped: the first sent by action 'go' (r0/go); is an @action(Lost) "
                      "missing?"]


ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

NEAR_MISS = """
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, Event, InputEvent, OutputEvent, RunnerContext, action


class Scoring(Agent):
    @action(InputEvent)
    @staticmethod
    def ask(event, ctx: RunnerContext) -> None:
        ctx.send_event(Event(type="scored", attributes={"n": event.input["n"]}))

    @action("score")
    @staticmethod
    def finish(event, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=event.get_attr("n")))


result = AgentsExecutionEnvironment.local().from_list([{"key": "a", "n": 1}]).apply(
    Scoring()).run()
print("outputs", result.outputs, "errors", result.errors)
"""


def test_a_type_sent_by_name_near_a_trigger_names_the_sender_and_the_trigger(tmp_path):
    """A user module, run from its own directory, sending ``"scored"`` to ``@action("score")``.

    The warning names the action that sent it, the ``@action`` as Python spells it (a quoted
    type, not a bare name), and the trigger one letter away with the action taking it.
    """
    (tmp_path / "scoring.py").write_text(NEAR_MISS)
    proc = subprocess.run([str(PYTHON), "scoring.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr
    assert "outputs [] errors []" in proc.stdout
    assert ("events of type 'scored' trigger no action of the agent (its actions: ask, finish) "
            "and are dropped: the first sent by action 'ask' (r0/ask); is an "
            "@action(\"scored\") missing, or is 'scored' meant to be 'score', which action "
            "'finish' takes?") in proc.stderr, proc.stderr
