"""The second hour on Flink (issue 32): one MiniCluster job of a user's own module, run from a
temporary directory outside the repository, as a user runs it (thread mode, the default).

What it shows: a record with no ``"key"`` (and no key selector) reaches the error output as an
error row naming it and how to key it, and the other records run; no apache-beam warning
about optional filesystems (``Failed to import GCSFileSystem``) in the output; a run of a few
seconds with ``FLINK_AGENTS_PY_PROGRESS=1`` shows its records going by, not a jump from 0
to the total, with the bar's total, its metrics while running and its final counts (that
test was ``tests/test_flink_progress.py``'s, with a job of its own; this job serves both).
"""

from __future__ import annotations

import json
import os
import pathlib
import string
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("pyflink")

from test_flink_progress import bar_lines  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else pathlib.Path(sys.executable))

N = 60

MY_AGENT = '''
import asyncio

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


async def nap(seconds: float) -> float:
    await asyncio.sleep(seconds)
    return seconds


class Napper(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        await ctx.durable_execute_async(nap, 0.15)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": event.input["n"]}))
'''

MAIN = string.Template('''
import json

from pyflink.common import Types, WatermarkStrategy
from pyflink.datastream.connectors.number_seq import NumberSequenceSource

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.flink import create_stream_environment
from my_agent import Napper

N = $n


def record(i):
    if i == 7:
        return {"n": i, "text": "I forgot my key"}  # no "key", no key_selector
    return {"key": "k%d" % (i % 3), "n": i}


env = create_stream_environment()
ds = env.from_source(NumberSequenceSource(0, N - 1), WatermarkStrategy.no_watermarks(), "n").map(
    record, output_type=Types.PICKLED_BYTE_ARRAY())
agents = AgentsExecutionEnvironment.flink(env, progress=True)
job = agents.from_datastream(ds).apply(Napper())
both = job.to_datastream().map(lambda o: ["out", o], output_type=Types.PICKLED_BYTE_ARRAY()).union(
    job.errors_datastream().map(lambda e: ["err", e], output_type=Types.PICKLED_BYTE_ARRAY()))
got = {"out": [], "err": []}
with agents.progress(total=N, job_name="nap") as bar, both.execute_and_collect("nap") as rows:
    for kind, value in rows:
        got[kind].append(value)
    bar.finish(outputs=len(got["out"]), errors=len(got["err"]))
print(json.dumps({"outs": sorted(o["n"] for o in got["out"]),
                  "errs": [{k: e.get(k) for k in ("action", "error_type", "message", "input")}
                           for e in got["err"]]}))
''').substitute(n=N)


@pytest.fixture(scope="module")
def second_hour(tmp_path_factory) -> tuple[subprocess.CompletedProcess[str], dict]:
    """The user's job, run once for this module's tests: its process and its printed result."""
    work = tmp_path_factory.mktemp("second_hour")
    assert ROOT not in work.resolve().parents
    (work / "my_agent.py").write_text(textwrap.dedent(MY_AGENT))
    (work / "main.py").write_text(textwrap.dedent(MAIN))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([PYTHON, "main.py"], cwd=work, capture_output=True, text=True,
                         env={**env, "FLINK_AGENTS_PY_PROGRESS": "1"}, timeout=540,
                         check=False)
    assert res.returncode == 0, res.stderr[-4000:]
    return res, json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.flink
@pytest.mark.timeout(600)
def test_a_users_flink_job_second_hour(second_hour):
    res, got = second_hour

    # the record with no key is an error row; every other record ran
    assert got["outs"] == [i for i in range(N) if i != 7]
    [err] = got["errs"]
    assert err["action"] == "<key_selector>" and err["error_type"] == "UnkeyedRecordError"
    assert err["input"] == {"n": 7, "text": "I forgot my key"}
    assert 'no "key" field (its fields: n, text)' in err["message"]
    assert "key_selector=" in err["message"]

    # no apache-beam warning about its optional filesystems
    assert "Failed to import" not in res.stderr and "GCSFileSystem" not in res.stderr

    # the bar shows the run going by (20 naps of 0.15 s per key: about 3 s), not 0 then N
    states = bar_lines(res.stderr)
    running = sorted({done for done, _, _ in states if 0 < done < N})
    assert len(running) >= 2, states
    assert states[-1][:2] == (N, N) and "errors=1" in states[-1][2]


@pytest.mark.flink
@pytest.mark.timeout(600)
def test_a_users_bounded_job_shows_records_done_of_total_while_it_runs(second_hour):
    # (was tests/test_flink_progress.py's own job: this one serves it)
    res, got = second_hour
    states = bar_lines(res.stderr)
    assert states, res.stderr[-2000:]
    assert {total for _, total, _ in states} == {N}
    # read from the running job: a state between none and all, with its metrics
    running = [(done, post) for done, _, post in states if 0 < done < N]
    assert running, states
    assert all("outputs=" in post and "in_flight=" in post and "errors=" in post
               for _, post in running)
    done, _, postfix = states[-1]
    assert len(got["outs"]) == N - 1  # the unkeyed record is the one error
    assert done == N and f"outputs={N - 1}" in postfix and "in_flight=0" in postfix
