"""An upgrade that changes the order of a durable call's arguments.

``convert("USD", "EUR")`` redeployed as ``convert("EUR", "USD")`` has the recorded values,
bound to other parameters: the recorded outcome is another call's, and the replay diverges
(before, it was handed over with an ``arguments changed`` warning). Changes that keep each
value on its parameter replay quietly: a positional argument passed by keyword, and the
function's parameters reordered together with the call (core-level restores).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from support.harness import KEY, call_of, drive_until, new_core, resume, snapshot_of
from support.probes import count, gate

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState
from flink_agents_py.testing import check_upgrade_safety

pytestmark = pytest.mark.timeout(60)

DEPLOYED: dict[str, Any] = {"form": "recorded"}


@pytest.fixture(autouse=True)
def _old_code():
    DEPLOYED.update(form="recorded")


def convert(source: str, target: str, amount: int = 1) -> str:
    count(f"convert:{source}->{target}")
    return f"{amount} {source} in {target}"


def convert_moved(target: str, source: str, amount: int = 1) -> str:
    """``convert`` redeployed with its first two parameters swapped."""
    return convert(source, target, amount)


convert_moved.__qualname__ = convert_moved.__name__ = "convert"  # the same function, new code


def gated(tag: str) -> str:
    count(f"gated:{tag}")
    assert gate().wait(10), "gate never opened"
    return tag


class Exchange(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        form = DEPLOYED["form"]
        if form == "swapped":
            got = await ctx.durable_execute_async(convert, "EUR", "USD", 100)
        elif form == "keywords":
            got = await ctx.durable_execute_async(convert, "USD", amount=100, target="EUR")
        elif form == "parameters_moved":
            got = await ctx.durable_execute_async(convert_moved, "EUR", "USD", 100)
        elif form == "amount_swapped_into_a_keyword":
            got = await ctx.durable_execute_async(convert, "USD", "EUR", amount=100)
        else:
            got = await ctx.durable_execute_async(convert, "USD", "EUR", 100)
        await ctx.durable_execute_async(gated, "end")
        ctx.send_event(OutputEvent(output=got))


def _snapshot(plan: AgentPlan) -> InMemoryKeyState:
    core = new_core(plan)
    try:
        state = InMemoryKeyState()
        res = core.on_input(KEY, {"key": KEY}, state)
        assert res.errors == [] and res.outputs == []
        drive_until(core, state, quiet=True, done=lambda s: (
            (c := call_of(s, "go", 1)) is not None and not c.done))
        return snapshot_of(state, "json")
    finally:
        gate().set()
        core.close()


@pytest.mark.parametrize("strict", [False, True], ids=["lenient", "strict"])
def test_swapped_arguments_diverge_instead_of_replaying_the_other_conversion(strict, probes):
    agent = Exchange()
    if strict:
        agent.replay = "strict"
    plan = AgentPlan.from_agent(agent)
    snap = _snapshot(plan)
    DEPLOYED["form"] = "swapped"
    outputs, errors, _core = resume(plan, snap)
    assert outputs == []  # never "100 USD in EUR" as the EUR -> USD conversion
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and "r0/go/c0" in err.message
    assert "bound to other parameters" in err.message and "convert" in err.message
    assert probes["convert:EUR->USD"] == 0 and probes["convert:USD->EUR"] == 1


@pytest.mark.parametrize("form", ["keywords", "parameters_moved", "amount_swapped_into_a_keyword"])
def test_each_value_on_its_parameter_replays_quietly(form, probes, caplog):
    plan = AgentPlan.from_agent(Exchange())
    snap = _snapshot(plan)
    DEPLOYED["form"] = form
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, _core = resume(plan, snap)
    assert errors == [] and outputs == ["100 USD in EUR"]
    assert not [r for r in caplog.records if "arguments changed" in r.getMessage()]
    assert probes["convert:USD->EUR"] == 1


class ByPosition(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        got = await ctx.durable_execute_async(convert_fast, "USD", "EUR")
        await ctx.durable_execute_async(convert_fast, "JPY", "GBP")  # c0 replays
        ctx.send_event(OutputEvent(output=got))


class ByKeyword(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        got = await ctx.durable_execute_async(convert_fast, "USD", target="EUR")
        await ctx.durable_execute_async(convert_fast, "JPY", "GBP")  # c0 replays
        ctx.send_event(OutputEvent(output=got))


class Swapped(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        got = await ctx.durable_execute_async(convert_fast, "EUR", "USD")
        await ctx.durable_execute_async(convert_fast, "JPY", "GBP")  # c0 replays
        ctx.send_event(OutputEvent(output=got))


def convert_fast(source: str, target: str) -> str:
    return f"{source} in {target}"


def test_the_upgrade_checker_agrees_with_the_runtime_on_what_changed():
    """A positional argument passed by keyword is the same call (no finding); swapped
    arguments are a divergence."""
    records = [{"key": "a"}, {"key": "b"}]
    check_upgrade_safety(ByPosition(), ByKeyword(), records, other_process=False).assert_ok()
    swapped = check_upgrade_safety(ByPosition(), Swapped(), records, other_process=False)
    assert swapped.divergences > 0
    assert "bound to other parameters" in swapped.table
