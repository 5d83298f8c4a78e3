"""New code deployed while runs are in flight: what a restored run's neighbours (its event's
class, its action's triggers, the stored state of its key) may have become.

A key's run is snapshotted mid-action through its JSON form (``support.harness``), the code is
"redeployed" (the event type's class swapped in the event registry, as a new process would
have it, or another agent), and the snapshot resumes on a new ``AgentCore``. The rule: the
run replays right, or fails alone and loudly (a ``ReplayDivergenceError`` on the error output
with its key, naming what changed); the job goes on, and so do other keys.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel
from support.flink_state import RUN, FlinkKeyedState
from support.harness import (
    KEY,
    call_of,
    drive_until,
    new_core,
    resume,
    run_to_end,
    snapshot_of,
)
from support.probes import count, current, gate
from support.waiting import wait_until

import flink_agents_py.api._events as events_module
import flink_agents_py.runtime._serde as serde
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    Event,
    InputEvent,
    InternalSubagent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState, StateFormatError

pytestmark = pytest.mark.timeout(60)


# -- fakes ---------------------------------------------------------------------------------
def price(item: str) -> str:
    count(f"price:{item}")
    return f"PRICE({item})"


def gated(tag: str) -> str:
    count(f"gated:{tag}")
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
        await ctx.durable_execute_async(gated, event.get_attr("item"))
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
        wait_until("the gated call runs", lambda: current()["gated:apple"] == 1)
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
        first = new.on_input("other", {"key": "other", "fields": fields or {"item": "pear"}},
                             other)
        more, more_errors = run_to_end(new, other, key="other")
        more[:0], more_errors[:0] = first.outputs, first.errors
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
    assert probes["price:apple"] == 1 and probes["gated:apple"] == 1  # nothing ran again
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
    assert probes["price:apple"] == 1 and probes["gated:apple"] == 1
    assert more_errors == [] and more == [["PRICE(pear)", None]]


def test_an_action_still_triggered_by_the_recorded_type_replays(deployed, probes):
    """Triggers that keep the recorded type (``@action(StepV1, Other)``) replay quietly."""

    class Both(Shop):
        work = action(StepV1, Other)(staticmethod(_work_body()))

    snap = snapshot_in_work()
    outputs, errors, *_ = resume_with_neighbour(Both(), snap)
    assert errors == [] and outputs == [["PRICE(apple)", None]]
    assert probes["price:apple"] == 1


# -- a key whose stored run is damaged -------------------------------------------------------
def _flink_state_in_work() -> FlinkKeyedState:
    """Key ``KEY``'s keyed state, as the Flink operator stores it, with ``work`` waiting on
    the gate for its first input and a second input queued behind it."""
    held = FlinkKeyedState()
    core = new_core(AgentPlan.from_agent(Shop()))
    try:
        res = core.on_input(KEY, {"key": KEY, "fields": {"item": "apple"}}, held.key_state())
        assert res.errors == []
        res = core.on_input(KEY, {"key": KEY, "fields": {"item": "fig"}}, held.key_state())
        assert res.errors == []
        while "gated" not in (held.store.get(RUN) or ""):  # its record: started
            assert core.wait_for(KEY, 10), "no I/O completed for the key"
            assert core.advance(KEY, held.key_state()).errors == []
        return FlinkKeyedState(json.loads(json.dumps(held.dump())))
    finally:
        gate().set()
        core.close()


def _advance_to_end(core: Any, held: FlinkKeyedState, key: str = KEY
                    ) -> tuple[list[Any], list[Any]]:
    """Advance ``key`` until idle, with a new key state per callback, as the operator does."""
    res = core.advance(key, held.key_state())
    outputs, errors = list(res.outputs), list(res.errors)
    while res.busy:
        assert core.wait_for(key, 10), "no I/O completed for the key"
        res = core.advance(key, held.key_state())
        outputs.extend(res.outputs)
        errors.extend(res.errors)
    return outputs, errors


@pytest.mark.parametrize("damage", ["truncated", "cut-to-its-first-bytes", "field-of-another-type"])
def test_a_damaged_run_in_keyed_state_fails_its_key_alone_and_its_queue_runs(damage, deployed,
                                                                              probes):
    """One key's stored run text truncated or corrupted (it used to raise out of the
    operator's callback: the job failed at every restart, every key stalled): that run is
    reported on the error output with its key and what is wrong, and dropped; the input
    queued behind it runs; another key completes."""
    held = _flink_state_in_work()
    text = held.store[RUN]
    held.store[RUN] = {"truncated": text[: len(text) // 2],
                       "cut-to-its-first-bytes": text[:3],
                       "field-of-another-type": text.replace('"action":"work"', '"action":7'),
                       }[damage]
    assert held.store[RUN] != text
    new = new_core(AgentPlan.from_agent(Shop()))
    try:
        outputs, errors = _advance_to_end(new, held)
        other = FlinkKeyedState()
        res = new.on_input("other", {"key": "other", "fields": {"item": "pear"}},
                           other.key_state())
        more, more_errors = _advance_to_end(new, other, "other")
        more[:0], more_errors[:0] = res.outputs, res.errors
    finally:
        new.close()
    [err] = errors
    assert err.error_type == "StateFormatError" and err.key == KEY
    assert err.action == "<restore>" and f"key {KEY!r}" in err.message
    assert "cannot be read and is dropped" in err.message
    if damage != "cut-to-its-first-bytes":
        assert err.seq == 0 and "(input 0)" in err.message  # where it was, when readable
    assert outputs == [["PRICE(fig)", None]]  # the queued input ran
    assert RUN not in held.store  # the key is idle: nothing damaged left behind
    assert more_errors == [] and more == [["PRICE(pear)", None]]
    assert new.counters["runs_unreadable"] == 1


def test_a_damaged_run_is_reported_when_the_key_gets_a_new_input_first(deployed, probes):
    """The damaged key's next callback is a new input (not a restore's advance): reported
    once, and both the queued input and the new one run, in order."""
    held = _flink_state_in_work()
    held.store[RUN] = held.store[RUN][:40]
    new = new_core(AgentPlan.from_agent(Shop()))
    try:
        res = new.on_input(KEY, {"key": KEY, "fields": {"item": "kiwi"}}, held.key_state())
        outputs, errors = _advance_to_end(new, held)
    finally:
        new.close()
    [err] = res.errors + errors
    assert err.error_type == "StateFormatError" and err.key == KEY
    assert res.outputs + outputs == [["PRICE(fig)", None], ["PRICE(kiwi)", None]]


def test_a_run_of_a_later_format_in_keyed_state_still_fails_the_callback(deployed, probes):
    """Not damaged but written by a later version (a downgrade): every key has such state,
    so dropping runs key by key would lose them all; the callback fails instead."""
    held = _flink_state_in_work()
    held.store[RUN] = held.store[RUN].replace('"v":1}', '"v":99}')
    new = new_core(AgentPlan.from_agent(Shop()))
    try:
        with pytest.raises(StateFormatError, match=r"\b99\b"):
            new.advance(KEY, held.key_state())
    finally:
        new.close()
    assert '"v":99' in held.store[RUN]  # kept as it was, for the later version


def test_a_local_snapshot_with_one_damaged_run_restores_the_other_keys(probes):
    """A local runner snapshot whose run of one key does not fit the format: that key is
    reported and its later input runs; the other key's run in flight completes."""
    records = [{"key": "a", "fields": {"item": "apple"}}, {"key": "b", "fields": {"item": "pear"}},
               {"key": "a", "fields": {"item": "fig"}}]
    env = AgentsExecutionEnvironment.local(max_in_flight=4)
    job = env.from_list(records).apply(SlowShop())
    job.run(max_steps=3)  # the three records in, both runs waiting on the gate
    snap = json.loads(json.dumps(job.snapshot()))
    runs = {e["key"]: e for e in snap["keys"]}
    assert runs["a"]["run"] is not None and runs["b"]["run"] is not None
    runs["a"]["run"]["inflight"] = ["not", "a", "mapping"]
    gate().set()
    again = env.from_list(records).apply(SlowShop()).restore(snap).run()
    [err] = again.errors
    assert err.error_type == "StateFormatError" and err.key == "a" and err.seq == 0
    assert "$.inflight" in err.message
    assert sorted(map(tuple, again.keyed_outputs)) == [("a", "PRICE(fig)"), ("b", "PRICE(pear)")]


