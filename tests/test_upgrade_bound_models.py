"""Bound methods (and callable objects) of pydantic models that differ only in their private
attributes (``PrivateAttr``): the model's JSON form leaves those out, so before,
``Pricer(_region="eu").price`` and ``Pricer(_region="us").price`` were one call to the
digest, and made in the other order after a restore each was silently handed the other's
recorded outcome. Now the private attributes count as a plain object's instance attributes
do: the other order diverges, the same order replays quietly, and a model without private
attributes keeps the digest it had.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from pydantic import BaseModel, PrivateAttr
from support.harness import KEY, call_of, drive_until, new_core, resume, snapshot_of
from support.probes import count, gate

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState
from flink_agents_py.runtime.recorder._identity import stable_form

pytestmark = pytest.mark.timeout(120)

DEPLOYED = {"version": 1}


@pytest.fixture(autouse=True)
def _old_code():
    DEPLOYED.update(version=1)


class Pricer(BaseModel):
    """A model whose region is private: not in its JSON form."""

    shop: str = "main"
    _region: str = PrivateAttr(default="eu")

    def price(self, item: str) -> str:
        count(f"price:{self._region}:{item}")
        return f"{self._region}:{item}"


def pricer(region: str) -> Pricer:
    made = Pricer()
    made._region = region
    return made


def gated(tag: str) -> str:
    count(f"gated:{tag}")
    assert gate().wait(10), "gate never opened"
    return tag


class Prices(Agent):
    """Prices one item in two regions (version 2: in the other order), then the gated call."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        regions = ("eu", "us") if DEPLOYED["version"] == 1 else ("us", "eu")
        got = [await ctx.durable_execute_async(pricer(r).price, "apple") for r in regions]
        await ctx.durable_execute_async(gated, "end")
        ctx.send_event(OutputEvent(output=sorted(got)))


def _snapshot(plan: AgentPlan) -> InMemoryKeyState:
    core = new_core(plan)
    try:
        state = InMemoryKeyState()
        core.on_input(KEY, {"key": KEY}, state)
        drive_until(core, state, quiet=True, done=lambda s: (
            (c := call_of(s, "go", 2)) is not None and not c.done))
        return snapshot_of(state, "json")
    finally:
        gate().set()
        core.close()


def test_bound_methods_of_models_told_apart_by_private_attributes_diverge_reordered(probes):
    plan = AgentPlan.from_agent(Prices())
    snap = _snapshot(plan)
    DEPLOYED["version"] = 2
    outputs, errors, _core = resume(plan, snap)
    assert outputs == []  # never "eu:apple" handed to the us call
    [err] = errors
    assert err.error_type == "ReplayDivergenceError"
    assert "r0/go/c0" in err.message and "those recorded for r0/go/c1" in err.message
    assert probes["price:eu:apple"] == probes["price:us:apple"] == 1


def test_the_same_order_replays_quietly(probes, caplog):
    plan = AgentPlan.from_agent(Prices())
    snap = _snapshot(plan)
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, _core = resume(plan, snap)
    assert errors == [] and outputs == [["eu:apple", "us:apple"]]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


class Plain(BaseModel):
    shop: str = "main"


class Holding(BaseModel):
    _client: Any = PrivateAttr(default=None)


class Client:
    def __init__(self) -> None:
        self.calls = 0


def test_a_model_without_private_attributes_keeps_its_form_and_a_held_client_its_type():
    assert stable_form(Plain()) == {"$model": f"{__name__}:Plain", "data": {"shop": "main"}}
    held = Holding()
    held._client = Client()
    before = stable_form(held)
    held._client.calls += 1  # a client's state changes as it is used: not counted
    assert stable_form(held) == before
    assert before["$private"] == {"_client": {"$type": f"{__name__}:Client"}}
