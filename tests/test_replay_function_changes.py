"""An upgrade that changes the function a durable call runs, when the callable's own name
cannot say so: a lambda, a nested function, a decorator's wrapper without ``functools.wraps``,
a wrapper object. The name of such a callable is the same before and after the change
(``Agent.go.<locals>.<lambda>``, ``retry.<locals>.wrapper``, ``Retrying``), so only what it
calls tells the two apart. A replay must not hand the outcome ``fetch_weather`` returned to a
call that now runs ``fetch_stock``: it fails with a ``ReplayDivergenceError`` naming the call
and both functions, as it does for a plain ``fetch_weather`` turned ``fetch_stock``. The same
code replays quietly (core-level restores, ``support.harness``; the user-module test at the
end runs a user's module from a temporary directory, one process per step).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import pathlib
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest
from support.harness import KEY, call_of, drive_until, new_core, resume, snapshot_of
from support.probes import count, gate

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState

pytestmark = pytest.mark.timeout(120)

DEPLOYED: dict[str, Any] = {"new": False, "replay": None}


@pytest.fixture(autouse=True)
def _old_code():
    DEPLOYED.update(new=False)


def fetch_weather(city: str) -> str:
    count(f"weather:{city}")
    return f"sunny in {city}"


def fetch_stock(city: str) -> str:
    count(f"stock:{city}")
    return f"ACME up in {city}"


def gated(tag: str) -> str:
    count(f"gated:{tag}")
    assert gate().wait(10), "gate never opened"
    return tag


def retry(fn: Any) -> Any:
    """A decorator that does not use ``functools.wraps``: its wrapper has one name for all."""
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)
    return wrapper


class Retrying:
    """A class-based wrapper: its class is its name, whatever it wraps."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)


def _callable(form: str, new: bool, city: str) -> tuple[Any, tuple[Any, ...]]:
    """The callable of the first call, and its arguments, in the old or the new code."""
    fetch = fetch_stock if new else fetch_weather
    if form == "lambda":
        if new:
            return (lambda: fetch_stock(city)), ()
        return (lambda: fetch_weather(city)), ()
    if form == "nested_function":
        if new:
            def ask() -> str:
                return fetch_stock(city)
        else:
            def ask() -> str:
                return fetch_weather(city)
        return ask, ()
    if form == "closure_cell":
        return (lambda: fetch(city)), ()
    if form == "decorator":
        return retry(fetch), (city,)
    if form == "wrapper_object":
        return Retrying(fetch), (city,)
    if form == "partial_of_wrapper":
        return functools.partial(retry(fetch), city), ()
    raise AssertionError(form)


FORMS = ["lambda", "nested_function", "closure_cell", "decorator", "wrapper_object",
         "partial_of_wrapper"]


class Forecast(Agent):
    """One call through a ``form`` of callable (``DEPLOYED["new"]``: the new code's), then a
    gated call (the snapshot point)."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        fn, args = _callable(event.input["form"], DEPLOYED["new"], "paris")
        got = await ctx.durable_execute_async(fn, *args)
        await ctx.durable_execute_async(gated, "end")
        ctx.send_event(OutputEvent(output=got))


class StrictForecast(Forecast):
    replay = "strict"


def _snapshot(plan: AgentPlan, form: str) -> InMemoryKeyState:
    """The key's state (through its JSON form) once the gated call has started."""
    core = new_core(plan)
    try:
        state = InMemoryKeyState()
        res = core.on_input(KEY, {"key": KEY, "form": form}, state)
        assert res.errors == [] and res.outputs == []
        drive_until(core, state, quiet=True, done=lambda s: (
            (c := call_of(s, "go", 1)) is not None and not c.done))
        return snapshot_of(state, "json")
    finally:
        gate().set()
        core.close()


