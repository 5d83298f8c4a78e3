"""Waits with company: two waits in one action, and waits inside internal sub-agents.

Two waits of one action (one after the other, or both opened before either is awaited) each
get their own event, one's timeout leaves the other waiting, and a crash at any point
replays to the fault-free result. A sub-agent's action that waits makes its caller wait:
the outside event reaches the child by its correlation id, a restore while the child waits
loses nothing, and the child's timeout is a failed result for the caller.

A caller that cancels a sub-agent call whose child waits for an outside event got no answer
until that event arrived or the wait timed out (with no timeout: until the end of all input,
never on a job that runs for ever), so ``await handle.cancel()`` did not end the call. Now
the waits for outside events in a cancelled call end at once with ``WaitTimeoutError``
saying so, and a wait opened there later ends as it opens: the call completes as cancelled.
"""

from __future__ import annotations

from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    InputEvent,
    InternalSubagent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    WaitTimeoutError,
    action,
)
from flink_agents_py.local import AdvanceTime, AfterRecords
from flink_agents_py.testing import check_replay_safety

pytestmark = pytest.mark.timeout(120)


def tag(value: str) -> str:
    """A durable call between the waits (counted by the checker)."""
    return value


async def _outcome(waiter: Any) -> Any:
    try:
        return await waiter
    except WaitTimeoutError as e:
        return f"timed out: {e.correlation_id}"


class OneThenOther(Agent):
    """Waits for ``one`` (10 s), then for ``two`` (20 s), with calls before, between, after."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        tags = [await ctx.durable_execute_async(tag, "before")]
        first = await _outcome(ctx.wait_for("one", timeout_s=10))
        tags.append(await ctx.durable_execute_async(tag, "between"))
        second = await _outcome(ctx.wait_for("two", timeout_s=20))
        tags.append(await ctx.durable_execute_async(tag, "after"))
        ctx.send_event(OutputEvent(output={"key": ctx.key, "one": first, "two": second,
                                           "tags": tags}))


class BothOpen(Agent):
    """Opens both waits, makes a call, then awaits ``two`` first, ``one`` second."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        one = ctx.wait_for("one", timeout_s=10)
        two = ctx.wait_for("two", timeout_s=20)
        between = await ctx.durable_execute_async(tag, "between")
        second = await _outcome(two)
        first = await _outcome(one)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "one": first, "two": second,
                                           "tags": [between]}))


RECORDS = [{"key": k} for k in "abcd"]
EVENTS = [
    {"key": "d", "correlation_id": "one", "payload": "early for d"},  # before d's run: refused
    AfterRecords(4),
    {"key": "a", "correlation_id": "two", "payload": "A2"},  # before a's 'two' opened: held
    {"key": "a", "correlation_id": "one", "payload": "A1"},
    {"key": "b", "correlation_id": "one", "payload": "B1"},
    AdvanceTime(15),  # c's and d's 'one' time out
    {"key": "b", "correlation_id": "two", "payload": "B2"},
    {"key": "c", "correlation_id": "one", "payload": "late"},
    {"key": "c", "correlation_id": "two", "payload": "C2"},
]
EXPECTED = {"a": ("A1", "A2"), "b": ("B1", "B2"), "c": ("timed out: one", "C2"),
            "d": ("timed out: one", "timed out: two")}


@pytest.mark.parametrize("agent", [OneThenOther, BothOpen])
def test_two_waits_of_one_action_each_get_their_event_and_replay_at_every_point(agent):
    result = (AgentsExecutionEnvironment.local().from_list(RECORDS)
              .connect(EVENTS, interleaved=True).apply(agent()).run())
    got = {o["key"]: (o["one"], o["two"]) for o in result.outputs}
    assert got == EXPECTED
    errors = sorted(e.message for e in result.errors)
    assert len(errors) == 2 and all(e.startswith("outside event with correlation id 'one'")
                                    for e in errors)
    assert any("no run of key 'd' is in flight" in e for e in errors)
    assert any("late: the wait of call" in e for e in errors)
    report = check_replay_safety(agent(), RECORDS, events=EVENTS, interleaved=True,
                                 other_process=False)
    report.assert_ok()


