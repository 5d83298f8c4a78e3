"""Replay you can upgrade (issue 28): call identity of every callable form, started calls that
finish before their action, replays that make fewer calls, strict replay, ``ctx.patched``.

Core-level restores (``support.harness``): a key's state is snapshotted mid-run through its
JSON form, as Flink restores keyed state, the code is "redeployed" by flipping a module switch,
and the snapshot resumes on a new ``AgentCore``.
"""

from __future__ import annotations

import functools
import logging
import socket
import threading
from typing import Any

import pytest
from support.harness import KEY, call_of, drive_until, new_core, resume, snapshot_of
from support.probes import count, gate

from flink_agents_py.api import (
    Agent,
    InputEvent,
    OutputEvent,
    RunnerContext,
    action,
)
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState
from flink_agents_py.runtime._identity import bound_state, stable_form
from flink_agents_py.runtime._outcomes import call_digest

pytestmark = pytest.mark.timeout(60)

SWITCH: dict[str, Any] = {"order": ("apple", "pear"), "form": "partial"}


@pytest.fixture(autouse=True)
def _first_deploy():
    SWITCH.update(order=("apple", "pear"), form="partial")


# -- fakes ---------------------------------------------------------------------------------
def price(item: str, qty: int = 1) -> str:
    count(f"price:{item}")
    return f"PRICE({item})x{qty}"


def price_apple() -> str:
    return price("apple")


def price_pear() -> str:
    return price("pear")


def gated(tag: str) -> str:
    count(f"gated:{tag}")
    assert gate().wait(10), "gate never opened"
    return tag


class Pricer:
    """Bound methods of two instances differ only in ``self.item``."""

    def __init__(self, item: str) -> None:
        self.item = item

    def price(self) -> str:
        return price(self.item)


class PriceOf:
    """A callable object whose state says what it prices."""

    def __init__(self, item: str) -> None:
        self.item = item

    def __call__(self) -> str:
        return price(self.item)


def _closure(item: str):
    def call() -> str:
        return price(item)
    return call


def _calls_fn(fn):
    def call() -> str:
        return fn()
    return call


def _literal_lambda(item: str):
    # two lambdas that differ only in a literal in their code
    return (lambda: price("apple")) if item == "apple" else (lambda: price("pear"))


FORMS = {
    "partial": lambda item: functools.partial(price, item),
    "partial_keyword": lambda item: functools.partial(price, item=item),
    "nested_partial": lambda item: functools.partial(functools.partial(price, item), qty=2),
    "lambda_default": lambda item: (lambda x=item: price(x)),
    "closure": _closure,
    "closure_over_function": lambda item: _calls_fn(price_apple if item == "apple"
                                                    else price_pear),
    "lambda_literal": _literal_lambda,
    "bound_method": lambda item: Pricer(item).price,
    "callable_object": PriceOf,
}


class Fanout(Agent):
    """One durable call per item, in ``SWITCH["order"]``, through the callable form
    ``SWITCH["form"]``; then a call that waits on the gate."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        make = FORMS[SWITCH["form"]]
        got = [await ctx.durable_execute_async(make(item)) for item in SWITCH["order"]]
        await ctx.durable_execute_async(gated, "g")
        ctx.send_event(OutputEvent(output=got))


def snapshot_at(plan: AgentPlan, ordinal: int, action_name: str = "go",
                record: dict[str, Any] | None = None) -> InMemoryKeyState:
    """Run one record until the calls before ``ordinal`` are recorded and call ``ordinal``
    has started (it waits on the gate); the key's state there, through its JSON form."""
    core = new_core(plan)
    try:
        state = InMemoryKeyState()
        res = core.on_input(KEY, record or {"key": KEY}, state)
        assert res.errors == [] and res.outputs == []
        drive_until(core, state, quiet=True, done=lambda s: (
            (c := call_of(s, action_name, ordinal)) is not None and not c.done))
        return snapshot_of(state, "json")
    finally:
        gate().set()
        core.close()


