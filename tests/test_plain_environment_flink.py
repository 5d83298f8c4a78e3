"""A plain PyFlink environment (``StreamExecutionEnvironment.get_execution_environment()``).

PyFlink's default execution mode is process mode, where the end of bounded input drained one
key at a time: a key's second call started only when the key before it had finished, so
keys stopped overlapping their calls (Flink Agents' async execution e2e test, 10 keys of
three 5 s calls, took 112 s against its 50 s bound). A local environment that sets no
mode now runs in thread mode, as ``create_stream_environment`` does; one that sets process
mode keeps it, and its end-of-input drain works every busy key at once
(``flink._process_drain``). Run from a temporary directory outside the repository, as a
user runs it.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("pyflink")

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else pathlib.Path(sys.executable))
KEYS = 6

MY_AGENT = f'''
import threading

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action

# every key's second call waits here for all of them: it passes only when the keys'
# second calls run at once (a drain one key at a time breaks it after its timeout)
TOGETHER = threading.Barrier({KEYS}, timeout=60)


def first(key):
    return "first " + key


def second(key):
    TOGETHER.wait()
    return "second " + key


class TwoCalls(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        a = await ctx.durable_execute_async(first, ctx.key)
        b = await ctx.durable_execute_async(second, ctx.key)
        ctx.send_event(OutputEvent(output=[a, b]))
'''

MAIN = f'''
import json

import sys

from pyflink.common import Configuration, Types
from pyflink.datastream import StreamExecutionEnvironment

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.flink import configure_workers
from my_agent import TwoCalls

cfg = Configuration()
if sys.argv[1:] == ["process"]:  # set by the user: kept
    cfg.set_string("python.execution-mode", "process")
env = StreamExecutionEnvironment.get_execution_environment(cfg)
env.set_parallelism(1)
agents = AgentsExecutionEnvironment.flink(env)
mode = configure_workers(env).execution_mode  # (idempotent: what the agents set)
ds = env.from_collection([{{"key": "k%d" % i}} for i in range({KEYS})],
                         type_info=Types.PICKLED_BYTE_ARRAY())
job = agents.from_datastream(ds, key_selector=lambda r: r["key"])
job.apply(TwoCalls())
errors = job.errors_datastream()
out = job.to_datastream().map(lambda o: json.dumps(o), output_type=Types.STRING()).union(
    errors.map(lambda e: "ERROR " + str(e), output_type=Types.STRING()))
with out.execute_and_collect("plain environment") as rows:
    print(json.dumps({{"mode": mode, "rows": sorted(rows)}}))
'''


@pytest.mark.flink
@pytest.mark.timeout(600)
@pytest.mark.parametrize("mode", ["thread", "process"])
def test_a_plain_environment_runs_keys_together_at_the_end_of_input(tmp_path, mode):
    # thread: no mode set (made thread mode); process: set by the user, and kept
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "my_agent.py").write_text(textwrap.dedent(MY_AGENT))
    (tmp_path / "main.py").write_text(textwrap.dedent(MAIN))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    args = ["process"] if mode == "process" else []
    res = subprocess.run([PYTHON, "main.py", *args], cwd=tmp_path, capture_output=True,
                         text=True, env=env, timeout=540, check=False)
    assert res.returncode == 0, res.stderr[-4000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["mode"] == mode
    assert got["rows"] == sorted(json.dumps([f"first k{i}", f"second k{i}"])
                                 for i in range(KEYS))
