"""An upgrade that changes what the code of a lambda (a nested function, the methods of a
class made in a function) does with the names and values it binds, not which ones: ``lambda:
convert(src, dst)`` and ``lambda: convert(dst, src)`` of one action have one name, bind the
same values and name the same functions. Before, their digests were equal: made in the
other order after a restore, each was silently handed the other's recorded outcome, and one
rewritten so replayed the old code's outcome without a word. Now the record keeps a digest
of the code's steps (in the call's argument shape): the other order diverges naming the call
whose outcome it would get, a rewritten one is the lenient ``arguments changed`` warning (a
finding for ``check_upgrade_safety``), or in strict mode a divergence; the same code replays
quietly, in another process under another hash seed too.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import os
import pathlib
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from support.harness import KEY, call_of, drive_until, new_core, resume, snapshot_of
from support.probes import count, gate

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState, SqliteJournal
from flink_agents_py.runtime.recorder._outcomes import code_of
from flink_agents_py.testing import check_upgrade_safety

pytestmark = pytest.mark.timeout(120)

DEPLOYED: dict[str, Any] = {"version": 1}


@pytest.fixture(autouse=True)
def _old_code():
    DEPLOYED.update(version=1)


def convert(src: str, dst: str) -> str:
    count(f"convert:{src}->{dst}")
    return f"{src}->{dst}"


def price(n: int) -> int:
    count(f"price:{n}")
    return n * 10


def gated(tag: str) -> str:
    count(f"gated:{tag}")
    assert gate().wait(10), "gate never opened"
    return tag


def _versions(form: str, src: str, dst: str) -> tuple[Any, Any, Any]:
    """Three callables of one name, binding the same values and naming the same functions,
    whose code differs only in what it does with them."""
    if form == "lambda":
        return ((lambda: convert(src, dst)), (lambda: convert(dst, src)),
                (lambda: convert(dst, src) or convert(src, dst)))
    if form == "operator":
        a, b = len(src), len(dst) - 1
        return (lambda: price(a + b)), (lambda: price(a - b)), (lambda: price(a * b))
    if form == "nested_function":
        def forward() -> str:
            return convert(src, dst)
        found = [forward]

        def forward() -> str:  # noqa: F811 - the same qualified name, as redeployed code
            return convert(dst, src)
        found.append(forward)

        def forward() -> str:  # noqa: F811
            return convert(dst, src) or convert(src, dst)
        return found[0], found[1], forward
    if form in ("callable_object", "bound_method"):  # a class made in a function
        class Convert:
            def __call__(self) -> str:
                return convert(src, dst)

            def ask(self) -> str:
                return self()
        made = [Convert()]

        class Convert:  # type: ignore[no-redef]  # noqa: F811
            def __call__(self) -> str:
                return convert(dst, src)

            def ask(self) -> str:
                return self()
        made.append(Convert())

        class Convert:  # type: ignore[no-redef]  # noqa: F811
            def __call__(self) -> str:
                return convert(dst, src) or convert(src, dst)

            def ask(self) -> str:
                return self()
        made.append(Convert())
        if form == "bound_method":  # the same code; what it runs through self is not
            return made[0].ask, made[1].ask, made[2].ask
        return made[0], made[1], made[2]
    raise AssertionError(form)


FORMS = ["lambda", "operator", "nested_function", "callable_object", "bound_method"]


class Exchange(Agent):
    """Two calls through ``_versions``' callables (version 2 makes them in the other order;
    version 3 makes its first call otherwise), then a gated call (the snapshot point)."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        first, second, third = _versions(event.input["form"], "USD", "EUR")
        order = {1: (first, second), 2: (second, first), 3: (third, second)}
        got = [await ctx.durable_execute_async(fn) for fn in order[DEPLOYED["version"]]]
        await ctx.durable_execute_async(gated, "end")
        ctx.send_event(OutputEvent(output=got))


class StrictExchange(Exchange):
    replay = "strict"


def _snapshot(plan: AgentPlan, form: str, calls: int) -> InMemoryKeyState:
    """The key's state (through its JSON form) once call ``calls`` has started."""
    core = new_core(plan)
    try:
        state = InMemoryKeyState()
        res = core.on_input(KEY, {"key": KEY, "form": form}, state)
        assert res.errors == [] and res.outputs == []
        drive_until(core, state, quiet=True, done=lambda s: (
            (c := call_of(s, "go", calls)) is not None and not c.done))
        return snapshot_of(state, "json")
    finally:
        gate().set()
        core.close()


def _changed_code_lines(caplog: Any) -> list[str]:
    return [r.getMessage() for r in caplog.records if "its code changed" in r.getMessage()]


