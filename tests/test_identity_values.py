"""What a callable binds: value objects the attribute walk cannot see, classes made in a function.

Two durable calls told apart only by such a value (a numpy scalar or array, a callable
object whose class is made per value in a function) had one digest, so after a restore that
made them in the other order each got the other's recorded result. Each case here makes its
two calls, a checkpoint is taken while a third is in flight, and the restored run makes the
two in the other order: it must fail with ``ReplayDivergenceError`` or replay right, never
swap; in the recorded order it replays both results without an ``arguments changed``
warning. Plain objects found inside a bound object count in the digest by their type only
(their state is checked for order only: calls that change it replay quietly), and the
digests of the common cases are those of the previous release.
"""

from __future__ import annotations

import collections
import functools
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent
from flink_agents_py.runtime.recorder._identity import bound_state, stable_form
from flink_agents_py.runtime.recorder._outcomes import argument_shape, call_digest

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]
Labelled = list[tuple[Any, ...]]
PLAN: dict[str, Any] = {"make": None, "swap": False}
GATE = threading.Event()


def price(item: Any, qty: Any = 1) -> str:
    return f"price({item},{qty})"


def held() -> str:
    assert GATE.wait(10), "the checkpoint was never taken"
    return "held"


async def act(event: InputEvent, ctx: Any) -> None:
    calls = PLAN["make"]()
    if PLAN["swap"]:
        calls = calls[::-1]
    got = {}
    for label, fn, *args in calls:  # (label, fn) or (label, fn, args)
        got[label] = str(await ctx.durable_execute_async(fn, *(args[0] if args else ())))
    await ctx.durable_execute_async(held)
    ctx.send_event(OutputEvent(output=got))


def agent() -> Agent:
    made = Agent()
    made.add_action("act", [InputEvent], act)
    return made


def crash_and_restore(make: Callable[[], Labelled], swap: bool) -> tuple[Any, Any]:
    """Run to the end, checkpointing once two calls are recorded; restore that checkpoint.

    Returns:
        The fault-free run's result, and the restored run's (the two calls in the other
        order when ``swap``).
    """
    PLAN.update(make=make, swap=False)
    GATE.clear()
    taken: list[dict[str, Any]] = []

    def on_step(job: Any) -> None:
        snap = job.snapshot()
        done = [c for k in snap["keys"] if k.get("run")
                for ex in k["run"]["inflight"].values()
                for c in ex["calls"].values() if c.get("done")]
        if not taken and len(done) == PLAN.get("recorded", 2):
            taken.append(json.loads(json.dumps(snap)))  # through JSON, as a checkpoint is
            GATE.set()

    records = [{"key": "k"}]
    first = AgentsExecutionEnvironment.local().from_list(records).apply(agent()).run(
        on_step=on_step)
    assert taken, "no checkpoint with two recorded calls"
    PLAN["swap"] = swap
    GATE.set()
    rest = AgentsExecutionEnvironment.local().from_list(records).apply(agent()).restore(
        taken[0]).run()
    return first, rest


def numpy() -> Any:
    return pytest.importorskip("numpy")


# -- the cases ---------------------------------------------------------------------------------
class Scorer:
    def __init__(self, w: Any) -> None:
        self.w = w

    def score(self) -> str:
        return price(str(self.w.tolist()))


def capturing(value: Any) -> Callable[[], str]:
    return lambda: price(str(value.tolist()))


def closing_over(item: str) -> Any:
    class Priced:
        def __call__(self) -> str:
            return price(item)

    return Priced()


def with_class_attribute(item: str) -> Any:
    class Priced:
        ITEM = item

        def __call__(self) -> str:
            return price(self.ITEM)

    return Priced()


def method_closing_over(item: str) -> Any:
    class Shelf:
        def get(self) -> str:
            return price(item)

    return Shelf().get


class Item:
    def __init__(self, name: str) -> None:
        self.name = name


class Shop:
    def __init__(self, item: Item) -> None:
        self.item = item

    def get(self) -> str:
        return price(self.item.name)


class Pricer:
    def __init__(self, item: Item) -> None:
        self.item = item

    def __call__(self) -> str:
        return price(self.item.name)


