"""An action that triggers itself forever fails with ``EventChainLimitError``; others go on.

Without a limit the chain runs inside one host callback forever: on Flink the task thread
never returns, so no other key runs and no checkpoint completes. Like a recursion limit, the
sending action fails once the chain is ``EventChainLimitError.LIMIT`` actions long.
"""

from __future__ import annotations

import logging
import pickle

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    AgentsError,
    Event,
    EventChainLimitError,
    InputEvent,
    OutputEvent,
    RunnerContext,
    action,
)

pytestmark = pytest.mark.timeout(120)


class ChainPing(Event):
    hops: int = 0
    stop_at: int = -1


class Pinger(Agent):
    """Each ``ChainPing`` sends the next; ``stop_at`` < 0 never stops."""

    @action(InputEvent, ChainPing)
    @staticmethod
    def ping(event: Event, ctx: RunnerContext) -> None:
        if isinstance(event, InputEvent):
            ctx.send_event(ChainPing(stop_at=event.input["stop_at"]))
        elif event.hops == event.stop_at:
            ctx.send_event(OutputEvent(output={"key": ctx.key, "hops": event.hops}))
        else:
            ctx.send_event(ChainPing(hops=event.hops + 1, stop_at=event.stop_at))


def test_an_endless_chain_fails_its_run_and_the_other_keys_run():
    records = [{"key": "loop", "stop_at": -1}, {"key": "ok", "stop_at": 300}]
    res = AgentsExecutionEnvironment.local().from_list(records).apply(Pinger()).run()
    assert res.outputs == [{"key": "ok", "hops": 300}]  # a long chain under the limit runs
    [err] = res.errors
    assert (err.key, err.action, err.error_type) == ("loop", "ping", "EventChainLimitError")
    assert "event chain longer than 1000 actions for key 'loop'" in err.message
    assert "triggers itself" in err.message


def test_the_message_and_log_line_are_short_and_say_how_to_raise_the_limit(caplog):
    """At the limit the execution id is about 8 KB (two segments per action): the message
    and the log line name the limit, the key, the chain's last actions and event types and
    how to raise the limit, in a few hundred characters; the error record keeps the id."""
    records = [{"key": "loop", "stop_at": -1}]
    with caplog.at_level(logging.WARNING):
        res = AgentsExecutionEnvironment.local().from_list(records).apply(Pinger()).run()
    [err] = res.errors
    assert len(err.execution_id) > 6000  # the identity, whole
    assert len(err.message) < 600
    assert ("the chain's last actions ... -> ping -> ping -> ping -> ping; ping, triggered by "
            "a ChainPing, was sending a ChainPing") in err.message
    assert "raise the limit: EventChainLimitError.LIMIT = 5000 in the agent's module" \
        in err.message
    [line] = [r.getMessage().splitlines()[0] for r in caplog.records
              if "EventChainLimitError" in r.getMessage()]
    assert len(line) < 800
    assert line.startswith("action r0/ping/e0/.../") and "(2,002 segments) failed for key" in line


def test_the_limit_can_be_raised(monkeypatch):
    monkeypatch.setattr(EventChainLimitError, "LIMIT", 20)
    records = [{"key": "ok", "stop_at": 15}, {"key": "long", "stop_at": 30}]
    res = AgentsExecutionEnvironment.local().from_list(records).apply(Pinger()).run()
    assert res.outputs == [{"key": "ok", "hops": 15}]
    [err] = res.errors
    assert err.key == "long" and "longer than 20 actions" in err.message
    assert "EventChainLimitError.LIMIT = 100" in err.message


def test_the_error_is_an_agents_error_that_pickles():
    err = EventChainLimitError("r0/ping/e0/ping", 5)
    again = pickle.loads(pickle.dumps(err))
    assert isinstance(again, AgentsError) and str(again) == str(err) and again.limit == 5
    full = EventChainLimitError("r0/ping/e0/ping", 5, key=("k", 1),
                                event_types=("InputEvent", "ChainPing"))
    again = pickle.loads(pickle.dumps(full))
    assert str(again) == str(full) and (again.key, again.event_types) == (
        ("k", 1), ("InputEvent", "ChainPing"))
