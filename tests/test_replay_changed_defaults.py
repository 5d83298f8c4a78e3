"""A durable function whose parameter default changed between the snapshot and the restore.

``price("apple")`` of ``def price(item, currency="USD")``, redeployed with
``currency="EUR"`` as the default, asks for another price, yet passes the arguments
recorded (its call digest leaves defaults out). Before: the replay handed over the recorded
USD price without a word, while a fault-free run of the new code got EUR. Now the record
keeps the defaults the call took, and a changed one is a changed call: the ``arguments
changed`` warning naming the parameter (a finding of ``check_upgrade_safety``), a
``ReplayDivergenceError`` in strict mode. A default left as it was, and a mutable default
the function fills as it runs (a cache), replay quietly (a parameter added or removed with
its default: ``test_replay_changed_parameters.py``).
The same from a user's own module in a temporary directory, a process per step.
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
from collections.abc import Iterator
from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.testing import CallCounter

pytestmark = pytest.mark.timeout(180)

CALLS = CallCounter()


def price(item: str, currency: str = "USD") -> str:
    CALLS.count(item)
    return f"{item}:{currency}"


def quote(item: str, *, currency: str = "USD", cache: dict[str, int] | None = None) -> str:
    CALLS.count(item)
    return f"{item}:{currency}"


def cached(item: str, seen: dict[str, int] = {}) -> str:  # noqa: B006 - the case tested
    seen[item] = seen.get(item, 0) + 1
    CALLS.count(item)
    return f"{item}:{len(seen)}"


def _passthrough(fn: Any) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return wrapper


@_passthrough
def wrapped(item: str, currency: str = "USD") -> str:
    CALLS.count(item)
    return f"{item}:{currency}"


class Shop:
    def __init__(self, region: str) -> None:
        self.region = region

    def price(self, item: str, currency: str = "USD") -> str:
        CALLS.count(item)
        return f"{self.region}:{item}:{currency}"

    def __call__(self, item: str, currency: str = "USD") -> str:
        CALLS.count(item)
        return f"{self.region}()/{item}:{currency}"


def total(item: str, currency: str = "USD", qty: int = 1) -> str:
    CALLS.count(item)
    return f"{qty}x{item}:{currency}"


FUNCTIONS: dict[str, Any] = {
    "price": price,
    "quote": quote,
    "cached": cached,
    "wrapped": wrapped,
    "method": Shop("eu").price,
    "object": Shop("us"),
    "partial": functools.partial(total, qty=2),
}
OWNERS = {
    "wrapped": wrapped.__wrapped__,
    "method": Shop.price,
    "object": Shop.__call__,
    "partial": total,
}


class Prices(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        fn = FUNCTIONS[event.input["fn"]]
        got = [await ctx.durable_execute_async(fn, item) for item in ("apple", "pear")]
        ctx.send_event(OutputEvent(output=got))


class StrictPrices(Prices):
    replay = "strict"


PASSED: dict[str, Any] = {}
"""What ``Passes`` passes to ``price`` besides the item (the code before or after a deploy)."""


class Passes(Agent):
    replay = "strict"

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        got = [await ctx.durable_execute_async(price, item, **PASSED) for item in ("apple", "pear")]
        ctx.send_event(OutputEvent(output=got))


@pytest.fixture(autouse=True)
def _defaults() -> Iterator[None]:
    owners = {**{n: f for n, f in FUNCTIONS.items() if n not in OWNERS}, **OWNERS}
    saved = {name: (f.__defaults__, f.__kwdefaults__) for name, f in owners.items()}
    global CALLS
    CALLS = CallCounter()
    PASSED.clear()
    yield
    PASSED.clear()
    for name, (defaults, kwdefaults) in saved.items():
        owners[name].__defaults__, owners[name].__kwdefaults__ = defaults, kwdefaults


def _after_first_call(agent: Agent, fn: str) -> dict[str, Any]:
    """The state once the first call is recorded and the second is in flight."""
    job = AgentsExecutionEnvironment.local().from_list([{"key": "k", "fn": fn}]).apply(agent)
    snaps: list[dict[str, Any]] = []

    def at(j: Any) -> None:
        for entry in j.snapshot()["keys"]:
            for rec in ((entry["run"] or {}).get("inflight") or {}).values():
                calls = rec.get("calls", {})
                if not snaps and calls.get("0", {}).get("done") and "1" in calls:
                    snaps.append(j.snapshot())

    job.run(on_step=at)
    assert snaps, "no point had the first call recorded and the second in flight"
    return json.loads(json.dumps(snaps[0]))


def _restore(agent: Agent, fn: str, snap: dict[str, Any], caplog: Any) -> Any:
    caplog.clear()
    job = AgentsExecutionEnvironment.local().from_list([{"key": "k", "fn": fn}]).apply(agent)
    with caplog.at_level(logging.WARNING, logger="flink_agents_py"):
        return job.restore(snap).run()


def test_a_changed_default_is_a_changed_call_and_not_handed_over_silently(caplog):
    snap = _after_first_call(Prices(), "price")
    price.__defaults__ = ("EUR",)
    result = _restore(Prices(), "price", snap, caplog)
    warned = [r.getMessage() for r in caplog.records if "default value" in r.getMessage()]
    assert warned and "r0/go/c0" in warned[0] and "'currency'" in warned[0], caplog.text
    assert result.errors == [] and result.outputs == [["apple:USD", "pear:EUR"]]
    assert CALLS["apple"] == 1  # replayed (the warning says what), not run again


@pytest.mark.parametrize("fn", ["wrapped", "method", "object", "partial"])
def test_a_changed_default_behind_a_wrapper_method_object_or_partial_diverges(fn, caplog):
    snap = _after_first_call(StrictPrices(), fn)
    OWNERS[fn].__defaults__ = ("EUR", *OWNERS[fn].__defaults__[1:])
    result = _restore(StrictPrices(), fn, snap, caplog)
    assert result.outputs == []
    [error] = result.errors
    assert error.error_type == "ReplayDivergenceError"
    assert "default value of its parameter 'currency'" in error.message
    assert CALLS["apple"] == 1


def test_a_changed_keyword_only_default_diverges_in_strict_mode(caplog):
    snap = _after_first_call(StrictPrices(), "quote")
    quote.__kwdefaults__ = {"currency": "EUR", "cache": None}
    result = _restore(StrictPrices(), "quote", snap, caplog)
    assert result.outputs == []
    [error] = result.errors
    assert error.error_type == "ReplayDivergenceError" and error.key == "k"
    assert (
        "r0/go/c0" in error.message
        and "default value of its parameter 'currency'" in error.message
        and "ctx.patched" in error.message
    )
    assert CALLS["apple"] == 1


@pytest.mark.parametrize("change", ["none", "mutable"])
def test_defaults_left_as_they_were_replay_quietly(change, caplog):
    fn = "cached" if change == "mutable" else "quote"
    snap = _after_first_call(StrictPrices(), fn)
    result = _restore(StrictPrices(), fn, snap, caplog)
    assert result.errors == [], result.errors
    assert "default value" not in caplog.text and "arguments changed" not in caplog.text
    assert len(result.outputs) == 1
    assert CALLS["apple"] == 1  # replayed, though the cache it fills was not filled


# -- a user's module, in a temporary directory, a process per step -------------------------
ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else pathlib.Path(sys.executable))

SHOP = """
import os
import time


