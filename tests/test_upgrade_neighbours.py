"""New code deployed while runs are in flight: what a restored run's neighbours (its event's
class, its action's triggers, the stored state of its key) may have become.

A key's run is snapshotted mid-action through its JSON form (``support.harness``), the code is
"redeployed" (the event type's class swapped in the event registry, as a new process would
have it, or another agent), and the snapshot resumes on a new ``AgentCore``. The rule: the
run replays right, or fails alone and loudly (a ``ReplayDivergenceError`` on the error output
with its key, naming what changed); the job goes on, and so do other keys.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.harness import (
    KEY,
    call_of,
    drive_until,
    new_core,
    run_to_end,
    snapshot_of,
)
from support.probes import count, gate

import flink_agents_py.api._events as events_module
from flink_agents_py.api import Agent, Event, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState

pytestmark = pytest.mark.timeout(60)


# -- fakes ---------------------------------------------------------------------------------
def price(item: str) -> str:
    count(f"price:{item}")
    return f"PRICE({item})"


def gated(tag: str) -> str:
    count("gated")
    assert gate().wait(10), "gate never opened"
    return tag


class StepV1(Event):
    """The event as the old code had it."""

    EVENT_TYPE = "UpgradeStep"
    item: str


class StepOptional(Event):
    """A compatible change: a new field with a default."""

    EVENT_TYPE = "UpgradeStep"
    item: str
    qty: int = 1


class StepRequired(Event):
    """A new required field."""

    EVENT_TYPE = "UpgradeStep"
    item: str
    qty: int


class StepRenamed(Event):
    """``item`` renamed ``sku``."""

    EVENT_TYPE = "UpgradeStep"
    sku: str


class StepRetyped(Event):
    """``item`` now an ``int``."""

    EVENT_TYPE = "UpgradeStep"
    item: int


class Other(Event):
    """Another event type, that the new code's action is triggered by instead."""

    EVENT_TYPE = "UpgradeOther"
    item: str = ""


def _work_body():
    async def work(event: Event, ctx: RunnerContext) -> None:
        got = await ctx.durable_execute_async(price, event.get_attr("item"))
        await ctx.durable_execute_async(gated, "g")
        ctx.send_event(OutputEvent(output=[got, event.get_attr("qty")]))
    return work


class Shop(Agent):
    """The input sends an ``UpgradeStep``; ``work`` prices its item, then waits on the gate."""

    @action(InputEvent)
    @staticmethod
    def start(event: InputEvent, ctx: RunnerContext) -> None:
        cls = events_module.event_class_for("UpgradeStep")  # the class deployed
        ctx.send_event(cls.model_validate(event.input["fields"]))

    work = action(StepV1)(staticmethod(_work_body()))


