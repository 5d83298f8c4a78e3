"""An event type no action listens to is dropped with one warning, not silently."""

from __future__ import annotations

import logging

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, Event, InputEvent, OutputEvent, RunnerContext, action


class Lost(Event):
    n: int = 0


class Forgetful(Agent):
    """Sends a ``Lost`` per input (no action takes it) and an output."""

    @action(InputEvent)
    @staticmethod
    def go(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(Lost(n=event.input["n"]))
        ctx.send_event(OutputEvent(output=event.input["n"]))


def test_a_dropped_event_type_is_warned_about_once(caplog):
    records = [{"key": f"k{i % 2}", "n": i} for i in range(4)]
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        res = AgentsExecutionEnvironment.local().from_list(records).apply(Forgetful()).run()
    assert sorted(res.outputs) == [0, 1, 2, 3] and res.errors == []
    warned = [r.getMessage() for r in caplog.records if "trigger no action" in r.getMessage()]
    assert warned == ["events of type 'Lost' trigger no action of the agent (its actions: go) "
                      "and are dropped: is an @action(Lost) missing?"]