def _deployed_between(call: Any) -> tuple[list[Any], list[Any]]:
    """Snapshot an agent whose durable call is ``call(False)`` (a function and its
    arguments) once its gated call started; resume it with ``call(True)`` deployed.

    Returns:
        The resumed run's outputs and errors.
    """

    class Upgraded(Agent):
        @action(InputEvent)
        @staticmethod
        async def go(event: InputEvent, ctx: RunnerContext) -> None:
            fn, args = call(DEPLOYED["new"])
            got = await ctx.durable_execute_async(fn, *args)
            await ctx.durable_execute_async(gated, "end")
            ctx.send_event(OutputEvent(output=got))

    plan = AgentPlan.from_agent(Upgraded())
    snap = _snapshot(plan, "unused")
    DEPLOYED["new"] = True
    outputs, errors, _core = resume(plan, snap)
    return outputs, errors


@pytest.mark.parametrize("agent", [Forecast, StrictForecast], ids=["lenient", "strict"])
@pytest.mark.parametrize("form", FORMS)
def test_a_call_whose_callable_now_calls_another_function_diverges_naming_both(
        form, agent, probes):
    plan = AgentPlan.from_agent(agent())
    snap = _snapshot(plan, form)
    DEPLOYED["new"] = True  # redeployed: the callable now calls fetch_stock
    outputs, errors, _core = resume(plan, snap)
    assert outputs == []  # never "sunny in paris" handed to the stock call
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and "r0/go/c0" in err.message
    assert "fetch_weather" in err.message and "fetch_stock" in err.message
    assert probes["stock:paris"] == 0 and probes["weather:paris"] == 1


@pytest.mark.parametrize("form", FORMS)
def test_the_same_callable_replays_quietly(form, probes, caplog):
    plan = AgentPlan.from_agent(Forecast())
    snap = _snapshot(plan, form)
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, _core = resume(plan, snap)
    assert errors == [] and outputs == ["sunny in paris"]
    assert not [r for r in caplog.records if "arguments changed" in r.getMessage()
                or "diverged" in r.getMessage()]
    assert probes["weather:paris"] == 1


def test_a_changed_argument_of_the_same_callee_still_replays_with_a_warning(probes, caplog):
    """Only the functions a callable calls are its identity: another argument stays the
    lenient ``arguments changed`` warning (documented), not a divergence."""

    def city_call(new: bool) -> tuple[Any, tuple[Any, ...]]:
        city = "lyon" if new else "paris"
        return (lambda: fetch_weather(city)), ()

    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors = _deployed_between(city_call)
    assert errors == [] and outputs == ["sunny in paris"]
    assert [r for r in caplog.records if "arguments changed" in r.getMessage()]


def retry_logged(fn: Any) -> Any:
    """``retry`` of the new code: it logs and times each attempt (standard library calls)."""
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            logging.getLogger(__name__).debug("took %s", time.monotonic() - started)
    wrapper.__qualname__ = "retry.<locals>.wrapper"  # the same decorator, redeployed
    return wrapper


def test_a_wrapper_that_starts_logging_around_the_same_function_replays(probes):
    """Only the user's functions count, not the standard library's: a decorator whose
    wrapper now logs and times its call still calls ``fetch_weather``, and replays it."""

    outputs, errors = _deployed_between(
        lambda new: ((retry_logged if new else retry)(fetch_weather), ("paris",)))
    assert errors == [] and outputs == ["sunny in paris"]
    assert probes["weather:paris"] == 1


def timed(fn: Any, clock: Any) -> Any:
    """A decorator whose wrapper holds the clock it times the call with (a closure cell)."""
    def wrapper(*args: Any) -> Any:
        clock()
        return fn(*args)
    return wrapper


def test_a_wrapper_that_holds_another_standard_library_clock_replays(probes):
    """A standard-library function the wrapper holds (``time.monotonic`` made
    ``time.perf_counter``) is not what the call runs: it replays."""

    outputs, errors = _deployed_between(lambda new: (
        timed(fetch_weather, time.perf_counter if new else time.monotonic), ("paris",)))
    assert errors == [] and outputs == ["sunny in paris"]
    assert probes["weather:paris"] == 1