Rect = collections.namedtuple("Rect", "w h")
Box = collections.namedtuple("Box", "w h")


def area(shape: Any) -> str:
    return f"{type(shape).__name__}:{shape[0] * shape[1]}"


def convert(src: str, dst: str) -> str:
    return f"{src}->{dst}"


def looked_up(flip: bool, holder: Callable[[Any], Any]) -> Callable[[], str]:
    """A lambda that calls a lambda it finds in a table its closure holds."""
    src, dst = "USD", "EUR"
    inner = (lambda: convert(dst, src)) if flip else (lambda: convert(src, dst))
    table = holder(inner)
    return lambda: table["convert"]() if isinstance(table, dict) else table[0]()


class Router:
    def __init__(self, route: Callable[[], str]) -> None:
        self.routes = {"convert": route}

    def run(self) -> str:
        return self.routes["convert"]()


def routed(flip: bool) -> Callable[[], str]:
    src, dst = "USD", "EUR"
    return Router((lambda: convert(dst, src)) if flip else (lambda: convert(src, dst))).run


CASES: dict[str, Callable[[], Labelled]] = {
    "bound method whose object holds a plain object": lambda: [
        ("apple", Shop(Item("apple")).get), ("pear", Shop(Item("pear")).get)],
    "callable object holding a plain object": lambda: [
        ("apple", Pricer(Item("apple"))), ("pear", Pricer(Item("pear")))],
    "partial of a bound method whose object holds a plain object": lambda: [
        ("apple", functools.partial(Shop(Item("apple")).get)),
        ("pear", functools.partial(Shop(Item("pear")).get))],
    "namedtuple arguments of two classes": lambda: [
        ("rect", area, (Rect(2, 3),)), ("box", area, (Box(2, 3),))],
    "namedtuples of two classes in partials": lambda: [
        ("rect", functools.partial(area, Rect(2, 3))), ("box", functools.partial(area, Box(2, 3)))],
    "lambdas whose code differs, in a dict a lambda holds": lambda: [
        ("there", looked_up(False, lambda f: {"convert": f})),
        ("back", looked_up(True, lambda f: {"convert": f}))],
    "lambdas whose code differs, in a list a lambda holds": lambda: [
        ("there", looked_up(False, lambda f: [f])), ("back", looked_up(True, lambda f: [f]))],
    "lambdas whose code differs, held by a bound method's object": lambda: [
        ("there", routed(False)), ("back", routed(True))],
    "lambdas whose code differs, held by an object a lambda closes over": lambda: [
        ("there", (lambda r: lambda: r.run())(Router(routed(False).__self__.routes["convert"]))),
        ("back", (lambda r: lambda: r.run())(Router(routed(True).__self__.routes["convert"])))],

    "partial binding a numpy int64": lambda: [
        ("one", functools.partial(price, "x", numpy().int64(1))),
        ("two", functools.partial(price, "x", numpy().int64(2)))],
    "lambda capturing a numpy array": lambda: [
        ("one", capturing(numpy().array([1, 2]))), ("two", capturing(numpy().array([3, 4])))],
    "bound method whose self holds a numpy array": lambda: [
        ("one", Scorer(numpy().array([1.0])).score),
        ("two", Scorer(numpy().array([2.0])).score)],
    "callable object whose __call__ closes over a value": lambda: [
        ("apple", closing_over("apple")), ("pear", closing_over("pear"))],
    "callable object whose class attribute differs": lambda: [
        ("apple", with_class_attribute("apple")), ("pear", with_class_attribute("pear"))],
    "bound method of a class made per value": lambda: [
        ("apple", method_closing_over("apple")), ("pear", method_closing_over("pear"))],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_two_calls_told_apart_by_a_value_have_two_identities(case):
    (_, one, *a1), (_, two, *a2) = CASES[case]()
    args1, args2 = (a1[0] if a1 else ()), (a2[0] if a2 else ())
    assert (call_digest(one, args1, {}, "r0/act/c0"), argument_shape(one, args1, {})) \
        != (call_digest(two, args2, {}, "r0/act/c0"), argument_shape(two, args2, {}))


@pytest.mark.parametrize("case", sorted(CASES))
def test_calls_reordered_after_a_restore_never_swap_results(case):
    make = CASES[case]
    make()  # skips the numpy cases when numpy is not installed
    first, rest = crash_and_restore(make, swap=True)
    [fault_free] = first.outputs
    assert len(set(fault_free.values())) == 2  # two calls, two results
    if rest.outputs:  # replayed right
        assert rest.errors == [] and rest.outputs == first.outputs
    else:
        [err] = rest.errors
        assert err.error_type == "ReplayDivergenceError"


@pytest.mark.parametrize("case", sorted(CASES))
def test_calls_in_the_recorded_order_replay_their_own_results_quietly(case, caplog):
    make = CASES[case]
    make()
    with caplog.at_level(logging.WARNING, logger="flink_agents_py"):
        first, rest = crash_and_restore(make, swap=False)
    assert rest.errors == []
    assert rest.outputs == first.outputs
    assert not [r for r in caplog.records if "arguments changed" in r.getMessage()]


class Connection:
    def __init__(self) -> None:
        self.busy, self.uses, self.token = False, 0, None


class Api:
    """Calls that change the state of an object the bound one holds, as a client's do."""

    def __init__(self) -> None:
        self.conn = Connection()

    def toggle(self) -> str:
        self.conn.busy = not self.conn.busy
        return f"busy={self.conn.busy}"

    def count(self) -> str:
        self.conn.uses += 1
        return f"uses={self.conn.uses}"

    def login(self) -> str:
        self.conn.token = self.conn.token or "t0k3n"
        return f"token={self.conn.token}"


USED: dict[str, Callable[[], Labelled]] = {
    "a flag a call sets and the next clears": lambda: (api := Api()) and [
        ("a", api.toggle), ("b", api.toggle), ("c", api.toggle)],
    "a use counter": lambda: (api := Api()) and [
        ("a", api.count), ("b", api.count), ("c", api.count)],
    "a token the first call fetches": lambda: (api := Api()) and [
        ("a", api.login), ("b", api.login), ("c", api.login)],
}


@pytest.mark.parametrize("case", sorted(USED))
def test_calls_that_change_a_held_objects_state_replay_after_a_crash(case, caplog):
    """A replay does not run the recorded calls, so the state they changed lags behind the
    live run's: that is not a reordering (nothing lost), and not a changed argument."""
    PLAN["recorded"] = 3
    try:
        with caplog.at_level(logging.WARNING, logger="flink_agents_py"):
            first, rest = crash_and_restore(USED[case], swap=False)
    finally:
        PLAN.pop("recorded")
    assert rest.errors == [] and first.errors == []
    assert rest.outputs == first.outputs
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


class Client:
    """A client that keeps on itself what its first call fetched (the bound object's own
    state, in the digest itself, unlike an object inside it)."""

    def __init__(self) -> None:
        self.token: str | None = None

    def login(self) -> str:
        self.token = self.token or "t0k3n"
        return f"token={self.token}"


def test_a_client_that_keeps_state_its_calls_set_replays_after_a_crash():
    """Before: the replayed calls did not run, so the second call had the state of the first
    (no token), matched the first's record and failed the run as a reordering, though the
    code had not changed."""
    PLAN["recorded"] = 3
    try:
        first, rest = crash_and_restore(
            lambda: (client := Client()) and [(n, client.login) for n in "abc"], swap=False)
    finally:
        PLAN.pop("recorded")
    assert first.errors == [] and rest.errors == []
    assert rest.outputs == first.outputs  # each call its own recorded outcome


# -- the forms ---------------------------------------------------------------------------------
def test_value_forms_are_deterministic_bounded_and_hold_no_address():
    np = numpy()
    assert stable_form(np.int64(1)) == stable_form(np.int64(1)) != stable_form(np.int64(2))
    assert stable_form(np.int64(1)) != stable_form(np.int32(1))  # the dtype counts
    big = stable_form(np.zeros(100_000))
    assert len(json.dumps(big)) < 2_000  # a long buffer is its SHA-256
    assert stable_form(np.zeros(100_000)) == big != stable_form(np.ones(100_000))
    form = json.dumps(bound_state(Scorer(np.array([1.0])).score))
    assert "0x" not in form and "$fn" not in form  # no address; numpy internals no callees
    huge = np.zeros(2_000_000)  # past the size bound: its type only, as before
    assert stable_form(huge) == {"$type": "numpy:ndarray", "state": {}}


class Unreadable:
    """Stands for a C extension value that keeps its state hidden and cannot be pickled."""

    __slots__ = ()

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("cannot pickle 'Unreadable' object")


def test_a_value_that_cannot_be_pickled_counts_by_its_type_as_before():
    assert stable_form(Unreadable()) == {"$type": f"{__name__}:Unreadable", "state": {}}
    assert bound_state(functools.partial(price, Unreadable())) == [
        {"partial": [{"$type": f"{__name__}:Unreadable", "state": {}}], "keywords": {}}]


class Counting:
    """A library's object (pytest's ``MonkeyPatch``) whose state changes as it is used."""


def test_a_library_object_inside_a_bound_object_still_counts_by_its_type_only():
    """A client's pool or cache changes as it is used: the replay must not see a change."""
    from _pytest.monkeypatch import MonkeyPatch

    used, fresh = MonkeyPatch(), MonkeyPatch()
    used.setenv("FLINK_AGENTS_PY_UNUSED_PROBE", "1")
    used.undo()
    used.setattr(Counting, "x", 1, raising=False)
    try:
        assert call_digest(Shop(used).get, (), {}, "c0") \
            == call_digest(Shop(fresh).get, (), {}, "c0")
    finally:
        used.undo()


class NamedItem(Item):
    def __durable_identity__(self) -> dict[str, str]:
        return {"name": self.name}


def test_durable_identity_makes_the_state_of_an_object_inside_count():
    assert call_digest(Shop(NamedItem("apple")).get, (), {}, "c0") \
        != call_digest(Shop(NamedItem("pear")).get, (), {}, "c0")


# -- the common cases keep their digests -------------------------------------------------------
class Quote(BaseModel):
    sku: str
    qty: int = 1


class Desk:
    def __init__(self, region: str) -> None:
        self.region = region
        self.tags = ["a", "b"]

    def quote(self, sku: str) -> str:
        return f"{self.region}:{sku}"


class Fixed:
    RATE = 2

    def __call__(self, sku: str) -> str:
        return price(sku, self.RATE)


class Service:
    def __init__(self) -> None:
        import httpx

        self.client = httpx.Client()
        self.region = "eu"

    def fetch(self, sku: str) -> str:
        return price(sku)


def priced_lambda(item: Any) -> Callable[[str], str]:
    return lambda sku: price(f"{item}:{sku}")


def common_calls() -> dict[str, Callable[..., Any]]:
    return {
        "module-level function": price,
        "partial over JSON data": functools.partial(price, "apple", qty=2),
        "lambda over a list": priced_lambda([1, {"a": 2}]),
        "lambda over a pydantic model": priced_lambda(Quote(sku="B01")),
        "bound method of a plain object": Desk("eu").quote,
        "bound method of a plain object holding a plain object": Shop(Item("apple")).get,
        "callable object holding a plain object": Pricer(Item("apple")),
        "callable object with a class attribute": Fixed(),
        "bound method of an object holding an httpx client": Service().fetch,
    }


# computed by the code before value objects were read (main at 39b546e): unchanged
PREVIOUS_RELEASE = {
    "module-level function": "cf9d3e11a67b2eea",
    "partial over JSON data": "fd0884f5b610310d",
    "lambda over a list": "75f6c6c58e148fd1",
    "lambda over a pydantic model": "1743aaaa2318a235",
    "bound method of a plain object": "14ee91db503ced44",
    "bound method of a plain object holding a plain object": "7a6a2b6374aac6a4",
    "callable object holding a plain object": "3a175f6b9c284552",
    "callable object with a class attribute": "49b4494c9a950429",
    "bound method of an object holding an httpx client": "7f1ba5fe8de23de1",
}


def test_common_calls_keep_the_digests_of_the_previous_release():
    got = {name: call_digest(fn, ("B01",), {}, "r0/act/c0")
           for name, fn in common_calls().items()}
    assert got == PREVIOUS_RELEASE


# -- a user's script, crashed and restored in two processes ------------------------------------
USER_MODULE = '''
import collections
import functools
import threading
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action

GATE = threading.Event()
SWAP = {"on": False}


def price(item, qty=1):
    return f"price({item},{qty})"


def held():
    assert GATE.wait(10), "the checkpoint was never taken"
    return "held"


def closing_over(item):
    class Priced:
        def __call__(self):
            return price(item)
    return Priced()


class Item:
    def __init__(self, name):
        self.name = name


class Shop:
    def __init__(self, item):
        self.item = item

    def get(self):
        return price(self.item.name)


Rect = collections.namedtuple("Rect", "w h")
Box = collections.namedtuple("Box", "w h")


def area(shape):
    return f"{type(shape).__name__}:{shape.w * shape.h}"


def calls(case):
    if case == "nested":
        return [("apple", Shop(Item("apple")).get), ("pear", Shop(Item("pear")).get)]
    if case == "namedtuple":
        return [("rect", functools.partial(area, Rect(2, 3))),
                ("box", functools.partial(area, Box(2, 3)))]
    if case == "numpy":
        import numpy
        words = numpy.array([frozenset({"apple", "pear", "fig", "plum"})], dtype=object)
        return [("one", functools.partial(price, "x", numpy.array([1, 2]))),
                ("two", functools.partial(price, "x", words))]
    return [("apple", closing_over("apple")), ("pear", closing_over("pear"))]


class Pricing(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        made = calls(event.input["case"])
        if SWAP["on"]:  # the code redeployed with the calls reordered
            made = made[::-1]
        got = {}
        for label, fn in made:
            got[label] = str(await ctx.durable_execute_async(fn))
        await ctx.durable_execute_async(held)
        ctx.send_event(OutputEvent(output=got))
'''

USER_RUN = '''
import json, sys
from flink_agents_py import AgentsExecutionEnvironment
from my_pricing import GATE, SWAP, Pricing

case, step = sys.argv[1], sys.argv[2]
records = [{"key": "k", "case": case}]
job = AgentsExecutionEnvironment.local().from_list(records).apply(Pricing())
if step == "crash":
    snaps = []
    def on_step(j):
        s = j.snapshot()
        done = [c for k in s["keys"] if k.get("run") for ex in k["run"]["inflight"].values()
                for c in ex["calls"].values() if c.get("done")]
        if not snaps and len(done) == 2:
            snaps.append(json.loads(json.dumps(s)))
            GATE.set()
    result = job.run(on_step=on_step)
    with open("checkpoint.json", "w") as out:
        json.dump(snaps[0], out)
else:
    GATE.set()
    SWAP["on"] = step == "swapped"
    with open("checkpoint.json") as inp:
        result = job.restore(json.load(inp)).run()
print(json.dumps({"outputs": result.outputs, "errors": [e.error_type for e in result.errors]}))
'''


@pytest.mark.parametrize("case", ["numpy", "closure", "nested", "namedtuple"])
def test_a_users_script_restored_in_another_process_never_swaps_results(tmp_path, case):
    if case == "numpy":
        numpy()
    (tmp_path / "my_pricing.py").write_text(textwrap.dedent(USER_MODULE))
    (tmp_path / "run.py").write_text(textwrap.dedent(USER_RUN))

    def python(step: str, seed: str) -> tuple[dict[str, Any], str]:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "run.py", case, step], cwd=tmp_path, env=env,
                              timeout=120, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1]), done.stderr

    crashed, _ = python("crash", "1")
    [fault_free] = crashed["outputs"]
    assert len(set(fault_free.values())) == 2
    swapped, _ = python("swapped", "2")
    assert swapped == {"outputs": [], "errors": ["ReplayDivergenceError"]}
    same, log = python("same", "2")
    assert same == {"outputs": [fault_free], "errors": []}
    assert "arguments changed" not in log