@pytest.mark.parametrize("form", FORMS)
def test_the_same_code_replays_quietly(form, probes, caplog):
    plan = AgentPlan.from_agent(Exchange())
    snap = _snapshot(plan, form, 2)
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, core = resume(plan, snap)
    assert errors == [] and len(outputs) == 1
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert core.counters["replay_arguments_changed"] == 0


@pytest.mark.parametrize("form", FORMS)
def test_the_calls_made_in_the_other_order_diverge_rather_than_swap_outcomes(form, probes):
    plan = AgentPlan.from_agent(Exchange())
    snap = _snapshot(plan, form, 2)
    before = dict(probes.counts())
    DEPLOYED["version"] = 2
    outputs, errors, _core = resume(plan, snap)
    assert outputs == []  # never ["USD->EUR", "EUR->USD"] handed over swapped
    [err] = errors
    assert err.error_type == "ReplayDivergenceError"
    assert "r0/go/c0" in err.message and "those recorded for r0/go/c1" in err.message
    assert dict(probes.counts()) == before  # neither call ran again


@pytest.mark.parametrize("form", FORMS)
def test_a_rewritten_call_is_flagged_lenient_and_diverges_strict(form, probes, caplog):
    """The new code's first call does something else with the same names and values: it is
    not the recorded call, and it does not replay silently."""
    plan = AgentPlan.from_agent(Exchange())
    snap = _snapshot(plan, form, 1)
    DEPLOYED["version"] = 3
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, core = resume(plan, snap)
    assert errors == [] and len(outputs) == 1
    [line] = _changed_code_lines(caplog)
    assert "r0/go/c0" in line and "replays the outcome recorded for the old code" in line
    assert core.counters["replay_arguments_changed"] == 1

    strict = AgentPlan.from_agent(StrictExchange())
    DEPLOYED["version"] = 1
    snap = _snapshot(strict, form, 1)
    DEPLOYED["version"] = 3
    outputs, errors, _core = resume(strict, snap)
    assert outputs == []
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and "strict replay" in err.message
    assert "r0/go/c0" in err.message and "its code changed" in err.message


@pytest.mark.parametrize("stored", ["without_code", "another_python"])
def test_a_record_without_code_or_of_another_python_replays_as_before(stored, probes, caplog):
    """A record written before the code was kept (two parts in its shape), or by another
    Python version (bytecode differs), is not compared: it replays by identity as before."""
    plan = AgentPlan.from_agent(Exchange())
    snap = _snapshot(plan, "lambda", 1)
    rec = call_of(snap, "go", 0)
    binding, values, code, *_ = rec.shape.split("/")  # (later parts: newer than both)
    head = f"{binding}/{values}"
    assert code.startswith(f"py{sys.version_info[0]}.")
    rec.shape = head if stored == "without_code" else f"{head}/py2.7:{code.partition(':')[2]}"
    DEPLOYED["version"] = 3
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, _core = resume(plan, snap)
    assert errors == [] and outputs == [["USD->EUR", "EUR->USD"]]
    assert not _changed_code_lines(caplog)


@functools.singledispatch
def priced(item: object) -> str:
    return f"priced {item}"


def test_a_library_wrapper_s_own_code_does_not_count():
    """What a library's wrapper (here the standard library's ``singledispatch``) does is the
    library's: it changes with its releases, not with the user's code, so it is left out;
    the user's code it holds counts."""
    assert code_of(priced) is None and code_of(convert) is None
    src = "USD"
    assert code_of(lambda: priced(src)) != code_of(lambda: priced(src) or src)


def test_check_upgrade_safety_reports_the_swap_and_the_rewrite():
    gate().set()
    inputs = [{"key": "k", "form": "lambda"}]
    report = check_upgrade_safety(Exchange(), _Swapped(), inputs, other_process=False)
    assert not report.ok
    assert any("those recorded for r0/go/c1" in f.message for f in report.distinct)
    report = check_upgrade_safety(Exchange(), _Rewritten(), inputs, other_process=False)
    assert not report.ok
    assert any("recorded outcomes handed to calls with other arguments: c0" in f.message
               for f in report.distinct)
    check_upgrade_safety(Exchange(), Exchange(), inputs, other_process=False).assert_ok()


def test_through_a_journal_the_first_swapped_call_diverges_before_any_outcome_is_handed(
        tmp_path):
    """Outcomes the crashed attempt journaled after the checkpoint: the first call, made
    with the code of the second, diverges there (the journal's later records of the same
    attempt are read to tell a reorder), rather than getting the first call's outcome with a
    warning and diverging only at the second."""
    gate().set()
    n = itertools.count()
    report = check_upgrade_safety(
        Exchange(), _Swapped(), [{"key": "k", "form": "lambda"}], other_process=False,
        journal_factory=lambda: SqliteJournal(str(tmp_path / f"j{next(n)}.db")))
    divergences = [m for p in report.points for m in p.divergences]
    assert divergences and all("durable call r0/go/c0" in m for m in divergences)
    assert not [m for p in report.points for m in p.problems]


