"""Standard-library objects that hold the user's callables or plain data, bound by a durable
call's callable: what they hold is part of the call's identity.

An object of a standard-library class with no JSON form counts by its type name only (a
socket, a lock: no form that is the same in every process). Some standard-library classes
only *hold* what the user gave them: ``functools.partialmethod`` (its function and
arguments, reached through the method it makes) and ``types.SimpleNamespace`` /
``argparse.Namespace`` (plain attributes). Counted by their type alone, two calls that
differ only there had one digest, and a restore that made them in another order handed each
the other's recorded outcome without a word.

Core-level restores (``support.harness``), as in ``test_replay_identity_neighbours``.
"""

from __future__ import annotations

import argparse
import collections
import email.message
import functools
import logging
import os
import string
import subprocess
import sys
import textwrap
import types
from typing import Any

import pytest
from support.harness import KEY, call_of, drive_until, new_core, resume, snapshot_of
from support.probes import count, gate

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState
from flink_agents_py.runtime.recorder._outcomes import call_digest

pytestmark = pytest.mark.timeout(60)

ORDER: dict[str, Any] = {"items": ("apple", "pear")}


@pytest.fixture(autouse=True)
def _first_deploy():
    ORDER["items"] = ("apple", "pear")


def price(item: str) -> str:
    count(f"price:{item}")
    return f"PRICE({item})"


class Pricer:
    """A callable object with no ``__get__``: ``partialmethod`` keeps it unbound."""

    def __call__(self, owner: Any, item: str) -> str:
        return price(item)


class Shop:
    """Methods made by ``functools.partialmethod``, over a callable object and a builtin."""

    apple = functools.partialmethod(Pricer(), "apple")
    pear = functools.partialmethod(Pricer(), "pear")


def _namespace_call(ns: Any):
    def call() -> str:
        return price(ns.item)

    return call


def _reading(holder: Any, read: Any):
    def call() -> str:
        return price(read(holder))

    return call


def _message(item: str) -> email.message.EmailMessage:
    message = email.message.EmailMessage()
    message["Subject"] = item
    message.set_content(f"the price of {item}")
    return message


def _shop_class(item: str) -> type:
    """A class made in a function (a factory), one per item: what it holds is the item."""

    class Local:
        ITEM = item

        @classmethod
        def get(cls) -> str:
            return price(cls.ITEM)

    return Local


FORMS: dict[str, Any] = {
    "classmethod_of_a_class_made_in_a_function": lambda item: _shop_class(item).get,
    "closure_over_template": lambda item: _reading(string.Template(item), lambda t: t.template),
    "closure_over_mapping_proxy": lambda item: _reading(
        types.MappingProxyType({"item": item}), lambda m: m["item"]
    ),
    "closure_over_chain_map": lambda item: _reading(
        collections.ChainMap({"item": item}), lambda m: m["item"]
    ),
    "closure_over_dict_values": lambda item: _reading(
        {"item": item}.values(), lambda v: next(iter(v))
    ),
    "closure_over_email_message": lambda item: _reading(_message(item), lambda m: m["Subject"]),
    "partialmethod_over_callable_object": lambda item: getattr(Shop(), item),
    "closure_over_simple_namespace": lambda item: _namespace_call(types.SimpleNamespace(item=item)),
    "closure_over_argparse_namespace": lambda item: _namespace_call(argparse.Namespace(item=item)),
    "partial_of_simple_namespace": lambda item: functools.partial(
        lambda ns: price(ns.item), types.SimpleNamespace(item=item)
    ),
}


def gated(tag: str) -> str:
    count(f"gated:{tag}")
    assert gate().wait(10), "gate never opened"
    return tag


