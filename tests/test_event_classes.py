"""An event is rebuilt as the class that sent it, even when another class has its type name.

Events route by type name, and the runtime rebuilds the event an action gets from its JSON
form. Two ``Ping`` classes in two modules share the type ``"Ping"``: the event's JSON form
then names its class, so the action gets the ``Ping`` that was sent, live and after a
restore, instead of the last ``Ping`` class defined (which rejected the other's fields).
"""

from __future__ import annotations

import sys
import types

import pytest
from support.harness import KEY, new_core, resume, snapshot_of
from support.probes import gate

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.api._events import EVENT_CLASS_KEY
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState
from flink_agents_py.runtime._serde import event_json

pytestmark = pytest.mark.timeout(60)


TYPE = "FapyTestPing"
"""The two classes' type (not ``Ping``: other tests define events of that name)."""


def _module_with_ping(name: str, field: str) -> types.ModuleType:
    """A module ``name`` (importable: in ``sys.modules``) defining ``class Ping(Event)`` of
    type ``TYPE``."""
    module = types.ModuleType(name)
    sys.modules[name] = module
    exec(f"from typing import ClassVar\nfrom flink_agents_py.api import Event\n"  # noqa: S102
         f"class Ping(Event):\n    EVENT_TYPE: ClassVar[str] = {TYPE!r}\n"
         f"    {field}: int = 0\n", module.__dict__)
    return module


FIRST = _module_with_ping("fapy_test_pings_first", "x")
SECOND = _module_with_ping("fapy_test_pings_second", "y")  # defined last: owns the type


def wait_for_gate(n: int) -> int:
    assert gate().wait(10), "gate never opened"
    return n


class Sender(Agent):
    @action(InputEvent)
    @staticmethod
    def go(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(FIRST.Ping(x=event.input["n"]))

    @action(TYPE)
    @staticmethod
    async def got(event, ctx: RunnerContext) -> None:
        n = await ctx.durable_execute_async(wait_for_gate, event.x)
        ctx.send_event(OutputEvent(output={"module": type(event).__module__, "x": n}))


def test_the_stored_form_names_the_class_only_when_another_owns_the_type():
    assert event_json(FIRST.Ping(x=1), "event")[EVENT_CLASS_KEY] == \
        "fapy_test_pings_first:Ping"
    assert EVENT_CLASS_KEY not in event_json(SECOND.Ping(y=1), "event")
    assert EVENT_CLASS_KEY not in event_json(InputEvent(input=1), "event")


def test_the_action_gets_the_class_that_was_sent_live():
    gate().set()
    out = AgentsExecutionEnvironment.local().from_list([{"key": "k", "n": 5}]) \
        .apply(Sender()).collect()
    assert out == [{"module": "fapy_test_pings_first", "x": 5}]


def test_the_action_gets_the_class_that_was_sent_after_a_restore():
    plan = AgentPlan.from_agent(Sender())
    core = new_core(plan)
    try:
        state = InMemoryKeyState()
        res = core.on_input(KEY, {"n": 7}, state)
        assert res.errors == [] and res.outputs == []
        snap = snapshot_of(state, "json")  # ``got`` waits on the gate, mid-action
    finally:
        gate().set()
        core.close()
    outputs, errors, _ = resume(plan, snap)
    assert errors == []
    assert outputs == [{"module": "fapy_test_pings_first", "x": 7}]
