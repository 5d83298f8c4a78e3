"""An error row names where its record was read (``ErrorRecord.source``), whatever path it took.

A record read by ``from_kafka`` carries its topic, partition and offset. Before, only the row
of a record rejected before it ran named them (in ``execution_id``); the row of an action that
failed named the key and the run's execution but not the record's place, so finding the
record to replay meant searching the topic. Now the place goes with the input into the key's
queue (Flink keyed state) and its run (``RunState.source``), and every error row of the run
names it. These tests drive the operator's own key state over dict-backed stand-ins of
Flink's state handles (``support.flink_state``); ``tests/test_kafka_keys_flink.py`` runs it
on Kafka and Flink.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.flink_state import QUEUE, FlinkKeyedState

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore, RunState
from flink_agents_py.runtime._unread import error_line

pytestmark = pytest.mark.timeout(60)

HERE = "topic orders partition 3 offset 41"


def test_a_queued_inputs_place_is_kept_in_keyed_state_beside_it():
    stored = FlinkKeyedState()
    state = stored.key_state()
    state.push_input({"n": 0}, "topic t partition 0 offset 0")
    assert state.pop_input() == (0, {"n": 0})
    assert state.popped_source == "topic t partition 0 offset 0"
    state.run = RunState(seq=0, input={"n": 0}, source=state.popped_source)
    state.push_input({"n": 1}, HERE)
    state.push_input({"n": 2})  # from a source that names no place
    state.flush()
    assert stored.store[QUEUE][2] == '{"n":2}'  # as before: JSON text
    later = stored.key_state()  # another callback (or a restore): read from keyed state
    assert later.run is not None and later.run.source == "topic t partition 0 offset 0"
    assert later.pop_input() == (1, {"n": 1}) and later.popped_source == HERE
    assert later.pop_input() == (2, {"n": 2}) and later.popped_source is None


def test_a_run_keeps_its_place_through_its_stored_form():
    run = RunState(seq=4, input={"n": 1}, source=HERE)
    assert RunState.from_stored(run.to_stored()).source == HERE
    assert RunState.from_stored(RunState(seq=4).to_stored()).source is None


class FailsOnOdd(Agent):
    """Fails for an odd ``n`` (after waiting on a durable call, for an ``n`` over 10)."""

    @action(InputEvent)
    @staticmethod
    async def act(event: InputEvent, ctx: RunnerContext) -> None:
        n = event.input["n"]
        if n > 10:
            n = await ctx.durable_execute_async(int, n)
        if n % 2:
            raise ValueError(f"odd {n}")
        ctx.send_event(OutputEvent(output=n))


def _errors(
    core: AgentCore, stored: FlinkKeyedState, records: list[tuple[Any, str | None]]
) -> list[Any]:
    errors = []
    for record, source in records:
        res = core.on_input("k", record, stored.key_state(), source or "record", source)
        errors += res.errors
        while res.busy:  # its durable call: wait for it, then advance the key
            core.wait_for("k", 5.0)
            res = core.advance("k", stored.key_state())
            errors += res.errors
    return errors


def test_the_row_of_a_failed_action_names_where_its_record_was_read():
    core = AgentCore(AgentPlan.from_agent(FailsOnOdd()))
    core.open()
    try:
        stored = FlinkKeyedState()
        errors = _errors(
            core,
            stored,
            [({"n": 1}, HERE), ({"n": 13}, "topic t partition 0 offset 9"), ({"n": 3}, None)],
        )
    finally:
        core.close()
    assert [(e.key, e.action, e.source) for e in errors] == [
        ("k", "act", HERE),
        ("k", "act", "topic t partition 0 offset 9"),
        ("k", "act", None),
    ]
    assert errors[0].json_row()["source"] == HERE
    assert error_line(errors[0]).startswith(f"key 'k', input 0, r0/act, {HERE}: ValueError: odd 1")