class _Swapped(Agent):
    """``Exchange`` of version 2, as a class of its own (``check_upgrade_safety`` runs both)."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        first, second, _third = _versions(event.input["form"], "USD", "EUR")
        got = [await ctx.durable_execute_async(second), await ctx.durable_execute_async(first)]
        await ctx.durable_execute_async(gated, "end")
        ctx.send_event(OutputEvent(output=got))


class _Rewritten(Agent):
    """``Exchange`` of version 3."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        _first, second, third = _versions(event.input["form"], "USD", "EUR")
        got = [await ctx.durable_execute_async(third), await ctx.durable_execute_async(second)]
        await ctx.durable_execute_async(gated, "end")
        ctx.send_event(OutputEvent(output=got))


# -- a user's module, run from a temporary directory, one process per step -----------------
ROOT = pathlib.Path(__file__).resolve().parents[1]

USER_MODULE = '''
import os

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


def log(line):
    with open(os.environ["CALLS_LOG"], "a") as f:
        f.write(line + "\\n")


def convert(src, dst):
    log(f"convert {src} {dst}")
    return f"{src}->{dst}"


def slow():
    log("slow")
    return "end"


class Exchange(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        src, dst = "USD", "EUR"
        # a set literal: a frozenset constant, iterated in another order under another seed
        there = lambda: convert(src, dst) if src in {"USD", "EUR", "JPY", "CHF"} else None
        back = lambda: convert(dst, src) if src in {"USD", "EUR", "JPY", "CHF"} else None
        order = (back, there) if os.environ.get("VERSION") == "2" else (there, back)
        got = [await ctx.durable_execute_async(fn) for fn in order]
        await ctx.durable_execute_async(slow)
        ctx.send_event(OutputEvent(output=got))
'''

MAIN = '''
"""Usage: main.py snapshot OUT | restore SNAPSHOT"""
import functools
import itertools
import json
import sys

from flink_agents_py import AgentsExecutionEnvironment
from exchange import Exchange

job = AgentsExecutionEnvironment.local().from_list([{"key": "k"}]).apply(Exchange())
saved = []


def at_the_slow_call(job):
    snap = job.snapshot()
    for entry in snap["keys"]:
        for rec in ((entry["run"] or {}).get("inflight") or {}).values():
            calls = rec.get("calls", {})
            if not saved and len(calls) == 3 and not calls["2"]["done"]:
                saved.append(snap)


if sys.argv[1] == "snapshot":
    job.run(on_step=at_the_slow_call)
    assert saved, "the run never reached its slow call"
    with open(sys.argv[2], "w") as f:
        json.dump(saved[0], f)
else:
    with open(sys.argv[2]) as f:
        job.restore(json.load(f))
    result = job.run()
    print("RESULT", json.dumps({"outputs": result.outputs,
                                "errors": [[e.error_type, e.message] for e in result.errors]}))
'''


def _step(workdir: pathlib.Path, *args: str, seed: str, **env: str) -> dict[str, Any]:
    full = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    full.update(PYTHONHASHSEED=seed, CALLS_LOG=str(workdir / "calls.log"),
                PYTHONPATH=str(ROOT), **env)
    proc = subprocess.run([sys.executable, "main.py", *args], cwd=workdir, env=full,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{args} exited {proc.returncode}\n{proc.stderr[-4000:]}"
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    return json.loads(lines[0][len("RESULT "):]) if lines else {}


@pytest.mark.parametrize("version", ["1", "2"])
def test_a_user_module_restored_in_another_process(version, tmp_path):
    """Under another hash seed the same code replays both outcomes quietly; the code that
    makes the two lambdas in the other order diverges, and neither runs again."""
    workdir = tmp_path / "user_project"
    workdir.mkdir()
    (workdir / "exchange.py").write_text(textwrap.dedent(USER_MODULE))
    (workdir / "main.py").write_text(textwrap.dedent(MAIN))
    assert not str(workdir).startswith(str(ROOT))
    _step(workdir, "snapshot", str(workdir / "snap.json"), seed="1", VERSION="1")
    result = _step(workdir, "restore", str(workdir / "snap.json"), seed="7", VERSION=version)
    calls = (workdir / "calls.log").read_text().splitlines()
    assert calls[:2] == ["convert USD EUR", "convert EUR USD"]
    assert calls.count("convert USD EUR") == calls.count("convert EUR USD") == 1
    if version == "1":
        assert result == {"outputs": [["USD->EUR", "EUR->USD"]], "errors": []}
        return
    assert result["outputs"] == []
    [[error_type, message]] = result["errors"]
    assert error_type == "ReplayDivergenceError" and "r0/go/c0" in message
    assert "those recorded for r0/go/c1" in message
