"""Neighbours of fixed replay defects: what a durable call's function runs, what a failure holds.

- A durable call's function made nested durable calls as part of its own call only when it
  was ``async`` itself or ran in a worker thread; an awaitable that a plain callable gave
  back (``lambda: basket()`` of an ``async`` function, an object with an ``async
  __call__``, a ``functools.wraps`` decorator's plain wrapper) was awaited outside the
  call. A durable call made there took a call identity of the action from the executor's
  thread (a replay, which does not run the function, never takes it again) and its await
  failed with ``Task got bad yield``; an event sent there was not refused.
- A recorded failure whose ``args`` hold a tuple (``KeyError(("apple", "eu"))``: a dict's
  tuple key not found) was rebuilt with a list there, then from its message: after a
  restore ``e.args[0]`` was the text ``"('apple', 'eu')"`` and ``str(e)`` quoted it again.
- How a call's arguments bind to its parameters counted its enum members' classes in the
  order its keywords (or a dict's entries) were written, so the same call written in
  another order had "the recorded values bound to other parameters" and diverged.
"""

from __future__ import annotations

import enum
import functools
import json
import logging
from typing import Any

import pytest
from support.harness import KEY, call_of, drive_until, new_core, resume, snapshot_of
from support.probes import count, gate

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, UsageError, action
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState
from flink_agents_py.runtime.recorder._outcomes import rebuild_exception, store_outcome
from flink_agents_py.runtime.recorder._state import CallRecord
from flink_agents_py.testing import CallCounter, check_replay_safety

pytestmark = pytest.mark.timeout(120)

CALLS = CallCounter()
RECORDS = [{"key": "a"}, {"key": "b"}]


def price(item: str) -> int:
    CALLS.count(f"price {item}")
    return len(item)


class AsyncBasket:
    """A callable object whose ``__call__`` is ``async`` (not a coroutine function itself)."""

    def __init__(self, ctx: RunnerContext, items: tuple[str, ...]) -> None:
        self.ctx = ctx
        self.items = items

    async def __call__(self) -> int:
        CALLS.count("object")
        total = 0
        for item in self.items:
            total += await self.ctx.durable_execute_async(price, item)
        return total + self.ctx.durable_execute(price, "fig")


def plain_wrapper(fn: Any) -> Any:
    """A decorator whose wrapper is a plain function returning the coroutine of ``fn``."""

    @functools.wraps(fn)
    def wrapper(*args: Any) -> Any:
        return fn(*args)

    return wrapper


class Baskets(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        async def basket(first: str) -> int:
            CALLS.count("basket")
            return (await ctx.durable_execute_async(price, first)
                    + ctx.durable_execute(price, "plum"))

        async def shout() -> str:
            try:
                ctx.send_event(OutputEvent(output={"key": ctx.key, "from": "inside"}))
            except UsageError as e:
                return str(e)
            return "sent"

        got = [await ctx.durable_execute_async(lambda: basket("lime")),         # c0
               await ctx.durable_execute_async(AsyncBasket(ctx, ("kiwi", "date"))),  # c1
               await ctx.durable_execute_async(plain_wrapper(basket), "pear"),  # c2
               await ctx.durable_execute_async(price, "apple")]                 # c3
        refused = await ctx.durable_execute_async(lambda: shout())               # c4
        ctx.send_event(OutputEvent(output={"key": ctx.key, "got": got, "refused": refused}))


def test_an_awaitable_a_plain_callable_gives_back_runs_inside_its_durable_call():
    CALLS.reset()
    result = AgentsExecutionEnvironment.local().from_list(RECORDS).apply(Baskets()).run()
    assert [e.message for e in result.errors] == []
    [a, b] = sorted(result.outputs, key=lambda o: o["key"])
    assert a["got"] == b["got"] == [8, 11, 8, 5]
    assert a["refused"].startswith("ctx.send_event called inside the function of a durable call")
    calls = CALLS.as_dict()
    assert calls["basket"] == 4 and calls["object"] == 2 and calls["price fig"] == 2
    report = check_replay_safety(Baskets(), RECORDS, reset=CALLS.reset, other_process=False)
    assert report.ok, report.table


# -- a recorded failure holding a tuple ---------------------------------------------------------
PRICES = {("apple", "eu"): 3}


def price_in(item: str, region: str) -> int:
    return PRICES[(item, region)]


class Refusal(Exception):
    """An exception holding a tuple beside its text."""


def refuse(item: str) -> None:
    raise Refusal("no price", (item, ["eu", ("us", 2)]))


class Lookups(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        seen = []
        for fn, args in ((price_in, ("pear", "us")), (refuse, ("fig",))):
            try:
                await ctx.durable_execute_async(fn, *args)
            except (KeyError, Refusal) as e:
                seen.append([type(e).__name__, str(e), repr(e.args)])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "seen": seen}))


@pytest.mark.parametrize("error", [
    KeyError(("apple", "eu")), KeyError((1, ("a", 2))), ValueError("bad", (1, 2)),
    Refusal("no price", ("fig", ["eu", ("us", 2)])), KeyError(["a", "b"]),
])
def test_a_failure_holding_a_tuple_is_rebuilt_as_it_was_raised(error):
    rec = CallRecord(digest="")
    ok, live = store_outcome(rec, "r0/go/c0", False, error)
    assert not ok and live is error
    stored = CallRecord.model_validate(json.loads(json.dumps(rec.model_dump(mode="json"))))
    again = rebuild_exception(stored)
    assert type(again) is type(error)
    assert str(again) == str(error)
    assert repr(again.args) == repr(error.args)