class SlowShop(Agent):
    """Prices its item, then waits on the gate."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        got = await ctx.durable_execute_async(price, event.input["fields"]["item"])
        await ctx.durable_execute_async(gated, "g")
        ctx.send_event(OutputEvent(output=got))


@pytest.mark.parametrize("callback", ["timer", "outside-event"])
def test_a_damaged_run_is_reported_when_a_timer_or_an_outside_event_comes_first(
        callback, deployed, probes):
    """A parked run's first callback after the restore may be its timer or an outside event:
    those read the run too, and report the damaged one as an input does (it used to raise)."""
    held = _flink_state_in_work()
    held.store[RUN] = held.store[RUN][:40]
    new = new_core(AgentPlan.from_agent(Shop()))
    try:
        if callback == "timer":
            res = new.on_timers(KEY, 0, held.key_state())
        else:
            res = new.on_outside_event(KEY, {"key": KEY, "correlation_id": "c", "payload": 1},
                                       held.key_state(), "outside event 0")
        outputs, errors = _advance_to_end(new, held)
    finally:
        new.close()
    assert res is not None
    assert res.errors[0].error_type == "StateFormatError" and res.errors[0].key == KEY
    assert [e.error_type for e in res.errors[1:] + errors] == (
        [] if callback == "timer" else ["UnmatchedEventError"])
    assert res.outputs + outputs == [["PRICE(fig)", None]]


# -- an internal sub-agent in flight the new code no longer has ------------------------------
class Kid(Agent):
    """Prices its input's item, then waits on the gate."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        got = await ctx.durable_execute_async(price, event.input["item"])
        await ctx.durable_execute_async(gated, event.input["item"])
        ctx.send_event(OutputEvent(output=got))


