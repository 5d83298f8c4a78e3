"""An answer that comes before its key's run exists is held for the run, within a bound.

An outside event was held only for a run in flight: one that arrived before the key's
record started its run (two sources racing, an answer sent faster than its request's record
reached the operator, items placed before the records) went to the error output (``no run of
key 'a' is in flight``), and the run the record started then waited on for an answer that
had come. Now it is held in the key's keyed state (``_waits.is_holder``) and the key's next
run takes it: its wait returns it as it opens. Bounded as events held for a run in flight
are (``EARLY_MAX`` a key, ``EARLY_HOLD_S`` each): one no wait claims (an id that never
existed) still goes to the error output with its key and position, and every other record
runs.
"""

from __future__ import annotations

import json

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    InputEvent,
    OutputEvent,
    RunnerContext,
    WaitTimeoutError,
    action,
)
from flink_agents_py.local import AfterRecords
from flink_agents_py.runtime.core._waits import EARLY_HOLD_S, EARLY_MAX

pytestmark = pytest.mark.timeout(120)


class Waits(Agent):
    """Waits for ``go-<key>``; outputs the payload (or the timeout)."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        try:
            got = await ctx.wait_for(f"go-{ctx.key}", timeout_s=60)
        except WaitTimeoutError as e:
            got = f"timed out: {e}"
        ctx.send_event(OutputEvent(output={"key": ctx.key, "got": got}))


def _run(events, records=None, restore=None, **run):
    job = (
        AgentsExecutionEnvironment.local()
        .from_list(records if records is not None else [{"key": "a"}, {"key": "b"}])
        .connect(events, interleaved=True)
        .apply(Waits())
    )
    return (job.restore(restore) if restore is not None else job).run(**run)


def test_an_answer_before_its_run_is_held_and_the_run_s_wait_takes_it():
    events = [
        {"key": "a", "correlation_id": "go-a", "payload": 1},  # before any record
        AfterRecords(2),
        {"key": "b", "correlation_id": "go-b", "payload": 2},
    ]
    result = _run(events)
    assert result.errors == []  # before: an UnmatchedEventError, and a's wait timed out
    assert {o["key"]: o["got"] for o in result.outputs} == {"a": 1, "b": 2}


def test_an_answer_no_run_ever_waits_for_goes_to_the_errors_with_its_key_and_position():
    events = [
        {"key": "a", "correlation_id": "go-a", "payload": 1},
        {"key": "z", "correlation_id": "go-z", "payload": 9},  # z has no record, ever
        AfterRecords(2),
        {"key": "b", "correlation_id": "go-b", "payload": 2},
    ]
    result = _run(events)
    assert {o["key"]: o["got"] for o in result.outputs} == {"a": 1, "b": 2}
    [error] = result.errors
    assert (error.key, error.seq, error.action, error.execution_id, error.error_type) == (
        "z",
        -1,
        "<outside>",
        "outside event 1",
        "UnmatchedEventError",
    )
    assert error.message == (
        "outside event with correlation id 'go-z' arrived for no waiter: no run of key 'z' is "
        "in flight (it came before the key's record started one, or after its run ended): it "
        f"was held for the key's next run to wait for it, and none opened within {EARLY_HOLD_S} s"
    )
    assert error.input == {"key": "z", "correlation_id": "go-z", "payload": 9}


def test_a_held_answer_its_run_never_waits_for_is_named_when_the_run_ends():
    events = [{"key": "a", "correlation_id": "go-A", "payload": 1}, AfterRecords(2)]  # a typo
    result = _run(events)
    assert result.outputs[0]["key"] == "a" and result.outputs[0]["got"].startswith("timed out")
    [error] = result.errors
    assert (error.key, error.seq, error.execution_id) == ("a", 0, "outside event 0")
    assert "the run ended without waiting for it (the run waited for: 'go-a')" in error.message


def test_a_key_holds_at_most_early_max_answers_and_refuses_the_next_at_once():
    events = [{"key": "a", "correlation_id": f"x{n}", "payload": n} for n in range(EARLY_MAX)]
    events += [
        {"key": "a", "correlation_id": "go-a", "payload": "late in line"},  # one too many
        AfterRecords(1),
    ]
    result = _run(events, records=[{"key": "a"}])
    refused = [e for e in result.errors if e.execution_id == f"outside event {EARLY_MAX}"]
    [error] = refused
    assert error.key == "a" and error.message.endswith(
        f"no run of key 'a' is in flight, and {EARLY_MAX} events are held for its next run "
        "already (an unknown correlation id, or one whose wait has not opened yet)"
    )
    # the held ones the run never waited for are named too; nothing stopped the job
    assert len(result.errors) == EARLY_MAX + 1
    assert result.outputs[0]["got"].startswith("timed out")


def test_a_held_answer_outlives_a_snapshot_and_restore():
    events = [{"key": "a", "correlation_id": "go-a", "payload": "kept"}, AfterRecords(1)]
    snaps = []
    crashed = _run(
        events,
        records=[{"key": "a"}],
        on_step=lambda j: snaps.append(j.snapshot()),
        max_steps=1,  # after the answer was held, before the record came
    )
    assert crashed.outputs == [] and crashed.errors == []
    snap = json.loads(json.dumps(snaps[-1]))
    [entry] = snap["keys"]
    assert entry["run"]["waits"]["go-a"]["status"] == "early"  # in the key's state
    rest = _run(events, records=[{"key": "a"}], restore=snap)
    assert rest.errors == [] and rest.outputs == [{"key": "a", "got": "kept"}]
