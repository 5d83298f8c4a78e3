"""A ``functools.partial`` whose arguments are given otherwise after an upgrade.

A plain call's arguments count by the parameters they bind to (``price("apple")`` and
``price(item="apple")`` are one call); a partial's counted as given, so
``partial(price, "apple")`` recorded and ``partial(price, item="apple")`` replayed was a
false ``arguments changed`` (a divergence in strict mode). The record's digest is the
same as before; the replay finds the form the record was written in.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.testing import check_upgrade_safety

pytestmark = pytest.mark.timeout(120)

P = functools.partial


def price(item: str, qty: int = 1, *, currency: str = "USD") -> str:
    return f"{qty} {item} in {currency}"


def only_positional(item: str, qty: int = 1, /) -> str:
    return f"{qty} {item}"


Calls = Callable[[RunnerContext], Awaitable[Any]]


def _agent(make: Callable[[RunnerContext], list[Awaitable[Any]]]) -> Agent:
    class Strict(Agent):
        replay = "strict"

        @action(InputEvent)
        @staticmethod
        async def go(event: InputEvent, ctx: RunnerContext) -> None:
            got = [await c for c in make(ctx)]
            got.append(await ctx.durable_execute_async(price, "end"))  # a point after each
            ctx.send_event(OutputEvent(output=got))

    return Strict()


def _check(
    old: Callable[[RunnerContext], list[Awaitable[Any]]],
    new: Callable[[RunnerContext], list[Awaitable[Any]]],
) -> Any:
    return check_upgrade_safety(
        _agent(old), _agent(new), [{"key": "a"}, {"key": "b"}], other_process=False
    )


def _one(fn: Any, *args: Any, **kwargs: Any) -> Callable[[RunnerContext], list[Awaitable[Any]]]:
    return lambda ctx: [ctx.durable_execute_async(fn, *args, **kwargs)]


SAME = [
    ("positional recorded, keyword now", _one(P(price, "apple")), _one(P(price, item="apple"))),
    ("keyword recorded, positional now", _one(P(price, item="apple")), _one(P(price, "apple"))),
    ("both in the partial", _one(P(price, "apple", 2)), _one(P(price, qty=2, item="apple"))),
    ("mixed", _one(P(price, "apple", qty=2)), _one(P(price, "apple", 2))),
    ("the call's own too", _one(P(price, "apple"), 2), _one(P(price, item="apple"), qty=2)),
    ("nested partials", _one(P(P(price, "apple"), qty=2)), _one(P(price, item="apple", qty=2))),
    ("plain recorded, a partial now", _one(price, "apple", 2), _one(P(price, item="apple"), qty=2)),
    ("a partial recorded, plain now", _one(P(price, "apple"), qty=2), _one(price, "apple", 2)),
    (
        "a keyword-only one bound",
        _one(P(price, currency="EUR"), "apple"),
        _one(price, item="apple", currency="EUR"),
    ),
    (
        "keyword-only kept",
        _one(P(price, "apple", currency="EUR")),
        _one(P(price, item="apple", currency="EUR")),
    ),
]


@pytest.mark.parametrize(("old", "new"), [c[1:] for c in SAME], ids=[c[0] for c in SAME])
def test_the_same_values_on_the_same_parameters_replay_quietly(old, new):
    report = _check(old, new)
    report.assert_ok()
    assert report.divergences == 0


CHANGED = [
    ("another value", _one(P(price, "apple")), _one(P(price, item="pear"))),
    ("another parameter", _one(P(price, "apple", 2)), _one(P(price, "apple", currency="2"))),
    (
        "a value moved into the partial's other parameter",
        _one(P(price, "apple"), 2),
        _one(P(price, qty="apple"), item=2),
    ),
]


@pytest.mark.parametrize(("old", "new"), [c[1:] for c in CHANGED], ids=[c[0] for c in CHANGED])
def test_other_values_still_diverge_in_strict_mode(old, new):
    report = _check(old, new)
    assert report.divergences > 0, report.table


def test_reordered_partials_written_otherwise_are_a_reordering():
    """Each form is matched to the record written in it: ``item="pear"`` first is the
    call recorded second, not a changed first call handed apple's price."""

    def old(ctx):
        return [
            ctx.durable_execute_async(P(price, "apple")),
            ctx.durable_execute_async(P(price, "pear")),
        ]

    def new(ctx):
        return [
            ctx.durable_execute_async(P(price, item="pear")),
            ctx.durable_execute_async(P(price, item="apple")),
        ]

    report = _check(old, new)
    assert report.divergences > 0
    assert "its arguments are those recorded for" in report.table


def test_a_positional_only_parameter_is_given_by_position_only():
    """Its value moves between the partial and the call by position alone."""
    report = _check(_one(P(only_positional, "apple", 2)), _one(P(only_positional, "apple"), 2))
    report.assert_ok()
    report = _check(_one(P(only_positional, "apple", 2)), _one(P(only_positional, "apple"), 3))
    assert report.divergences > 0


def test_plain_calls_reordered_in_keyword_form_are_a_reordering():
    """``[price("apple"), price("pear")]`` recorded, ``[price(item="pear"),
    price(item="apple")]`` replayed: before, the first was handed apple's price with an
    ``arguments changed`` warning (its digest was no record's)."""

    def old(ctx):
        return [ctx.durable_execute_async(price, "apple"), ctx.durable_execute_async(price, "pear")]

    def new(ctx):
        return [
            ctx.durable_execute_async(price, item="pear"),
            ctx.durable_execute_async(price, item="apple"),
        ]

    agent_old, agent_new = _agent(old), _agent(new)
    agent_old.replay = agent_new.replay = "lenient"
    report = check_upgrade_safety(agent_old, agent_new, [{"key": "a"}], other_process=False)
    assert report.divergences > 0, report.table
    assert "its arguments are those recorded for" in report.table


USER_MODULE = """
import functools
import sys

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.testing import check_upgrade_safety


def price(item, qty=1, *, currency="USD"):
    return f"{qty} {item} in {currency}"


class Old(Agent):
    replay = "strict"

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        one = await ctx.durable_execute_async(functools.partial(price, event.input["item"]), 2)
        two = await ctx.durable_execute_async(price, "pear", currency="EUR")
        ctx.send_event(OutputEvent(output=[one, two]))


class New(Agent):
    replay = "strict"

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        one = await ctx.durable_execute_async(
            functools.partial(price, item=event.input["item"]), qty=2)
        two = await ctx.durable_execute_async(functools.partial(price, currency="EUR"), "pear")
        ctx.send_event(OutputEvent(output=[one, two]))


if __name__ == "__main__":
    records = [{"key": k, "item": k} for k in ("apple", "fig", "kiwi")]
    report = check_upgrade_safety(Old(), New(), records)
    print(report.table)
    sys.exit(0 if report.ok else 1)
"""


def test_a_users_module_upgraded_to_keyword_partials(tmp_path):
    """From a user's own folder; restores in other processes (other hash seeds) too."""
    import os
    import pathlib
    import subprocess
    import sys

    (tmp_path / "my_prices.py").write_text(USER_MODULE)
    root = pathlib.Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, "my_prices.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "divergences                 0" in proc.stdout