# -- waits inside internal sub-agents ---------------------------------------------------------
class Waiter(Agent):
    """The child: waits for ``child-<n>`` (timeout ``t``), outputs what came."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        n, timeout = event.input["n"], event.input.get("t")
        try:
            got = await ctx.wait_for(f"child-{n}", timeout_s=timeout)
        except WaitTimeoutError:
            if not event.input.get("again"):
                raise
            got = await ctx.wait_for(f"again-{n}")  # a cancelled call's: ends as it opens
        ctx.send_event(OutputEvent(output={"child_got": got}))


class Delegator(Agent):
    """Calls the child; with ``cancel``, cancels it after a call of its own, then awaits."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        rec = event.input
        handle = await ctx.submit_subagent("kid", {"n": rec["n"], "t": rec.get("t"),
                                                   "again": rec.get("again")})
        mine = await ctx.durable_execute_async(tag, "mine")
        if rec.get("cancel"):
            await handle.cancel()
        result = await handle
        if rec.get("then_wait"):
            await _outcome(ctx.wait_for("own", timeout_s=5))
        ctx.send_event(OutputEvent(output={
            "key": ctx.key, "ok": result.success, "result": result.result,
            "cancelled": result.cancelled, "error": result.error_message, "mine": mine}))


def delegator() -> Delegator:
    agent = Delegator()
    agent.add_resource("kid", ResourceType.AGENT, ResourceDescriptor(
        InternalSubagent, agent=Waiter, description="waits for an outside event",
        input_schema='{"type":"object"}'))
    return agent


def _run(records, events, **kw):
    return (AgentsExecutionEnvironment.local().from_list(records).connect(events, **kw)
            .apply(delegator()).run())


def test_a_waiting_child_makes_its_caller_wait_and_its_timeout_is_a_failed_result():
    records = [{"key": "a", "n": 1, "t": 10}, {"key": "b", "n": 2, "t": 10}]
    events = [{"key": "a", "correlation_id": "child-1", "payload": "yes"}]
    result = _run(records, events)
    out = {o["key"]: o for o in result.outputs}
    assert out["a"]["ok"] and out["a"]["result"] == [{"child_got": "yes"}]
    assert not out["b"]["ok"] and out["b"]["error"] == (
        "sub-agent 'kid' failed: action 'on_input' raised WaitTimeoutError: no outside event "
        "with correlation id 'child-2' arrived for key 'b' within 10 s")
    assert result.errors == []  # captured by the call: its caller decides
    report = check_replay_safety(delegator(), records, events=events, other_process=False)
    report.assert_ok()


@pytest.mark.parametrize(("timeout", "again"), [(None, False), (3600, False), (None, True)])
def test_cancelling_a_call_whose_child_waits_ends_it_at_once(timeout, again):
    records = [{"key": "a", "n": 1, "t": timeout, "cancel": True, "again": again},
               {"key": "a", "n": 2}]
    # the first run ends before any time passes; its child's event, sent after, finds no
    # waiter; the second run's child gets its own
    events = [AfterRecords(1), AdvanceTime(1), {"key": "a", "correlation_id": "child-1"},
              AfterRecords(2), {"key": "a", "correlation_id": "child-2", "payload": 2}]
    steps: list[tuple[int, int]] = []  # (virtual clock, outputs) after each host callback
    job = (AgentsExecutionEnvironment.local().from_list(records)
           .connect(events, interleaved=True).apply(delegator()))
    result = job.run(on_step=lambda j: steps.append((j.snapshot()["clock_ms"],
                                                      len(j.result.outputs))))
    first, second = result.outputs
    assert first["cancelled"] and not first["ok"] and first["mine"] == "mine"
    assert first["error"] == "sub-agent 'kid' call was cancelled"
    assert second["ok"] and second["result"] == [{"child_got": 2}]
    # the cancelled call ended before any virtual time passed
    assert min(t for t, n in steps if n >= 1) == 0
    [late] = [e for e in result.errors if e.action == "<outside>"]
    assert "'child-1'" in late.message and "no run of key 'a' is in flight" in late.message
    report = check_replay_safety(delegator(), records, events=events, interleaved=True,
                                 other_process=False)
    report.assert_ok()


