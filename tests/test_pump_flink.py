"""Many keys waiting on calls at once, on a MiniCluster in thread mode, run the way a user runs it.

In thread mode completions are applied by whichever callback runs next, under their own key
(``AgentOperator._pump``): each key's state (short-term memory here) must still be its own,
and each key's outputs in its input order. The user's module and script are written into a
temporary directory outside the repository and run with the venv's interpreter.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("pyflink")

pytestmark = pytest.mark.flink

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else pathlib.Path(sys.executable))
KEYS, PER_KEY = 300, 3

MY_AGENT = '''
import asyncio

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


async def slow_double(n: int) -> int:
    await asyncio.sleep(0.05)
    return 2 * n


class Tally(Agent):
    """Per key: a running count in short-term memory, around a slow durable call."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        doubled = await ctx.durable_execute_async(slow_double, event.input["n"])
        count = (ctx.short_term_memory.get("count") or 0) + 1
        ctx.short_term_memory.set("count", count)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": event.input["n"],
                                           "doubled": doubled, "count": count}))
'''

MAIN = f'''
import json

from pyflink.common import Types, WatermarkStrategy
from pyflink.datastream.connectors.number_seq import NumberSequenceSource

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.flink import create_stream_environment
from my_agent import Tally

env = create_stream_environment(execution_mode="thread", parallelism=1)
ds = env.from_source(NumberSequenceSource(0, {KEYS * PER_KEY - 1}),
                     WatermarkStrategy.no_watermarks(), "numbers").map(
    lambda i: {{"key": f"k{{i % {KEYS}}}", "n": i}}, output_type=Types.PICKLED_BYTE_ARRAY())
agents = AgentsExecutionEnvironment.flink(env, max_in_flight=128)
out = agents.from_datastream(ds, key_selector=lambda r: r["key"]).apply(Tally()).to_datastream()
with out.execute_and_collect("many-keys-waiting") as results:
    for r in results:
        print("OUT " + json.dumps(r), flush=True)
'''


def test_many_waiting_keys_keep_their_own_state_and_order(tmp_path):
    (tmp_path / "my_agent.py").write_text(textwrap.dedent(MY_AGENT))
    (tmp_path / "main.py").write_text(textwrap.dedent(MAIN))
    proc = subprocess.run([PYTHON, "main.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    outs = [json.loads(line[4:]) for line in proc.stdout.splitlines() if line.startswith("OUT ")]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(outs) == KEYS * PER_KEY, proc.stderr[-3000:]
    by_key: dict[str, list[dict[str, int]]] = {}
    for o in outs:
        by_key.setdefault(o["key"], []).append(o)
    for i in range(KEYS):
        got = by_key[f"k{i}"]
        # the key's own inputs, in order, each counted once in the key's own memory
        assert [o["n"] for o in got] == [i + KEYS * j for j in range(PER_KEY)]
        assert [o["count"] for o in got] == list(range(1, PER_KEY + 1))
        assert all(o["doubled"] == 2 * o["n"] for o in got)