def parent(name: str | None, calls: str = "kid") -> Agent:
    """An agent that calls the internal sub-agent ``calls``, registered as ``name``
    (``None``: not registered)."""

    class Parent(Agent):
        @action(InputEvent)
        @staticmethod
        async def ask(event: InputEvent, ctx: RunnerContext) -> None:
            res = await (await ctx.submit_subagent(calls, {"item": event.input["item"]}))
            ctx.send_event(OutputEvent(output=[res.success, res.result]))

    agent = Parent()
    if name is not None:
        agent.add_resource(name, ResourceType.AGENT, ResourceDescriptor(InternalSubagent,
                                                                         agent=Kid))
    return agent


@pytest.mark.parametrize(("new_parent", "calls"), [
    (lambda: parent("kid2", calls="kid2"), "kid2"),  # renamed
    (lambda: parent(None), "kid"),  # removed: the caller's submit is refused
], ids=["renamed", "removed"])
def test_a_restored_call_of_an_internal_subagent_the_new_code_lacks_fails_its_key_alone(
        new_parent, calls, probes):
    """Restored with the sub-agent ``kid``'s action in flight, into code without ``kid``: it
    used to be a ``KeyError`` out of ``advance`` (the job failed at every restart). Now the
    sub-agent's execution fails with a divergence naming the key and ``kid`` (its caller,
    re-entered, diverges too: it calls something else at the recorded call), nothing runs
    again, and another key completes."""
    core = new_core(AgentPlan.from_agent(parent("kid")))
    try:
        state = InMemoryKeyState()
        assert core.on_input(KEY, {"key": KEY, "item": "apple"}, state).errors == []
        drive_until(core, state, quiet=True, done=lambda s: (
            (c := call_of(s, "go", 1)) is not None and not c.done))
        wait_until("the gated call runs", lambda: probes["gated:apple"] == 1)
        snap = snapshot_of(state, "json")
    finally:
        gate().set()
        core.close()
    new = new_core(AgentPlan.from_agent(new_parent()))
    try:
        outputs, errors = run_to_end(new, snap)
        other = InMemoryKeyState()
        first = new.on_input("other", {"key": "other", "item": "pear"}, other)
        more, more_errors = run_to_end(new, other, key="other")
        more[:0], more_errors[:0] = first.outputs, first.errors
    finally:
        new.close()
    assert outputs == []
    by_action = {e.action: e for e in errors}
    assert set(by_action) == {"go", "ask"}
    assert all(e.error_type == "ReplayDivergenceError" and e.key == KEY for e in errors)
    assert "internal sub-agent 'kid'" in by_action["go"].message
    assert "keep it registered under the name 'kid'" in by_action["go"].message
    assert "'kid'" in by_action["ask"].message
    assert probes["price:apple"] == 1 and probes["gated:apple"] == 1  # nothing ran again
    assert snap.run is None
    if calls == "kid2":
        assert more_errors == [] and more == [[True, ["PRICE(pear)"]]]
    else:
        assert more_errors == [] and more[0][0] is False  # unknown sub-agent: a failed result


