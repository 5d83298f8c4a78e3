"""Two actions of one event, both in flight at a checkpoint, whose code the new version
swapped between their names.

Before: each re-entered execution ran the other action's code; its first durable call had
other arguments than recorded, so it replayed the outcome recorded for the other action's
call with an ``arguments changed`` warning: ``fetch`` got what ``store`` had asked for and
the other way round. Now the first to replay sees its arguments are those recorded by its
sibling and diverges, and marks the sibling (whose records it could no longer be compared
with once the first failed), which diverges too: no outcome reaches another call.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent
from flink_agents_py.runtime.recorder._state import CallRecord, InflightAction, RunState

pytestmark = pytest.mark.timeout(60)

GATE = threading.Event()
DEPLOY: dict[str, Any] = {"fetch": "fetch", "store": "store"}
RAN: list[str] = []


def lookup(what: str) -> str:
    RAN.append(what)
    return f"result-of-{what}"


def held() -> str:
    assert GATE.wait(10), "the checkpoint was never taken"
    return "held"


def body(which: str) -> Any:
    async def run(event: InputEvent, ctx: Any) -> None:
        got = await ctx.durable_execute_async(lookup, which)
        await ctx.durable_execute_async(held)
        ctx.send_event(OutputEvent(output={"code": which, "got": got}))

    return run


def agent() -> Agent:
    made = Agent()
    made.add_action("fetch", [InputEvent], body(DEPLOY["fetch"]))
    made.add_action("store", [InputEvent], body(DEPLOY["store"]))
    return made


def crash_and_restore(**deploy: str) -> tuple[Any, Any]:
    DEPLOY.update(fetch="fetch", store="store")
    GATE.clear()
    taken: list[dict[str, Any]] = []

    def on_step(job: Any) -> None:
        snap = job.snapshot()
        done = [c for k in snap["keys"] if k.get("run")
                for ex in k["run"]["inflight"].values()
                for c in ex["calls"].values() if c.get("done")]
        if not taken and len(done) == 2:  # each action's lookup, both helds in flight
            taken.append(json.loads(json.dumps(snap)))
            GATE.set()

    records = [{"key": "k"}]
    first = AgentsExecutionEnvironment.local().from_list(records).apply(agent()).run(
        on_step=on_step)
    assert taken, "no checkpoint with both actions in flight"
    DEPLOY.update(deploy)
    RAN.clear()
    rest = AgentsExecutionEnvironment.local().from_list(records).apply(agent()).restore(
        taken[0]).run()
    return first, rest


def test_two_actions_swapped_while_in_flight_both_diverge_and_no_result_is_swapped():
    first, rest = crash_and_restore(fetch="store", store="fetch")
    assert sorted(o["got"] for o in first.outputs) == ["result-of-fetch", "result-of-store"]
    assert rest.outputs == []  # before: fetch's code got store's result and the other way
    assert sorted(e.action for e in rest.errors) == ["fetch", "store"]
    assert {e.error_type for e in rest.errors} == {"ReplayDivergenceError"}
    assert all("another action's code under this action's name" in e.message
               for e in rest.errors)
    assert RAN == []  # neither lookup ran again in the other's place


def test_the_same_code_replays_both_quietly(caplog):
    with caplog.at_level(logging.WARNING, logger="flink_agents_py"):
        first, rest = crash_and_restore()
    assert rest.errors == []
    assert sorted(map(json.dumps, rest.outputs)) == sorted(map(json.dumps, first.outputs))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_one_action_changed_harmlessly_still_only_warns(caplog):
    with caplog.at_level(logging.WARNING, logger="flink_agents_py"):
        _, rest = crash_and_restore(fetch="fetch-v2")
    assert rest.errors == []
    assert {o["code"]: o["got"] for o in rest.outputs} == {
        "fetch-v2": "result-of-fetch", "store": "result-of-store"}
    assert [r for r in caplog.records if "arguments changed" in r.getMessage()]


def test_the_mark_a_sibling_leaves_is_kept_in_state():
    run = RunState(seq=0, inflight={"r0/store": InflightAction(
        action="store", event={"type": "InputEvent"}, calls={"0": CallRecord(digest="d")},
        diverged="the new code made r0/fetch/c0 ...")})
    back = RunState.from_stored(run.to_stored())
    assert back.inflight["r0/store"].diverged == "the new code made r0/fetch/c0 ..."
    assert RunState.from_stored(json.dumps(run.to_builtins())).inflight[
        "r0/store"].diverged == "the new code made r0/fetch/c0 ..."
    plain = RunState(seq=0, inflight={"r0/a": InflightAction(action="a", event={})})
    assert "diverged" not in plain.to_stored()  # nothing added to records without one
