"""An upgrade restored with a journal: calls the crashed attempt journaled after the checkpoint.

A user's module in a temporary directory outside the repository runs on the local runner with
a ``SqliteJournal``; the checkpoint is taken while the action's first call is in flight, the
calls after it reach only the journal, and the process dies (``os._exit``). The new code is
then restored from the checkpoint in another process, with the same journal. A journal
record the crashed attempt of the same run made must count as a keyed-state one would: a
change of the code diverges, naming the call, instead of the call running a second time
(before, a record whose arguments differed was ignored, silently: a card charged twice).
So must one made before the job was resubmitted from its checkpoint (another lineage).
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

AGENT = '''
import os

from flink_agents_py.api import Agent, Event, InputEvent, OutputEvent, RunnerContext, action

V2 = {v2!r}


def log(line):
    with open(os.environ["CALLS_LOG"], "a") as f:
        f.write(line + "\\n")


def lookup(order):
    log(f"lookup {{order}}")
    return order


def reserve(order):
    log(f"reserve {{order}}")
    return "reserved"


def charge(order):
    log(f"charge {{order}}")
    return f"charged {{order}}"


def price(item):
    log(f"price {{item}}")
    return f"PRICE({{item}})"


class Item(Event):
    EVENT_TYPE = "Item"
    item: str


class Shop(Agent):
    @action(InputEvent)
    @staticmethod
    async def pay(event: InputEvent, ctx: RunnerContext) -> None:
        order = await ctx.durable_execute_async(lookup, event.input["order"])
        got = []
        if V2 == "insert":
            got.append(await ctx.durable_execute_async(reserve, order))
        got.append(await ctx.durable_execute_async(charge, order))
        items = ["apple", "pear"]
        if V2 == "swap":
            items.reverse()
        for item in items:
            got.append(await ctx.durable_execute_async(price, item))
        if V2 == "events":
            items.reverse()
        for item in items:
            ctx.send_event(Item(item=item))
        ctx.send_event(OutputEvent(output=got))

    @action(Item)
    @staticmethod
    async def quote(event: Item, ctx: RunnerContext) -> None:
        quoted = await ctx.durable_execute_async(price, "quote " + event.item)
        ctx.send_event(OutputEvent(output=quoted))
'''

MAIN = '''
"""Usage: main.py crash | restore"""
import json
import logging
import os
import sys

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.runtime import HostOptions, SqliteJournal

import agent

logging.basicConfig(level=logging.WARNING, format="LOG %(levelname)s %(message)s")
journal = SqliteJournal("journal.db")
lineage = os.environ.get("LINEAGE")


def in_flight(job):
    for entry in job.snapshot()["keys"]:
        for rec in (entry["run"] or {}).get("inflight", {}).values():
            yield from rec.get("calls", {}).values()


if sys.argv[1] == "crash":
    saved = []

    def checkpoint(job):  # while the first call is in flight
        calls = list(in_flight(job))
        if not saved and len(calls) == 1 and not calls[0]["done"]:
            saved.append(job.snapshot())
            with open("snap.json", "w") as f:
                json.dump(saved[0], f)

    recorded = set()

    def die(point, key, info):  # once every call DIE_AT names (comma-separated) is recorded
        if point == "call_recorded" and saved:
            recorded.add(info["call_id"])
            if recorded.issuperset(os.environ["DIE_AT"].split(",")):
                os._exit(3)

    options = HostOptions(journal=journal, failpoint=die, lineage=lineage)
    job = AgentsExecutionEnvironment.local(options=options).from_list(
        [{"key": "k", "order": "o1"}]).apply(agent.Shop())
    job.run(on_step=checkpoint)
    raise SystemExit("never died")
options = HostOptions(journal=journal, lineage=lineage)
job = AgentsExecutionEnvironment.local(options=options).from_list(
    [{"key": "k", "order": "o1"}]).apply(agent.Shop())
if sys.argv[1] == "restore":
    with open("snap.json") as f:
        job.restore(json.load(f))
result = job.run()
print("RESULT", json.dumps({"outputs": result.outputs,
                            "errors": [[e.error_type, e.message] for e in result.errors]}))
'''


def _run(d: pathlib.Path, phase: str, seed: str, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    full.update(PYTHONPATH=str(ROOT), PYTHONHASHSEED=seed, CALLS_LOG=str(d / "calls.log"),
                **env)
    return subprocess.run([PYTHON, "main.py", phase], cwd=d, env=full, capture_output=True,
                          text=True, timeout=120)


def _deploy(d: pathlib.Path, v2: str | None) -> None:
    (d / "agent.py").write_text(textwrap.dedent(AGENT.format(v2=v2)))
    for cached in d.glob("__pycache__/agent*"):
        cached.unlink()


def _upgrade(tmp_path: pathlib.Path, v2: str | None, die_at: str, *, lineage: str = "job-1",
             phase: str = "restore") -> tuple[dict, list[str], str]:
    """Crash the old code once ``die_at`` is journaled, then restore (or start) the new code.

    Returns:
        The new run's outputs and errors, the calls made in both processes, and its log.
    """
    d = tmp_path / "user_project"
    d.mkdir()
    assert not str(d).startswith(str(ROOT))
    (d / "main.py").write_text(textwrap.dedent(MAIN))
    _deploy(d, None)
    crashed = _run(d, "crash", "1", DIE_AT=die_at, LINEAGE="job-1")
    assert crashed.returncode == 3, crashed.stderr[-4000:]
    _deploy(d, v2)
    proc = _run(d, phase, "2", LINEAGE=lineage)
    assert proc.returncode == 0, proc.stderr[-4000:]
    [line] = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    return json.loads(line[len("RESULT "):]), (d / "calls.log").read_text().splitlines(), \
        proc.stderr


def test_the_same_code_replays_what_the_journal_holds_and_runs_nothing_twice(tmp_path):
    result, calls, log = _upgrade(tmp_path, None, "r0/pay/c2")
    assert result["errors"] == []
    assert sorted(map(str, result["outputs"])) == sorted(map(str, [
        ["charged o1", "PRICE(apple)", "PRICE(pear)"], "PRICE(quote apple)",
        "PRICE(quote pear)"]))
    assert calls.count("charge o1") == 1 and calls.count("price apple") == 1
    assert "LOG WARNING" not in log


def test_a_call_inserted_before_a_journaled_one_diverges_and_it_does_not_run_twice(tmp_path):
    result, calls, _log = _upgrade(tmp_path, "insert", "r0/pay/c1")
    assert result["outputs"] == []
    [[error_type, message]] = result["errors"]
    assert error_type == "ReplayDivergenceError"
    assert "r0/pay/c1" in message and "recorded function 'agent:charge'" in message
    assert "now calling function 'agent:reserve'" in message
    assert calls == ["lookup o1", "charge o1"]  # not charged a second time, nothing reserved


def test_journaled_calls_made_in_another_order_diverge_instead_of_running_again(tmp_path):
    result, calls, _log = _upgrade(tmp_path, "swap", "r0/pay/c3")
    assert result["outputs"] == []
    [[error_type, message]] = result["errors"]
    assert error_type == "ReplayDivergenceError"
    assert "r0/pay/c2" in message and "are those recorded for r0/pay/c3" in message
    assert calls.count("price pear") == 1 and calls.count("price apple") == 1


def test_events_sent_in_another_order_diverge_instead_of_running_their_calls_again(tmp_path):
    # both quotes journaled (they run at once: either may be recorded first)
    result, calls, _log = _upgrade(tmp_path, "events", "r0/pay/e0/quote/c0,r0/pay/e1/quote/c0")
    assert result["outputs"] == [["charged o1", "PRICE(apple)", "PRICE(pear)"]]
    errors = sorted(result["errors"])
    assert [e for e, _ in errors] == ["ReplayDivergenceError"] * 2
    for (_, message), execution in zip(errors, ["r0/pay/e0/quote", "r0/pay/e1/quote"], strict=True):
        assert f"{execution}/c0" in message
        assert f"when execution {execution} was triggered by another event" in message
    assert calls.count("price quote apple") == 1 and calls.count("price quote pear") == 1


def test_a_job_resubmitted_from_its_checkpoint_with_new_code_diverges_too(tmp_path):
    """New code deployed after the crash: the job is submitted again (a new lineage) and
    restored from the checkpoint; the journal's records of the crashed attempt still count:
    the inserted call diverges and the finished charge does not run a second time."""
    result, calls, _log = _upgrade(tmp_path, "insert", "r0/pay/c1", lineage="job-2")
    assert result["outputs"] == []
    [[error_type, message]] = result["errors"]
    assert error_type == "ReplayDivergenceError" and "r0/pay/c1" in message
    assert calls.count("charge o1") == 1