class ShopOnOther(Agent):
    """``work`` is now triggered by ``UpgradeOther`` only."""

    @action(InputEvent)
    @staticmethod
    def start(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(Other.model_validate(event.input["fields"]))

    work = action(Other)(staticmethod(_work_body()))


@pytest.fixture
def deployed(monkeypatch) -> Iterator[Any]:
    """``deployed(cls)``: the class a new process would rebuild ``UpgradeStep`` events as
    (``None``: no class of that type, e.g. it was renamed)."""

    def deploy(cls: type[Event] | None) -> None:
        if cls is None:
            monkeypatch.delitem(events_module._REGISTRY, "UpgradeStep", raising=False)
        else:
            monkeypatch.setitem(events_module._REGISTRY, "UpgradeStep", cls)

    deploy(StepV1)
    yield deploy


def snapshot_in_work() -> InMemoryKeyState:
    """Run one record until ``work`` has priced its item and waits on the gate; the key's
    state there, through its JSON form."""
    core = new_core(AgentPlan.from_agent(Shop()))
    try:
        state = InMemoryKeyState()
        res = core.on_input(KEY, {"key": KEY, "fields": {"item": "apple"}}, state)
        assert res.errors == [] and res.outputs == []
        drive_until(core, state, quiet=True, done=lambda s: (
            (c := call_of(s, "work", 1)) is not None and not c.done))
        return snapshot_of(state, "json")
    finally:
        gate().set()
        core.close()


def resume_with_neighbour(agent: Agent, snap: InMemoryKeyState,
                          fields: dict[str, Any] | None = None
                          ) -> tuple[list[Any], list[Any], list[Any], list[Any], Any]:
    """Resume ``snap`` on a new core of ``agent``, then run another key there (its event's
    ``fields``, as the new code builds it); the restored key's outputs and errors, the other
    key's, and the core."""
    new = new_core(AgentPlan.from_agent(agent))
    try:
        outputs, errors = run_to_end(new, snap)
        other = InMemoryKeyState()
        new.on_input("other", {"key": "other", "fields": fields or {"item": "pear"}}, other)
        more, more_errors = run_to_end(new, other, key="other")
    finally:
        new.close()
    return outputs, errors, more, more_errors, new


# -- an in-flight event the new code cannot rebuild -----------------------------------------
def test_a_compatible_change_to_an_in_flight_event_replays_its_recorded_calls(deployed, probes):
    """A new optional field: the restored ``work`` gets the recorded event (the default for
    the new field), the recorded price is handed back, not fetched again."""
    snap = snapshot_in_work()
    assert probes["price:apple"] == 1
    deployed(StepOptional)
    outputs, errors, _, _, new = resume_with_neighbour(Shop(), snap)
    assert errors == []
    assert outputs == [["PRICE(apple)", 1]]
    assert probes["price:apple"] == 1
    assert new.counters["replay_divergences"] == 0


@pytest.mark.parametrize(("new_class", "what", "fields"), [
    (StepRequired, "qty", {"item": "pear", "qty": 2}),
    (StepRenamed, "sku", {"sku": "pear"}),
    (StepRetyped, "item", {"item": 7}),
    (None, "item", {"item": "pear"}),  # the class renamed: no class of the recorded type
], ids=["required-field-added", "field-renamed", "field-retyped", "class-gone"])
def test_an_in_flight_event_the_new_code_cannot_rebuild_fails_its_key_alone(
        new_class, what, fields, deployed, probes):
    """Recorded with ``StepV1``, restored where ``UpgradeStep`` no longer validates: the
    key's run fails with a divergence naming the key, the action, the event type and the
    field, nothing runs again; the core keeps going and another key completes (it used to
    be a ``ValidationError`` out of ``advance``: the whole job failed, every restart again)."""
    snap = snapshot_in_work()
    deployed(new_class)
    new_agent = Shop() if new_class is not None else ShopOnOther()
    outputs, errors, more, more_errors, new = resume_with_neighbour(new_agent, snap, fields)
    assert outputs == []
    [err] = errors
    assert err.error_type == "ReplayDivergenceError"
    assert (err.key, err.seq, err.action) == (KEY, 0, "work")
    assert "'UpgradeStep'" in err.message and "cannot rebuild" in err.message
    assert what in err.message and "For further information" not in err.message
    assert "optional" in err.message  # the fix
    assert probes["price:apple"] == 1 and probes["gated"] == 1  # nothing ran again
    assert new.counters["replay_divergences"] == 1
    assert more_errors == [] and len(more) == 1
    assert snap.run is None  # the key is idle again: its later inputs run


def test_an_in_flight_action_no_longer_triggered_by_its_event_fails_naming_both_types(
        deployed, probes):
    """``work`` now handles ``UpgradeOther`` only: re-entering it with the recorded
    ``UpgradeStep`` would hand it an event it no longer expects. The run fails naming both
    types and the fix; nothing runs again; another key completes."""
    snap = snapshot_in_work()
    outputs, errors, more, more_errors, _ = resume_with_neighbour(ShopOnOther(), snap)
    assert outputs == []
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and err.key == KEY
    assert "triggered by 'UpgradeOther', not 'UpgradeStep'" in err.message
    assert probes["price:apple"] == 1 and probes["gated"] == 1
    assert more_errors == [] and more == [["PRICE(pear)", None]]


def test_an_action_still_triggered_by_the_recorded_type_replays(deployed, probes):
    """Triggers that keep the recorded type (``@action(StepV1, Other)``) replay quietly."""

    class Both(Shop):
        work = action(StepV1, Other)(staticmethod(_work_body()))

    snap = snapshot_in_work()
    outputs, errors, *_ = resume_with_neighbour(Both(), snap)
    assert errors == [] and outputs == [["PRICE(apple)", None]]
    assert probes["price:apple"] == 1
