"""A user's job in thread mode gets every record to its action as it sent it (``_fast_input``).

Since 2026-12-06 the agent operator's keyed input is converted without PyFlink's ``Row`` in a
thread-mode TaskManager (issue 31, part 4). Run from a directory outside the repository, the
way a user runs their own module, on a MiniCluster in thread mode: records of several shapes,
keyed by a key selector and by a stream the program keyed itself, reach the action equal to
what the source sent, under their own key, in their order per key.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = [pytest.mark.flink, pytest.mark.timeout(300)]

RECORDS = [
    {"id": "a", "v": [1, 2.5, None, {"x": "é"}]},
    {"id": "b", "v": "text"},
    {"id": "a", "v": {"nested": [True, False]}},
    {"id": "c", "v": -7},
]

JOB = """
    import json
    import sys

    from pyflink.datastream import KeySelector
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
    from flink_agents_py.flink import create_stream_environment


    class Echo(Agent):
        @action(InputEvent)
        @staticmethod
        def go(event: InputEvent, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output={"key": ctx.key, "input": event.input}))


    class ById(KeySelector):
        def get_key(self, value):
            return value["id"]


    records = json.loads(sys.argv[2])
    env = create_stream_environment(execution_mode="thread", parallelism=1)
    agents = AgentsExecutionEnvironment.flink(env)
    if sys.argv[1] == "selector":
        ds = env.from_collection(records)
        built = agents.from_datastream(ds, key_selector=lambda r: r["id"]).apply(Echo())
    else:
        built = agents.from_datastream(env.from_collection(records).key_by(ById())).apply(Echo())
    with built.to_datastream().execute_and_collect("fast-input") as outputs:
        for o in outputs:
            print("RESULT " + json.dumps(o, sort_keys=True), flush=True)
"""


@pytest.mark.parametrize("keyed_by", ["selector", "keyed stream"])
def test_records_reach_the_action_as_sent_in_thread_mode(tmp_path: Path, keyed_by: str) -> None:
    (tmp_path / "job.py").write_text(textwrap.dedent(JOB))
    proc = subprocess.run(
        [str(PYTHON), "job.py", keyed_by, json.dumps(RECORDS)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=280,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = [
        json.loads(line.split("RESULT ", 1)[1])
        for line in proc.stdout.splitlines()
        if line.startswith("RESULT ")
    ]
    want = [{"key": r["id"], "input": r} for r in RECORDS]
    key = json.dumps  # (order of the outputs between keys is Flink's)
    assert sorted(got, key=key) == sorted(want, key=key)
    assert [o["input"] for o in got if o["key"] == "a"] == [RECORDS[0], RECORDS[2]]