def convert(amount, rate=None, *, currency="{currency}"):
    with open(os.environ["CALLS_LOG"], "a") as f:
        f.write(f"convert {{amount}}\\n")
    if amount == 2:
        time.sleep(0.3)
    return f"{{amount}} {{currency}}"
"""

AGENT = """
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from shop import convert


class Checkout(Agent):
    replay = {mode!r}

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        got = [await ctx.durable_execute_async(convert, n) for n in (1, 2)]
        ctx.send_event(OutputEvent(output=got))
"""

MAIN = """
import functools
import json
import logging
import sys

from flink_agents_py import AgentsExecutionEnvironment
from my_agent import Checkout

logging.basicConfig(level=logging.WARNING, format="LOG %(message)s")
job = AgentsExecutionEnvironment.local().from_list([{"key": "k"}]).apply(Checkout())
saved = []


def at(job):
    for entry in job.snapshot()["keys"]:
        for rec in ((entry["run"] or {}).get("inflight") or {}).values():
            calls = rec.get("calls", {})
            if not saved and calls.get("0", {}).get("done") and "1" in calls:
                saved.append(job.snapshot())


if sys.argv[1] == "snapshot":
    job.run(on_step=at)
    with open("snap.json", "w") as f:
        json.dump(saved[0], f)