# -- a recorded result whose model class changed ---------------------------------------------
class Receipt(BaseModel):
    """What ``buy`` returns (recorded in its JSON form, with its class)."""

    item: str


class ReceiptRequired(BaseModel):
    """``Receipt`` with a new required field."""

    item: str
    total: int


def buy(item: str) -> Receipt:
    count(f"buy:{item}")
    return Receipt(item=item)


class Buyer(Agent):
    """Buys, then waits on the gate; a failing replay of the purchase is caught (``None``)."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        try:
            receipt = await ctx.durable_execute_async(buy, event.input["item"])
        except Exception:  # noqa: BLE001 - what a user may write: goes on without it
            receipt = None
        await ctx.durable_execute_async(gated, event.input["item"])
        ctx.send_event(OutputEvent(output=repr(receipt)))


@pytest.mark.parametrize("change", ["required-field-added", "class-gone"])
def test_a_recorded_result_whose_model_class_changed_fails_the_replay_even_if_caught(
        change, monkeypatch, probes):
    """The purchase's recorded ``Receipt`` no longer rebuilds in the new code. It used to
    raise the bare ``ValidationError`` (or an import error) into the action, which caught
    it and completed with no receipt: the purchase silently lost. Now the replay diverges,
    naming the call, its function and what failed, caught or not; nothing runs again."""
    core = new_core(AgentPlan.from_agent(Buyer()))
    try:
        state = InMemoryKeyState()
        assert core.on_input(KEY, {"key": KEY, "item": "apple"}, state).errors == []
        drive_until(core, state, quiet=True, done=lambda s: (
            (c := call_of(s, "go", 1)) is not None and not c.done))
        snap = snapshot_of(state, "json")
    finally:
        gate().set()
        core.close()
    tag = snap.run.inflight["r0/go"].calls["0"].value["$model"]
    monkeypatch.delitem(serde._CLASSES, tag, raising=False)  # a new process: not imported yet
    if change == "class-gone":
        monkeypatch.delattr(sys.modules[Receipt.__module__], "Receipt")
    else:
        monkeypatch.setitem(serde._CLASSES, tag, ReceiptRequired)
    outputs, errors, new = resume(AgentPlan.from_agent(Buyer()), snap)
    assert outputs == []
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and err.key == KEY
    assert "r0/go/c0" in err.message and "buy'" in err.message
    assert "cannot rebuild" in err.message
    assert ("total" if change == "required-field-added" else "Receipt") in err.message
    assert probes["buy:apple"] == 1
    assert new.counters["replay_divergences"] == 1
