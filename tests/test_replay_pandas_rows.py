"""pandas rows bound by a durable call's callable count by their values.

A ``Series`` (a row made from a record, ``pd.Series(record)``; a column) keeps its data in a manager
object that the walk of its attributes counted by its type alone, so ``lambda row=row:
classify(row)`` had one digest for every row, and rows made in another order after a
restore were each handed another row's recorded outcome. Core-level restores, as in
``test_replay_stdlib_holders``.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import pytest
from support.harness import KEY, call_of, drive_until, new_core, resume, snapshot_of
from support.probes import count, gate

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState
from flink_agents_py.runtime.recorder._outcomes import call_digest

pd = pytest.importorskip("pandas")

pytestmark = pytest.mark.timeout(60)

ORDER: dict[str, Any] = {"reverse": False}


@pytest.fixture(autouse=True)
def _first_deploy():
    ORDER["reverse"] = False


def classify(row: Any) -> str:
    count(f"classify:{row['item']}")
    return f"CLASS({row['item']})"


def hold() -> str:
    assert gate().wait(10), "gate never opened"
    return "held"


RECORDS = [{"item": "apple", "qty": 1}, {"item": "pear", "qty": 2}]

FORMS: dict[str, Any] = {
    "lambda_default": lambda row: lambda row=row: classify(row),
    "partial": lambda row: functools.partial(classify, row),
}


class Rows(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        rows = [pd.Series(record) for record in RECORDS]  # unnamed rows, from JSON records
        if ORDER["reverse"]:
            rows.reverse()
        make = FORMS[event.input["form"]]
        got = [await ctx.durable_execute_async(make(row)) for row in rows]
        await ctx.durable_execute_async(hold)
        ctx.send_event(OutputEvent(output=got))


def _snapshot(form: str) -> tuple[AgentPlan, InMemoryKeyState]:
    plan = AgentPlan.from_agent(Rows())
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


def test_rows_with_other_values_have_other_digests_and_equal_rows_one():
    def digest_of(row: Any) -> str:
        return call_digest(functools.partial(classify, row), (), {}, "r0/go/c0")

    apple, pear = (pd.Series(r) for r in RECORDS)
    assert digest_of(apple) != digest_of(pear)
    assert digest_of(apple) == digest_of(pd.Series(RECORDS[0]))
    assert digest_of(pd.Series([1, 2])) != digest_of(pd.Series([1, 3]))
    assert digest_of(pd.Series([1, 2], index=["a", "b"])) != digest_of(
        pd.Series([1, 2], index=["b", "a"])
    )
    assert digest_of(pd.Index(["apple"])) != digest_of(pd.Index(["pear"]))


@pytest.mark.parametrize("form", sorted(FORMS))
def test_rows_made_in_another_order_after_a_restore_diverge(form, probes):
    plan, snap = _snapshot(form)
    ORDER["reverse"] = True
    outputs, errors, _core = resume(plan, snap)
    assert outputs == []
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and "r0/go/c0" in err.message
    assert "arguments are those recorded for r0/go/c1" in err.message
    assert (probes["classify:apple"], probes["classify:pear"]) == (1, 1)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_rows_in_the_same_order_replay_quietly(form, probes, caplog):
    plan, snap = _snapshot(form)
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, _core = resume(plan, snap)
    assert errors == [] and outputs == [["CLASS(apple)", "CLASS(pear)"]]
    assert not [r for r in caplog.records if "arguments changed" in r.getMessage()]