else:
    with open("snap.json") as f:
        result = job.restore(json.load(f)).run()
    print("RESULT", json.dumps({"outputs": result.outputs,
                                "errors": [[e.error_type, e.key, e.message]
                                           for e in result.errors]}))
"""


def _user_step(d: pathlib.Path, step: str, currency: str, mode: str) -> subprocess.CompletedProcess:
    (d / "shop.py").write_text(textwrap.dedent(SHOP.format(currency=currency)))
    (d / "my_agent.py").write_text(textwrap.dedent(AGENT.format(mode=mode)))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(ROOT), CALLS_LOG=str(d / "calls.log"))  # this checkout's package
    proc = subprocess.run(
        [PYTHON, "main.py", step], cwd=d, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.parametrize("mode", ["lenient", "strict"])
def test_a_users_module_redeployed_with_another_default(tmp_path, mode):
    d = tmp_path / "user_project"
    d.mkdir()
    assert not str(d).startswith(str(ROOT))
    (d / "main.py").write_text(textwrap.dedent(MAIN))
    _user_step(d, "snapshot", "USD", mode)
    proc = _user_step(d, "restore", "EUR", mode)
    [line] = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    result = json.loads(line[len("RESULT ") :])
    calls = (d / "calls.log").read_text().splitlines()
    assert calls.count("convert 1") == 1  # recorded before the snapshot: never run again
    if mode == "strict":
        assert result["outputs"] == []
        [[error_type, key, message]] = result["errors"]
        assert error_type == "ReplayDivergenceError" and key == "k"
        assert "shop:convert" in message and "'currency'" in message
    else:
        assert result == {"outputs": [["1 USD", "2 EUR"]], "errors": []}
        assert (
            "r0/go/c0 (shop:convert) is made with the arguments recorded, but the default "
            "value of its parameter 'currency' changed" in proc.stderr
        )


@pytest.mark.parametrize(
    ("before", "after"), [({}, {"currency": "USD"}), ({"currency": "USD"}, {})]
)
def test_a_default_now_passed_as_it_was_or_the_reverse_is_the_same_call(before, after, caplog):
    PASSED.update(before)
    snap = _after_first_call(Passes(), "price")
    PASSED.clear()
    PASSED.update(after)
    result = _restore(Passes(), "price", snap, caplog)
    assert result.errors == [] and result.outputs == [["apple:USD", "pear:USD"]]
    assert "arguments changed" not in caplog.text and "default value" not in caplog.text
    assert CALLS["apple"] == 1


@pytest.mark.parametrize(
    ("before", "after"), [({}, {"currency": "EUR"}), ({"currency": "EUR"}, {})]
)
def test_a_default_now_passed_with_another_value_or_the_reverse_diverges(before, after, caplog):
    PASSED.update(before)
    snap = _after_first_call(Passes(), "price")
    PASSED.clear()
    PASSED.update(after)
    result = _restore(Passes(), "price", snap, caplog)
    [error] = result.errors
    assert error.error_type == "ReplayDivergenceError" and "r0/go/c0" in error.message
    assert CALLS["apple"] == 1


def price_in_euros(item: str, currency: str = "EUR") -> str:
    """``price`` as the new code defines it: only its default changed."""
    CALLS.count(item)
    return f"{item}:{currency}"


price_in_euros.__name__ = price_in_euros.__qualname__ = "price"


class NewPrices(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        got = [await ctx.durable_execute_async(price_in_euros, i) for i in ("apple", "pear")]
        ctx.send_event(OutputEvent(output=got))


def test_check_upgrade_safety_reports_a_changed_default_before_the_deploy():
    from flink_agents_py.testing import check_upgrade_safety

    report = check_upgrade_safety(
        Prices(), NewPrices(), [{"key": "k", "fn": "price"}], other_process=False
    )
    assert not report.ok
    assert any("other arguments" in f.message and "c0" in f.message for f in report.distinct)
    check_upgrade_safety(
        Prices(), Prices(), [{"key": "k", "fn": "price"}], other_process=False
    ).assert_ok()  # not vacuous: the same code is safe
