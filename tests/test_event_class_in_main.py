"""An event class defined in the job's script (``__main__``) works when the plan is loaded twice.

On Flink, actions and event classes of the script travel with the plan, pickled by value
(cloudpickle); each subtask of a Python worker loads it. Loading a class a second time, in
the same interpreter (the second subtask at parallelism 2), cloudpickle builds an empty
skeleton of it, which registered itself for its event type, then throws it away for the
class loaded first. The skeleton had none of the class's own fields: the job failed at the
first such event (``ValidationError: 1 validation error for Loud: text: Extra inputs are not
permitted``), restarting until it gave up. The worker is simulated here: a user's script, run
from a directory outside the repository, pickles its agent as the Flink builder does, and
another interpreter loads it twice, runs it, and rebuilds a stored event as a restore does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = '''
import subprocess
import sys

import cloudpickle

from flink_agents_py.api import Agent, Event, InputEvent, OutputEvent, RunnerContext, action


class Loud(Event):
    text: str


class Ping(Event):
    pass


class Shouter(Agent):
    @action(InputEvent)
    @staticmethod
    def shout(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(Loud(text=event.input["text"].upper()))

    @action(Loud)
    @staticmethod
    def emit(event: Loud, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=[type(event).__name__, event.text]))
        ctx.send_event(Ping())

    @action(Ping)
    @staticmethod
    def pong(event: Ping, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=isinstance(event, Ping)))  # the script's own class


WORKER = """
import pickle, sys
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api.internal import event_from_json

data = sys.stdin.buffer.read()
first, second = pickle.loads(data), pickle.loads(data)  # two subtasks, one interpreter
print(event_from_json({"type": "Loud", "text": "RESTORED"}).text)  # a restored event
print(AgentsExecutionEnvironment.local().from_list([{"key": "a", "text": "hi"}])
      .apply(second).collect())
"""

if __name__ == "__main__":
    done = subprocess.run([sys.executable, "-c", WORKER], input=cloudpickle.dumps(Shouter()),
                          capture_output=True)
    sys.stdout.write(done.stdout.decode())
    sys.stderr.write(done.stderr.decode())
    sys.exit(done.returncode)
'''


def test_an_event_class_of_the_script_survives_a_second_load(tmp_path):
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "job.py").write_text(SCRIPT)
    proc = subprocess.run([sys.executable, "job.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=100, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["RESTORED", "[['Loud', 'HI'], True]"], proc.stderr[-3000:]


FLINK_JOB = '''
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, Event, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.flink import create_stream_environment


class Loud(Event):
    text: str


class Shouter(Agent):
    @action(InputEvent)
    @staticmethod
    def shout(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(Loud(text=event.input["text"].upper()))

    @action(Loud)
    @staticmethod
    def emit(event: Loud, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=event.text))


if __name__ == "__main__":
    env = create_stream_environment(parallelism=2, restart_attempts=0)
    records = [{"user": u, "text": u * 2} for u in "abcd"]
    agents = AgentsExecutionEnvironment.flink(env, metrics=False)
    job = agents.from_datastream(env.from_collection(records), key_selector=lambda r: r["user"])
    with job.apply(Shouter()).to_datastream().execute_and_collect("loud") as outputs:
        print(sorted(outputs))
'''


@pytest.mark.flink
@pytest.mark.timeout(300)
def test_a_flink_job_at_parallelism_2_runs_an_event_class_of_its_script(tmp_path):
    pytest.importorskip("pyflink")
    (tmp_path / "job.py").write_text(FLINK_JOB)
    proc = subprocess.run([sys.executable, "job.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=280, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == "['AA', 'BB', 'CC', 'DD']", proc.stderr[-3000:]
