"""On a MiniCluster, an answer that reaches the agent before its key's record is held for it.

The answers come first in the job's one source, the records after them, split into the
agent's two inputs, which race: before, an answer the operator took first went to the error
output (``no run of key ... is in flight``) and the key's run waited until the end of input
for it. Now each key's run gets its answer whichever input the operator took first (the
outcome does not depend on the race; which way it goes is not up to the test, so the
answer-first path of the Flink host is pinned without a JVM by
``test_waits_operator.test_an_answer_before_its_record_is_held_in_keyed_state_and_survives_a_restore``),
and an answer for a key no record ever comes for is held, then, at the end of input, an
error row naming that key (before: at once, saying it was held only for a run in flight).
Run from a user's folder, with the user's own module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.flink, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[1]

AGENT = """
    from flink_agents_py.api import Agent, InputEvent, OutputEvent, WaitTimeoutError, action


    class Waits(Agent):
        @action(InputEvent)
        @staticmethod
        async def on_input(event, ctx):
            try:
                got = await ctx.wait_for(f"go-{ctx.key}", timeout_s=600)
            except WaitTimeoutError as e:
                got = f"timed out: {e}"
            ctx.send_event(OutputEvent(output={"key": ctx.key, "got": got}))


    def is_answer(item):
        return "correlation_id" in item


    def is_record(item):
        return "correlation_id" not in item
"""

JOB = """
    import json
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.flink import create_stream_environment
    from my_agent import Waits, is_answer, is_record

    keys = [f"k{n}" for n in range(8)]
    answers = [{"key": k, "correlation_id": f"go-{k}", "payload": k.upper()} for k in keys]
    answers.append({"key": "z", "correlation_id": "go-z", "payload": "nobody"})
    env = create_stream_environment(parallelism=1, restart_attempts=0)
    items = env.from_collection(answers + [{"key": k} for k in keys])
    agents = AgentsExecutionEnvironment.flink(env, metrics=False)
    job = (agents.from_datastream(items.filter(is_record))
           .connect(items.filter(is_answer)).apply(Waits()))
    with job.to_datastream().union(job.errors_datastream()).execute_and_collect("early") as rows:
        for r in rows:
            print("ROW " + json.dumps(r, sort_keys=True), flush=True)
"""


def test_answers_before_their_records_reach_the_runs_and_a_stray_one_is_named(tmp_path):
    pytest.importorskip("pyflink")
    assert ROOT not in tmp_path.resolve().parents  # the user's own folder and modules
    (tmp_path / "my_agent.py").write_text(textwrap.dedent(AGENT))
    (tmp_path / "job.py").write_text(textwrap.dedent(JOB))
    proc = subprocess.run(
        [sys.executable, "job.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=280,
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(x[4:]) for x in proc.stdout.splitlines() if x.startswith("ROW ")]
    got = {r["key"]: r["got"] for r in rows if "got" in r}
    assert got == {f"k{n}": f"K{n}" for n in range(8)}, rows
    [error] = [r for r in rows if "error_type" in r]
    assert (error["key"], error["action"], error["error_type"]) == (
        "z",
        "<outside>",
        "UnmatchedEventError",
    )
    assert "no run of key 'z' is in flight" in error["message"]
    assert "the end of input came before its wait opened" in error["message"]
