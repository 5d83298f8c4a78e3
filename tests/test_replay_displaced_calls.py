"""A replay that handed a call another call's record fails when that other call shows up.

A replayed call whose arguments match no record is handed the record at its position with
an ``arguments changed`` warning (they may have changed harmlessly). When a later call of
the same execution then has the arguments recorded there, the earlier call got its outcome:
a call was added before it, or the calls come in another order. Before, the later call was
handed the next record in turn when only the state its bound method binds differed (taken
for the lagging state of a client), so every call after the added one got its neighbour's
outcome, with nothing but warnings. Run as a user does: their own module in a temporary
directory, snapshot in one process, restore with the new code in another.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(180)

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else pathlib.Path(sys.executable))

MY_AGENTS = '''
import os
import time

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


class Stall:
    def __init__(self, fruit):
        self.fruit = fruit

    def price(self):
        if self.fruit == "plum":
            time.sleep(0.5)  # in flight when the snapshot is taken
        return f"price of {self.fruit}"


def tally(line):
    return line


class Quotes(Agent):
    @action(InputEvent)
    @staticmethod
    async def quote(event: InputEvent, ctx: RunnerContext) -> None:
        got = {}
        for fruit in os.environ["FRUITS"].split(","):
            got[fruit] = await ctx.durable_execute_async(Stall(fruit).price)
        if os.environ.get("LOG_AGAIN"):  # a harmless change: the old line again, later
            await ctx.durable_execute_async(tally, "old line")
        ctx.send_event(OutputEvent(output=got))
'''

MAIN = '''
import json
import sys

from flink_agents_py import AgentsExecutionEnvironment
from my_agents import Quotes

job = AgentsExecutionEnvironment.local().from_list([{"key": "k"}]).apply(Quotes())
saved = []


def at_the_plum(job):
    for entry in job.snapshot()["keys"]:
        for rec in ((entry["run"] or {}).get("inflight") or {}).values():
            calls = rec.get("calls", {})
            if not saved and len(calls) == 3 and not calls["2"]["done"]:
                saved.append(job.snapshot())


if sys.argv[1] == "snapshot":
    job.run(on_step=at_the_plum)
    assert saved, "the run never reached the plum"
    with open(sys.argv[2], "w") as f:
        json.dump(saved[0], f)
else:
    with open(sys.argv[2]) as f:
        job.restore(json.load(f))
    result = job.run()
    print("RESULT", json.dumps({"outputs": result.outputs,
                                "errors": [[e.error_type, e.message] for e in result.errors]}))
'''


def _run(workdir: pathlib.Path, *args: str, seed: str, **env: str) -> dict:
    full = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    full.update(PYTHONHASHSEED=seed, PYTHONPATH=str(ROOT), **env)
    proc = subprocess.run([PYTHON, "main.py", *args], cwd=workdir, env=full,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{args} exited {proc.returncode}\n{proc.stderr[-4000:]}"
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    return json.loads(lines[0][len("RESULT "):]) if lines else {}


@pytest.fixture
def workdir(tmp_path: pathlib.Path) -> pathlib.Path:
    d = tmp_path / "user_project"
    d.mkdir()
    (d / "my_agents.py").write_text(textwrap.dedent(MY_AGENTS))
    (d / "main.py").write_text(textwrap.dedent(MAIN))
    assert not str(d).startswith(str(ROOT))
    _run(d, "snapshot", str(d / "snap.json"), seed="1", FRUITS="apple,pear,plum")
    return d


def test_a_call_added_before_recorded_calls_of_a_bound_method_diverges(workdir):
    # the new code quotes a fig first: the fig was handed the apple's record, then the
    # apple the pear's (its object's state "lagging"), and the job emitted both as theirs
    result = _run(workdir, "restore", str(workdir / "snap.json"), seed="2",
                  FRUITS="fig,apple,pear,plum")
    assert result["outputs"] == []
    [[error_type, message]] = result["errors"]
    assert error_type == "ReplayDivergenceError", message
    assert "r0/quote/c1: its arguments are those recorded for r0/quote/c0, whose recorded " \
           "outcome the replay already handed to r0/quote/c0 made with other arguments" \
           in message


def test_the_same_code_restored_replays_every_call_its_own_outcome(workdir):
    result = _run(workdir, "restore", str(workdir / "snap.json"), seed="3",
                  FRUITS="apple,pear,plum")
    assert result == {"outputs": [{"apple": "price of apple", "pear": "price of pear",
                                   "plum": "price of plum"}], "errors": []}


def test_a_changed_argument_with_no_later_call_of_the_recorded_one_still_replays(workdir):
    # the first call's arguments changed harmlessly (a replay goes by identity): it keeps
    # its record with a warning; the later calls, replayed or new, are not the recorded one
    result = _run(workdir, "restore", str(workdir / "snap.json"), seed="4",
                  FRUITS="apples,pear,plum", LOG_AGAIN="1")
    assert result == {"outputs": [{"apples": "price of apple", "pear": "price of pear",
                                   "plum": "price of plum"}], "errors": []}