def test_a_failure_holding_a_tuple_is_the_same_live_and_at_every_crash_point():
    result = AgentsExecutionEnvironment.local().from_list(RECORDS).apply(Lookups()).run()
    assert result.errors == []
    assert result.outputs[0]["seen"] == [
        ["KeyError", "('pear', 'us')", "(('pear', 'us'),)"],
        ["Refusal", "('no price', ('fig', ['eu', ('us', 2)]))",
         "('no price', ('fig', ['eu', ('us', 2)]))"]]
    report = check_replay_safety(Lookups(), RECORDS, other_process=False)
    assert report.ok, report.table


# -- keywords given in another order, with enum members -----------------------------------------
class Coin(enum.Enum):
    EUR = 1


class Unit(enum.Enum):
    CENT = 1


def quote(spec: Any = None, base: Any = None, unit: Any = None) -> str:
    count(f"quote:{spec}:{base}:{unit}")
    return f"quoted {spec or ''}{base or ''}{unit or ''}"


def slow(tag: str) -> str:
    assert gate().wait(10), "gate never opened"
    return tag


def _quote_call(form: str, ctx: RunnerContext) -> Any:
    if form == "keywords":
        return ctx.durable_execute_async(quote, base=Coin.EUR, unit=Unit.CENT)
    if form == "keywords_reordered":
        return ctx.durable_execute_async(quote, unit=Unit.CENT, base=Coin.EUR)
    if form == "dict":
        return ctx.durable_execute_async(quote, {"base": Coin.EUR, "unit": Unit.CENT})
    if form == "dict_reordered":
        return ctx.durable_execute_async(quote, {"unit": Unit.CENT, "base": Coin.EUR})
    assert form == "keywords_swapped"
    return ctx.durable_execute_async(quote, base=Unit.CENT, unit=Coin.EUR)


class Quotes(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        got = await _quote_call(QUOTED["form"], ctx)
        await ctx.durable_execute_async(slow, "end")
        ctx.send_event(OutputEvent(output=got))


class StrictQuotes(Quotes):
    replay = "strict"


QUOTED: dict[str, str] = {"form": "keywords"}


def _resumed(agent: Agent, recorded: str, redeployed: str) -> tuple[list[Any], list[Any]]:
    plan = AgentPlan.from_agent(agent)
    QUOTED["form"] = recorded
    core = new_core(plan)
    try:
        state = InMemoryKeyState()
        core.on_input(KEY, {"key": KEY}, state)
        drive_until(core, state, quiet=True, done=lambda s: (
            (c := call_of(s, "go", 1)) is not None and not c.done))
        snap = snapshot_of(state, "json")
    finally:
        gate().set()
        core.close()
    QUOTED["form"] = redeployed
    outputs, errors, _core = resume(plan, snap)
    return outputs, errors


@pytest.mark.parametrize("agent", [Quotes, StrictQuotes], ids=["lenient", "strict"])
@pytest.mark.parametrize(("recorded", "redeployed"), [
    ("keywords", "keywords_reordered"), ("keywords_reordered", "keywords"),
    ("dict", "dict_reordered"), ("dict_reordered", "dict")])
def test_enum_arguments_given_in_another_order_replay_quietly(
        agent, recorded, redeployed, probes, caplog):
    # the binding of a call's arguments counted its enum members' classes in the order the
    # keywords (or a dict's entries) were written: the same call, written otherwise, had the
    # recorded values "bound to other parameters" and diverged, even in lenient mode
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors = _resumed(agent(), recorded, redeployed)
    assert errors == [] and len(outputs) == 1
    assert not [r for r in caplog.records if "arguments changed" in r.getMessage()]


def test_enum_arguments_swapped_between_keywords_still_diverge(probes):
    outputs, errors = _resumed(Quotes(), "keywords", "keywords_swapped")
    assert outputs == []
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and "bound to other parameters" in err.message


def grade_all(grades: dict[str, Any], item: str) -> str:
    count(f"grade_all:{item}")
    return f"graded {item}"


class BoundGrades(Agent):
    replay = "strict"

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        grades = {"coin": Coin.EUR, "unit": Unit.CENT}
        if QUOTED["form"] == "dict_reordered":  # built in another order (a set's, elsewhere)
            grades = {"unit": Unit.CENT, "coin": Coin.EUR}
        got = await ctx.durable_execute_async(functools.partial(grade_all, grades), "apple")
        await ctx.durable_execute_async(slow, "end")
        ctx.send_event(OutputEvent(output=got))


def test_a_bound_dict_of_enum_members_built_in_another_order_replays_in_strict_mode(probes):
    # a dict a partial binds counted its enum members' classes in insertion order: the
    # same call, its dict built in another order, was a strict divergence
    outputs, errors = _resumed(BoundGrades(), "dict", "dict_reordered")
    assert errors == [] and outputs == ["graded apple"]
    assert probes["grade_all:apple"] == 1
