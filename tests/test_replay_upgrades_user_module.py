"""Issue 28 in a user's own module, run from a temporary directory outside the repository.

Each step is a new interpreter with its own hash seed, as a restarted TaskManager is: the
snapshot taken in one process is restored in another. The module's calls go through a
``functools.partial`` of a bound method whose object holds a ``set``, and through a lambda
that closes over a ``frozenset``: their identity must not depend on object addresses or on
the hash seed, so the same code replays quietly; swapped, the calls fail with a divergence;
and an upgrade through ``ctx.patched`` keeps the recorded run on its old branch.
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
import functools
import os
import time

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


def log(line):
    with open(os.environ["CALLS_LOG"], "a") as f:
        f.write(line + "\\n")


class Shop:
    def __init__(self, region, tags):
        self.region = region
        self.tags = tags  # a set: iterated in another order under another hash seed

    def price(self, item):
        log(f"price {item}")
        return f"{self.region}:{item}"


def slow(tag):
    time.sleep(0.5)
    return tag


def cents(item):
    log(f"cents {item}")
    return f"{item}:100c"


class Buyer(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        order = os.environ.get("ORDER", "apple,pear").split(",")
        shop = Shop("eu", {"fresh", "organic", "local", "cheap"})
        labels = frozenset({"a", "b", "c", "d", "e"})
        got = []
        for item in order:
            got.append(await ctx.durable_execute_async(functools.partial(shop.price, item)))
            got.append(await ctx.durable_execute_async(lambda: f"{item}/{len(labels)}"))
        if os.environ.get("VERSION") == "2" and ctx.patched("cents"):
            got.append(await ctx.durable_execute_async(cents, order[0]))
        await ctx.durable_execute_async(slow, "end")
        ctx.send_event(OutputEvent(output=got))
'''

MAIN = '''
"""Usage: main.py snapshot OUT | restore SNAPSHOT | fresh"""
import json
import logging
import sys

from flink_agents_py import AgentsExecutionEnvironment
from my_agents import Buyer

logging.basicConfig(level=logging.WARNING, format="LOG %(levelname)s %(message)s")
records = [{"key": "k"}]
job = AgentsExecutionEnvironment.local().from_list(records).apply(Buyer())
saved = []


def at_the_slow_call(job):
    if saved:
        return
    snap = job.snapshot()
    for entry in snap["keys"]:
        run = entry["run"] or {}
        for rec in run.get("inflight", {}).values():
            calls = rec.get("calls", {})
            if len(calls) == 5 and not calls["4"]["done"]:
                saved.append(snap)


if sys.argv[1] == "snapshot":
    job.run(on_step=at_the_slow_call)
    assert saved, "the run never reached its slow call"
    with open(sys.argv[2], "w") as f:
        json.dump(saved[0], f)
    print("SAVED")
else:
    if sys.argv[1] == "restore":
        with open(sys.argv[2]) as f:
            job.restore(json.load(f))
    result = job.run()
    print("RESULT", json.dumps({"outputs": result.outputs,
                                "errors": [[e.error_type, e.message] for e in result.errors]}))
'''


def _run(workdir: pathlib.Path, *args: str, seed: str, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    full.update(PYTHONHASHSEED=seed, CALLS_LOG=str(workdir / "calls.log"), **env)
    proc = subprocess.run([PYTHON, "main.py", *args], cwd=workdir, env=full,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{args} exited {proc.returncode}\n{proc.stderr[-4000:]}"
    return proc


def _result(proc: subprocess.CompletedProcess) -> dict:
    [line] = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    return json.loads(line[len("RESULT "):])


def _calls(workdir: pathlib.Path) -> list[str]:
    path = workdir / "calls.log"
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def workdir(tmp_path: pathlib.Path) -> pathlib.Path:
    d = tmp_path / "user_project"
    d.mkdir()
    (d / "my_agents.py").write_text(textwrap.dedent(MY_AGENTS))
    (d / "main.py").write_text(textwrap.dedent(MAIN))
    assert not str(d).startswith(str(ROOT))
    _run(d, "snapshot", str(d / "snap.json"), seed="1")
    assert _calls(d) == ["price apple", "price pear"]
    return d


def test_a_user_module_restored_in_another_process_replays_quietly(workdir):
    proc = _run(workdir, "restore", str(workdir / "snap.json"), seed="2")
    assert _result(proc) == {"outputs": [["eu:apple", "apple/5", "eu:pear", "pear/5"]],
                             "errors": []}
    assert "arguments changed" not in proc.stderr  # the identity is the same in every process
    assert _calls(workdir) == ["price apple", "price pear"]  # replayed, not run again


def test_a_user_module_restored_with_its_calls_swapped_diverges(workdir):
    proc = _run(workdir, "restore", str(workdir / "snap.json"), seed="3", ORDER="pear,apple")
    result = _result(proc)
    assert result["outputs"] == []
    [[error_type, message]] = result["errors"]
    assert error_type == "ReplayDivergenceError" and "r0/go/c0" in message
    assert "recorded for r0/go/c2" in message
    assert _calls(workdir) == ["price apple", "price pear"]


def test_a_user_module_upgraded_with_patched_keeps_the_recorded_run_on_its_old_branch(workdir):
    proc = _run(workdir, "restore", str(workdir / "snap.json"), seed="4", VERSION="2")
    assert _result(proc) == {"outputs": [["eu:apple", "apple/5", "eu:pear", "pear/5"]],
                             "errors": []}
    assert "cents" not in " ".join(_calls(workdir))
    fresh = _run(workdir, "fresh", seed="5", VERSION="2")  # a new run: the new branch
    assert _result(fresh)["outputs"] == [["eu:apple", "apple/5", "eu:pear", "pear/5",
                                          "apple:100c"]]
