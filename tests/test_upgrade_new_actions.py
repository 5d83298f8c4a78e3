"""An upgrade that adds an action for an event still in flight: the new action runs for it
after the restore, as a fault-free run of the new code would; once, and never for an event
whose actions (old ones included) had all completed, nor again for one whose old sibling
completed before the checkpoint (core-level restores, ``support.harness``)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from support.harness import KEY, new_core, poll_until, resume, snapshot_of
from support.probes import count, wait

from flink_agents_py.api import (
    Agent,
    Event,
    InputEvent,
    InternalSubagent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
)
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState, RunState

pytestmark = pytest.mark.timeout(60)


def held(name: str) -> str:
    count(name)
    wait(name)
    return name


class Step(Event):
    """Sent by ``start``; ``work`` (and, in v2, ``audit``) take it."""

    item: str


async def _start(event: InputEvent, ctx: RunnerContext) -> None:
    ctx.send_event(Step(item=event.input["item"]))


async def _work(event: Step, ctx: RunnerContext) -> None:
    await ctx.durable_execute_async(held, "work")
    ctx.send_event(OutputEvent(output=f"worked on {event.item}"))


def _log(event: Step, ctx: RunnerContext) -> None:
    count("log")
    ctx.send_event(OutputEvent(output=f"logged {event.item}"))


def _audit(event: Step, ctx: RunnerContext) -> None:
    count("audit")
    ctx.send_event(OutputEvent(output=f"audited {event.item}"))


def _agent(*extra: tuple[str, Any]) -> Agent:
    agent = Agent()
    agent.add_action("start", [InputEvent], _start)
    agent.add_action("work", [Step], _work)
    for name, fn in extra:
        agent.add_action(name, [Step], fn)
    return agent


def snapshot_in_work(agent: Agent, probes: Any) -> InMemoryKeyState:
    """The key's state (JSON form) while ``work`` waits on its call."""
    core = new_core(AgentPlan.from_agent(agent))
    try:
        state = InMemoryKeyState()
        res = core.on_input(KEY, {"item": "apple"}, state)
        assert res.errors == []
        poll_until(core, state, lambda s: probes["work"] == 1)
        return snapshot_of(state, "json")
    finally:
        probes.open("work")
        core.close()


def test_an_action_added_for_an_event_in_flight_runs_for_it_after_the_restore(probes):
    snap = snapshot_in_work(_agent(), probes)
    outputs, errors, _ = resume(AgentPlan.from_agent(_agent(("audit", _audit))), snap)
    assert errors == []
    assert sorted(outputs) == ["audited apple", "worked on apple"]
    assert probes["audit"] == 1


def test_the_new_action_runs_once_across_a_second_restore(probes):
    snap = snapshot_in_work(_agent(), probes)
    plan = AgentPlan.from_agent(_agent(("audit", _audit)))
    core = new_core(plan)
    try:
        res = core.advance(KEY, snap)  # restored: audit runs and completes, work waits
        assert res.errors == [] and res.outputs == ["audited apple"]
        again = snapshot_of(snap, "json")
    finally:
        core.close()
    outputs, errors, _ = resume(plan, again)
    assert errors == [] and outputs == ["worked on apple"]
    assert probes["audit"] == 1


def test_an_old_sibling_that_completed_before_the_checkpoint_does_not_run_again(probes):
    """v1 has ``work`` and ``log`` on ``Step``; ``log`` completed before the checkpoint. v2
    adds ``audit``: ``audit`` runs, ``log`` does not run again."""
    snap = snapshot_in_work(_agent(("log", _log)), probes)
    assert probes["log"] == 1
    outputs, errors, _ = resume(
        AgentPlan.from_agent(_agent(("log", _log), ("audit", _audit))), snap)
    assert errors == []
    assert sorted(outputs) == ["audited apple", "worked on apple"]
    assert (probes["log"], probes["audit"]) == (1, 1)


def test_state_that_does_not_say_what_its_event_triggered_warns_instead(probes, caplog):
    """A run stored by a version that kept no trigger lists: which actions the event had
    triggered is unknown, so none is started; a warning names the new action and why."""
    snap = snapshot_in_work(_agent(), probes)
    data = snap.run.to_builtins()
    data.pop("siblings_kept", None)
    for rec in data["inflight"].values():
        rec.pop("siblings", None)
    snap.run = RunState.from_stored(data)
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, _ = resume(AgentPlan.from_agent(_agent(("audit", _audit))), snap)
    assert errors == [] and outputs == ["worked on apple"]
    assert probes["audit"] == 0
    [warning] = [r.getMessage() for r in caplog.records if "'audit'" in r.getMessage()]
    assert "not run" in warning and KEY in warning


def test_a_renamed_action_is_not_started_beside_the_one_that_fails(probes, caplog):
    """v2 renames ``work`` to ``work_v2``: the restored ``work`` fails (a divergence), and
    ``work_v2`` is not started for the event (it would do the work again); a warning says
    so."""
    snap = snapshot_in_work(_agent(), probes)
    agent = Agent()
    agent.add_action("start", [InputEvent], _start)
    agent.add_action("work_v2", [Step], _work)
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        outputs, errors, _ = resume(AgentPlan.from_agent(agent), snap)
    assert outputs == []
    [err] = errors
    assert err.error_type == "ReplayDivergenceError" and err.action == "work"
    assert probes["work"] == 1
    assert [r for r in caplog.records if "'work_v2'" in r.getMessage()
            and "replace its action 'work'" in r.getMessage()]


# -- inside an internal sub-agent call ----------------------------------------------------
async def _child_work(event: InputEvent, ctx: RunnerContext) -> None:
    await ctx.durable_execute_async(held, "work")
    ctx.send_event(OutputEvent(output="child worked"))


def _child_audit(event: InputEvent, ctx: RunnerContext) -> None:
    count("audit")
    ctx.send_event(OutputEvent(output="child audited"))


async def _ask_kid(event: InputEvent, ctx: RunnerContext) -> None:
    result = await (await ctx.submit_subagent("kid", {"x": 1}))
    ctx.send_event(OutputEvent(output=result.result))


def _parent(*extra: tuple[str, Any]) -> Agent:
    kid = Agent()
    kid.add_action("work", [InputEvent], _child_work)
    for name, fn in extra:
        kid.add_action(name, [InputEvent], fn)
    parent = Agent()
    parent.add_action("ask", [InputEvent], _ask_kid)
    parent.add_resource("kid", ResourceType.AGENT,
                        ResourceDescriptor(InternalSubagent, agent=kid))
    return parent


def test_an_action_added_to_a_subagent_runs_for_its_event_in_flight(probes):
    snap = snapshot_in_work(_parent(), probes)
    outputs, errors, _ = resume(AgentPlan.from_agent(_parent(("audit", _child_audit))), snap)
    assert errors == []
    assert outputs == [["child audited", "child worked"]]
    assert probes["audit"] == 1