class WeatherDesk:
    """``ask`` calls ``self.fetch``: which one runs depends on the object's class."""

    def ask(self, city: str) -> str:
        return self.fetch(city)

    def fetch(self, city: str) -> str:
        return fetch_weather(city)


class StockDesk(WeatherDesk):
    def fetch(self, city: str) -> str:
        return fetch_stock(city)


def test_an_inherited_method_bound_to_an_object_of_another_class_diverges(probes):
    """``WeatherDesk.ask`` is the target either way; bound to a ``StockDesk`` it runs
    ``fetch_stock``: the recorded weather is not its outcome."""

    outputs, errors = _deployed_between(
        lambda new: ((StockDesk() if new else WeatherDesk()).ask, ("paris",)))
    assert outputs == []
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and "r0/go/c0" in err.message
    assert "WeatherDesk'" in err.message and "StockDesk'" in err.message
    assert probes["stock:paris"] == 0


# -- a user's module, run from a temporary directory, one process per step -----------------
ROOT = pathlib.Path(__file__).resolve().parents[1]

USER_MODULE = '''
import os

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


def log(line):
    with open(os.environ["CALLS_LOG"], "a") as f:
        f.write(line + "\\n")


def fetch_weather(city):
    log(f"weather {city}")
    return f"sunny in {city}"


def fetch_stock(city):
    log(f"stock {city}")
    return f"ACME up in {city}"


def cached(fn):
    def wrapper(*args):
        return fn(*args)
    return wrapper


def slow():
    log("slow")
    return "end"


class Desk(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        tags = {"a", "b", "c", "d"}  # a set: iterated in another order under another seed
        if os.environ.get("VERSION") == "2":
            got = await ctx.durable_execute_async(lambda: fetch_stock("paris"))
            more = await ctx.durable_execute_async(cached(fetch_stock), "nice")
        else:
            got = await ctx.durable_execute_async(lambda: fetch_weather("paris"))
            more = await ctx.durable_execute_async(cached(fetch_weather), "nice")
        await ctx.durable_execute_async(slow)
        ctx.send_event(OutputEvent(output=[got, more, len(tags)]))
'''

MAIN = '''
"""Usage: main.py snapshot OUT | restore SNAPSHOT"""
import json
import sys

from flink_agents_py import AgentsExecutionEnvironment
from desk import Desk

job = AgentsExecutionEnvironment.local().from_list([{"key": "k"}]).apply(Desk())
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
def test_a_user_module_upgraded_to_call_another_function_through_a_lambda(version, tmp_path):
    """Restored in another process under another hash seed: the same code replays its
    recorded outcomes quietly; the code that now calls ``fetch_stock`` through the same
    lambda and wrapper diverges at the first such call, and neither runs ``fetch_stock``."""
    workdir = tmp_path / "user_project"
    workdir.mkdir()
    (workdir / "desk.py").write_text(textwrap.dedent(USER_MODULE))
    (workdir / "main.py").write_text(textwrap.dedent(MAIN))
    assert not str(workdir).startswith(str(ROOT))
    _step(workdir, "snapshot", str(workdir / "snap.json"), seed="1", VERSION="1")
    result = _step(workdir, "restore", str(workdir / "snap.json"), seed="7", VERSION=version)
    calls = (workdir / "calls.log").read_text().splitlines()
    assert calls[:2] == ["weather paris", "weather nice"]
    assert not [c for c in calls if c.startswith("stock")]
    if version == "1":
        assert result == {"outputs": [["sunny in paris", "sunny in nice", 4]], "errors": []}
        return
    assert result["outputs"] == []
    [[error_type, message]] = result["errors"]
    assert error_type == "ReplayDivergenceError" and "r0/go/c0" in message
    assert "desk:fetch_weather" in message and "desk:fetch_stock" in message