def test_an_event_for_a_wait_of_a_cancelled_call_is_named_so():
    records = [{"key": "a", "n": 1, "cancel": True, "then_wait": True}]
    events = [AfterRecords(1), {"key": "a", "correlation_id": "child-1"}]
    result = _run(records, events, interleaved=True)
    assert result.outputs[0]["cancelled"]
    [err] = result.errors
    assert err.error_type == "UnmatchedEventError" and err.message == (
        "outside event with correlation id 'child-1' arrived for no waiter: the wait of call "
        "r0/on_input/c0/b/on_input/c0 ended without it: the sub-agent call it waited in was "
        "cancelled")


class Twice(Agent):
    """Calls the child twice, one call after the other, with the same ``n``."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        results = []
        for _ in range(2):
            result = await (await ctx.submit_subagent("kid", {"n": 1, "t": 5}))
            results.append(result.result if result.success else result.error_message)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "results": results}))


def test_a_correlation_id_waited_for_again_in_the_run_says_the_first_wait_ended():
    """A sub-agent called twice in a run waits for the same id twice: the second is refused
    (an id is waited for once per run) with a message saying the first wait has ended, not
    that the run 'already waits' for it."""
    agent = Twice()
    agent.add_resource("kid", ResourceType.AGENT, ResourceDescriptor(
        InternalSubagent, agent=Waiter, description="waits", input_schema='{"type":"object"}'))
    result = (AgentsExecutionEnvironment.local().from_list([{"key": "a"}])
              .connect([{"key": "a", "correlation_id": "child-1", "payload": "yes"}])
              .apply(agent).run())
    [out] = result.outputs
    assert out["results"][0] == [{"child_got": "yes"}]
    assert "UsageError: the run waited for correlation id 'child-1' already (call " \
        "r0/on_input/c0/b/on_input/c0, which got its event); a correlation id is waited " \
        "for once per run: make it unique in the run (a sub-agent called more than once " \
        "waits for ids made from its input)" in out["results"][1]


class SameIdInOneStep(Agent):
    """Opens two waits for one correlation id before awaiting either."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        first = ctx.wait_for("same", timeout_s=event.input.get("t"))
        second = ctx.wait_for("same", timeout_s=event.input.get("t"))
        ctx.send_event(OutputEvent(output={"first": await first, "second": await second}))


@pytest.mark.parametrize("timeout", [None, 60])
def test_two_waits_for_one_id_opened_in_one_step_are_refused_at_once(timeout):
    """The second wait was checked against the run's waits only, which the first joins after
    the step: it was refused only once the first had ended (its event, or its timeout: with
    none, at the end of all input), and an event for the id went to the first."""
    result = (AgentsExecutionEnvironment.local().from_list([{"key": "a", "t": timeout}])
              .connect([AdvanceTime(30), {"key": "a", "correlation_id": "same", "payload": 1}])
              .apply(SameIdInOneStep()).run())
    failed = [e for e in result.errors if e.action == "on_input"]
    assert [e.error_type for e in failed] == ["UsageError"]
    assert failed[0].message.startswith(
        "the run already waits for correlation id 'same' (call r0/on_input/c0); ")
    assert result.outputs == []
    [unmatched] = [e for e in result.errors if e.action == "<outside>"]
    assert "no run of key 'a' is in flight" in unmatched.message  # the run failed at once