# -- defect 1: what a callable binds is part of its call's identity --------------------------
@pytest.mark.parametrize("form", sorted(FORMS))
def test_calls_through_any_callable_form_made_in_another_order_diverge(form, probes):
    """Recorded: c0 prices apple, c1 pear, through ``form``. Restored with the two swapped,
    c0 now binds what c1 bound: the action fails with a divergence instead of handing
    ``pear`` the recorded ``PRICE(apple)``."""
    SWITCH["form"] = form
    plan = AgentPlan.from_agent(Fanout())
    snap = snapshot_at(plan, 2)
    assert (probes["price:apple"], probes["price:pear"]) == (1, 1)
    SWITCH["order"] = ("pear", "apple")
    outputs, errors, core = resume(plan, snap)
    assert outputs == []  # no output made from a swapped answer
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and "r0/go/c0" in err.message
    assert "arguments are those recorded for r0/go/c1" in err.message
    assert (probes["price:apple"], probes["price:pear"]) == (1, 1)  # nothing ran again
    assert core.counters["replay_divergences"] == 1


@pytest.mark.parametrize("form", sorted(FORMS))
def test_calls_through_any_callable_form_in_the_same_order_replay_quietly(form, probes,
                                                                          caplog):
    SWITCH["form"] = form
    plan = AgentPlan.from_agent(Fanout())
    snap = snapshot_at(plan, 2)
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, core = resume(plan, snap)
    assert errors == []
    qty = 2 if form == "nested_partial" else 1
    assert outputs == [[f"PRICE(apple)x{qty}", f"PRICE(pear)x{qty}"]]
    assert core.counters["calls_replayed"] == 2 and core.counters["calls_executed"] == 1
    assert not [r for r in caplog.records if "arguments changed" in r.getMessage()]
    assert (probes["price:apple"], probes["price:pear"]) == (1, 1)


def _digest(fn) -> str:
    return call_digest(fn, (), {}, "r0/go/c0")


def test_bound_state_is_a_stable_form_not_an_object_address():
    # two instances with the same state: the same digest (never id())
    assert _digest(Pricer("apple").price) == _digest(Pricer("apple").price)
    assert _digest(Pricer("apple").price) != _digest(Pricer("pear").price)
    assert _digest(PriceOf("apple")) == _digest(PriceOf("apple"))
    # a module-level function binds nothing: its digest is what it was before
    assert bound_state(price) is None
    assert bound_state(functools.partial(price, "apple")) is not None
    # a set bound in a closure is digested in a stable order
    assert stable_form({"b", "a", "c"}) == stable_form({"c", "b", "a"})


def test_a_bound_value_with_no_stable_form_contributes_its_type_name_only():
    class Client:
        def __init__(self, region: str) -> None:
            self.region = region
            self.sock = socket.socket()
            self.lock = threading.Lock()

        def fetch(self) -> str:
            return self.region

    a, b, eu = Client("us"), Client("us"), Client("eu")
    try:
        assert stable_form(a.sock) == {"$type": "socket:socket"}
        assert stable_form(a.lock)["$type"].endswith("lock")
        assert _digest(a.fetch) == _digest(b.fetch)  # other socket, other lock: same identity
        assert _digest(a.fetch) != _digest(eu.fetch)  # the data it holds still counts
    finally:
        for c in (a, b, eu):
            c.sock.close()


def test_functions_in_a_closure_count_by_qualified_name_and_cycles_end():
    assert stable_form(price) == {"$fn": f"{__name__}:price"}
    loop: list[Any] = []
    loop.append(loop)
    assert stable_form(loop) is not None  # a cycle does not recurse forever

    class Custom:
        def __durable_identity__(self) -> str:
            return "pinned"

    assert stable_form(Custom()) == stable_form(Custom())
    assert "pinned" in str(stable_form(Custom()))