class Priced(Agent):
    """One durable call per item of ``ORDER["items"]`` through ``FORMS[form]``, then a call
    that waits on the gate (the snapshot is taken while it runs)."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        make = FORMS[event.input["form"]]
        got = [await ctx.durable_execute_async(make(item)) for item in ORDER["items"]]
        await ctx.durable_execute_async(gated, "g")
        ctx.send_event(OutputEvent(output=got))


def _snapshot(form: str) -> tuple[AgentPlan, InMemoryKeyState]:
    plan = AgentPlan.from_agent(Priced())
    core = new_core(plan)
    try:
        state = InMemoryKeyState()
        res = core.on_input(KEY, {"key": KEY, "form": form}, state)
        assert res.errors == [] and res.outputs == []
        drive_until(
            core,
            state,
            quiet=True,
            done=lambda s: (c := call_of(s, "go", 2)) is not None and not c.done,
        )
        return plan, snapshot_of(state, "json")
    finally:
        gate().set()
        core.close()


@pytest.mark.parametrize("form", sorted(FORMS))
def test_what_the_holder_holds_counts_in_the_digest(form):
    make = FORMS[form]
    assert call_digest(make("apple"), (), {}, "r0/go/c0") != call_digest(
        make("pear"), (), {}, "r0/go/c0"
    )
    assert call_digest(make("apple"), (), {}, "r0/go/c0") == call_digest(
        make("apple"), (), {}, "r0/go/c0"
    )


@pytest.mark.parametrize("form", sorted(FORMS))
def test_calls_made_in_another_order_after_a_restore_diverge(form, probes):
    """Recorded: c0 prices the apple, c1 the pear. Restored with the two swapped: a
    divergence at c0, not each call handed the other's recorded price."""
    plan, snap = _snapshot(form)
    ORDER["items"] = ("pear", "apple")
    outputs, errors, _core = resume(plan, snap)
    assert outputs == []
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and "r0/go/c0" in err.message
    assert "arguments are those recorded for r0/go/c1" in err.message
    assert (probes["price:apple"], probes["price:pear"]) == (1, 1)  # nothing ran again


@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_same_order_replays_quietly(form, probes, caplog):
    plan, snap = _snapshot(form)
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, _core = resume(plan, snap)
    assert errors == [] and outputs == [["PRICE(apple)", "PRICE(pear)"]]
    assert not [r for r in caplog.records if "arguments changed" in r.getMessage()]
    assert (probes["price:apple"], probes["price:pear"]) == (1, 1)


USER_MODULE = """
import functools, types
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action

SWAP = {"on": False}
MADE = []


def price(item):
    MADE.append(item)
    return "PRICE(" + item + ")"


def hold():
    return "held"


class Shop(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        rows = [types.SimpleNamespace(item=i) for i in ("apple", "pear")]
        if SWAP["on"]:
            rows.reverse()
        got = []
        for row in rows:
            got.append(await ctx.durable_execute_async(lambda row=row: price(row.item)))
        await ctx.durable_execute_async(hold)
        ctx.send_event(OutputEvent(output=got))
"""

USER_CHECK = """
import copy
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore, InMemoryKeyState
import shop

plan = AgentPlan.from_agent(shop.Shop())
core = AgentCore(plan)
core.open()
state = InMemoryKeyState()
res = core.on_input("k", {"key": "k"}, state)
while not (state.run and any(len(r.calls) == 3 for r in state.run.inflight.values())):
    assert core.wait_for("k", 10)
    core.advance("k", state)
snap = copy.deepcopy(state)
core.close()
shop.SWAP["on"] = True  # the restored code makes the two calls in the other order
core = AgentCore(plan)
core.open()
res = core.advance("k", snap)
errors, outputs = list(res.errors), list(res.outputs)
while res.busy:
    assert core.wait_for("k", 10)
    res = core.advance("k", snap)
    errors += res.errors
    outputs += res.outputs
core.close()
print("OUTPUTS", outputs)
print("ERRORS", [e.error_type for e in errors])
"""


def test_a_users_module_swapping_namespaces_is_a_divergence(tmp_path):
    """The user's own module, run from its own directory: rows as ``SimpleNamespace``
    objects priced through lambdas, restored with the rows in another order."""
    (tmp_path / "shop.py").write_text(USER_MODULE)
    (tmp_path / "check.py").write_text(USER_CHECK)
    done = subprocess.run(
        [sys.executable, "check.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "HOME")},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "OUTPUTS []" in done.stdout, textwrap.shorten(done.stdout, 500)
    assert "ERRORS ['ReplayDivergenceError']" in done.stdout
