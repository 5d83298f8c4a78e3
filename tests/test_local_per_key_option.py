"""The local runner takes ``max_in_flight_per_key`` as a keyword, as the Flink environment does.

Found by a newcomer: ``AgentsExecutionEnvironment.local(max_in_flight_per_key=2)`` was a
``TypeError`` (the keyword existed only on ``AgentsExecutionEnvironment.flink``), so the
option ``docs/how-to/limits.md`` introduces had to be set through ``HostOptions`` on the
runner a user tries it on first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.local import LocalExecutionEnvironment
from flink_agents_py.runtime import HostOptions

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]

USER_PROGRAM = """
import json, threading, time
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action

LOCK = threading.Condition()
RUNNING = [0]
PEAK = [0]

def hot_call(i):
    with LOCK:
        RUNNING[0] += 1
        PEAK[0] = max(PEAK[0], RUNNING[0])
        LOCK.notify_all()
        # two of the key's calls meet here: the share lets exactly two run at once
        met = LOCK.wait_for(lambda: PEAK[0] >= 2, timeout=30)
    time.sleep(0.02)  # held a little, so a third call would overlap if it were started
    with LOCK:
        RUNNING[0] -= 1
    return i if met else "starved"

class Mine(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        calls = [ctx.durable_execute_async(hot_call, i) for i in range(6)]
        got = [await c for c in calls]
        ctx.send_event(OutputEvent(output={"got": got, "peak": PEAK[0]}))

env = AgentsExecutionEnvironment.local(max_in_flight=8, max_in_flight_per_key=2)
print(json.dumps(env.from_list([{"key": "hot"}]).apply(Mine()).collect()))
"""


def test_a_users_program_sets_the_per_key_share_on_the_local_runner(tmp_path: Path):
    (tmp_path / "mine.py").write_text(textwrap.dedent(USER_PROGRAM))
    done = subprocess.run(
        [sys.executable, "mine.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (out,) = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"got": list(range(6)), "peak": 2}


def test_the_keyword_lands_in_the_options_and_refuses_options_beside_it():
    env = AgentsExecutionEnvironment.local(max_in_flight=8, max_in_flight_per_key=3)
    assert env.options.max_in_flight_per_key == 3
    with pytest.raises(TypeError, match="max_in_flight_per_key"):
        LocalExecutionEnvironment(max_in_flight_per_key=3, options=HostOptions())
    with pytest.raises(ValueError, match="max_in_flight_per_key"):
        AgentsExecutionEnvironment.local(max_in_flight_per_key=0)


BARRIER = threading.Barrier(8, timeout=20)
"""Eight calls of one key that meet: they complete only when all eight run at once."""


def _meet(i: int) -> int:
    BARRIER.wait()
    return i


class _FanOut(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        calls = [ctx.durable_execute_async(_meet, i) for i in range(8)]
        ctx.send_event(OutputEvent(output=[await c for c in calls]))


def test_a_ported_program_gives_one_key_every_async_thread_as_the_names_page_says():
    from flink_agents_py.compat import AgentExecutionOptions
    from flink_agents_py.compat import AgentsExecutionEnvironment as FlinkAgentsEnvironment

    page = (ROOT / "docs" / "reference" / "flink-agents-names.md").read_text()
    assert "get_execution_environment(max_in_flight_per_key=8)" in page
    env = FlinkAgentsEnvironment.get_execution_environment(max_in_flight_per_key=8)
    env.get_config().set(AgentExecutionOptions.NUM_ASYNC_THREADS, 8)
    outputs = env.from_list([{"key": "k", "value": 1}]).apply(_FanOut()).to_list()
    env.execute()
    assert outputs == [{"k": list(range(8))}]  # 6 slots (the default share) break the barrier
