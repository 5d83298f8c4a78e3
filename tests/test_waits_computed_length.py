"""A wait whose length is computed anew at each entry replays without a finding.

An action re-enters from its start each time its run wakes (a sleep ends, an event comes),
so ``await ctx.sleep(until - time.time())`` asks for another length at every wake-up. A
wait's deadline is fixed when it opens and a re-entry never reads the length again, yet
the length was part of the call's recorded arguments: every wake-up logged "arguments
changed" (``replay_arguments_changed``), and a strict agent failed with a divergence. Now
a wait that has opened is identified by the length it opened with.
"""

from __future__ import annotations

import logging

from support.probes import count

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.local import AdvanceTime, AfterRecords


class Computes(Agent):
    """Sleeps, then waits for ``go-<key>``, each for a length computed at every entry."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        entry = count(f"entered-{ctx.key}")  # 1, 2, 3...: as time.time() would move
        await ctx.sleep(100 - entry)
        got = await ctx.wait_for(f"go-{ctx.key}", timeout_s=1000 - entry)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "got": got}))


def test_a_sleep_and_a_wait_computed_anew_at_each_entry_replay_without_a_finding(
        probes, caplog):
    events = [AfterRecords(1), AdvanceTime(200),
              {"key": "a", "correlation_id": "go-a", "payload": 1}]
    with caplog.at_level(logging.WARNING):
        res = (AgentsExecutionEnvironment.local().from_list([{"key": "a"}])
               .connect(events, interleaved=True).apply(Computes()).run())
    assert res.errors == [] and res.outputs == [{"key": "a", "got": 1}]
    assert probes["entered-a"] >= 3  # entered, woke from the sleep, woke with the event
    assert res.counters.get("replay_arguments_changed", 0) == 0
    assert not [r for r in caplog.records if "argument" in r.getMessage()]


class StrictComputes(Computes):
    """The same agent, strict: changed arguments would be a divergence."""

    replay = "strict"


def test_a_strict_agent_computing_its_sleep_anew_does_not_diverge(probes):
    res = (AgentsExecutionEnvironment.local().from_list([{"key": "b"}])
           .connect([AfterRecords(1), AdvanceTime(200),
                     {"key": "b", "correlation_id": "go-b", "payload": 2}], interleaved=True)
           .apply(StrictComputes()).run())
    assert res.errors == [] and res.outputs == [{"key": "b", "got": 2}]


class Sleeps(Agent):
    """Sleeps an hour, then says when it woke (the host's clock, virtual locally)."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        await ctx.sleep(3600)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "woke": True}))


def test_an_outside_event_with_a_sleeps_own_id_does_not_end_the_sleep(probes):
    # ids starting with '#' are the runtime's own: before, an event carrying a sleep's id
    # ('#sleep/<call id>') was delivered to the sleep and ended it early
    res = (AgentsExecutionEnvironment.local().from_list([{"key": "a"}])
           .connect([AfterRecords(1),
                     {"key": "a", "correlation_id": "#sleep/r0/on_input/c0", "payload": 1}],
                    interleaved=True).apply(Sleeps()).run())
    [err] = res.errors
    assert err.error_type == "UnmatchedEventError" and "reserved correlation id" in err.message
    assert res.outputs == [{"key": "a", "woke": True}]
    assert res.counters.get("waits_timed_out", 0) == 0
