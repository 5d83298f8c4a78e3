"""Many keys waiting on calls at once, on a MiniCluster in thread mode, run the way a user runs it.

In thread mode completions are applied by whichever callback runs next, under their own key
(``KeySwitching.pump``): each key's state (short-term memory here) must still be its own,
and each key's outputs in its input order. One input has no key: its key selector raises,
the record goes to the error output with a traceback, and the job keeps running. The user's
module and script are written into a temporary directory outside the repository and run with
the venv's interpreter.
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
BAD = 7  # this input has no "key": its key selector raises

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
    lambda i: {{"key": f"k{{i % {KEYS}}}", "n": i}} if i != {BAD} else {{"n": i}},
    output_type=Types.PICKLED_BYTE_ARRAY())
agents = AgentsExecutionEnvironment.flink(env, max_in_flight=128)
applied = agents.from_datastream(ds, key_selector=lambda r: r["key"]).apply(Tally())
pickled = Types.PICKLED_BYTE_ARRAY()
out = applied.to_datastream().map(lambda r: ("OUT", r), output_type=pickled).union(
    applied.errors_datastream().map(lambda e: ("ERR", e), output_type=pickled))
with out.execute_and_collect("many-keys-waiting") as results:
    for tag, r in results:
        print(tag + " " + json.dumps(r), flush=True)
'''


def test_many_waiting_keys_keep_their_own_state_and_order(tmp_path):
    (tmp_path / "my_agent.py").write_text(textwrap.dedent(MY_AGENT))
    (tmp_path / "main.py").write_text(textwrap.dedent(MAIN))
    proc = subprocess.run([PYTHON, "main.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    lines = proc.stdout.splitlines()
    outs = [json.loads(line[4:]) for line in lines if line.startswith("OUT ")]
    errs = [json.loads(line[4:]) for line in lines if line.startswith("ERR ")]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(outs) == KEYS * PER_KEY - 1, proc.stderr[-3000:]
    # the record its key selector failed on is in the error output; the job kept running
    [err] = errs
    assert (err["action"], err["error_type"], err["input"]) == ("<key_selector>", "KeyError",
                                                                {"n": BAD})
    assert "main.py" in err["traceback"] and "r[\"key\"]" in err["traceback"]
    by_key: dict[str, list[dict[str, int]]] = {}
    for o in outs:
        by_key.setdefault(o["key"], []).append(o)
    for i in range(KEYS):
        got = by_key[f"k{i}"]
        # the key's own inputs, in order, each counted once in the key's own memory
        assert [o["n"] for o in got] == [n for n in (i + KEYS * j for j in range(PER_KEY))
                                         if n != BAD]
        assert [o["count"] for o in got] == list(range(1, len(got) + 1))
        assert all(o["doubled"] == 2 * o["n"] for o in got)
