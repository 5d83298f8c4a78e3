"""The one-action straight line (``runtime/core/_at_once.py``) and hostile actions.

Actions that raise what is not an ``Exception`` (``KeyboardInterrupt``, ``GeneratorExit``,
``asyncio.CancelledError``, ``SystemExit``), return awaitables and generators the runtime
does not step, send events no action takes, events of no JSON form, or an ``InputEvent``
again: with the straight line and forced onto the general path, each record must leave the
same outputs, error records, hooks, counters, metrics and stored state, and an exception
that leaves the callback (``KeyboardInterrupt``, ``SystemExit``: the process ends) must leave
the same execution live; a ``GeneratorExit`` or ``CancelledError`` of the action's own fails
its record (``test_action_base_exceptions``).
"""

from __future__ import annotations

import asyncio
import json
import types
from typing import Any

import pytest
from test_at_once import Hooks, _latency_counts, _stored

from flink_agents_py.api import Agent, Event, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.observability import AgentMetrics
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore
from flink_agents_py.runtime.core._observer import CompositeObserver
from flink_agents_py.runtime.recorder._state import InMemoryKeyState

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.filterwarnings("ignore::flink_agents_py.plan._action_checks.ActionReturnWarning"),
]


class _Awaitable:
    def __await__(self) -> Any:
        return iter([])


@types.coroutine
def _bare_coroutine() -> Any:
    yield None


class Sub(OutputEvent):
    """An output subclass (its own type name: no action takes it)."""


def _behave(event: InputEvent, ctx: RunnerContext) -> Any:
    do = event.input["do"]
    raised = {
        "interrupt": KeyboardInterrupt,
        "generator_exit": GeneratorExit,
        "cancelled": asyncio.CancelledError,
        "exit": SystemExit,
    }.get(do)
    if raised is not None:
        raise raised(do)
    if do == "no_json":
        ctx.send_event(OutputEvent(output={"o": object()}))
    if do == "nan":
        ctx.send_event(OutputEvent(output={"o": float("nan")}))
    if do == "input_again":
        ctx.send_event(InputEvent(input={"do": "echo", "n": -1, "key": ctx.key}))
    if do == "typeless":
        ctx.send_event(Event())
    if do == "sub":
        ctx.send_event(Sub(output={"sub": event.input["n"]}))
    ctx.send_event(OutputEvent(output={"key": ctx.key, "n": event.input["n"]}))
    return {
        "awaitable": _Awaitable,
        "bare": _bare_coroutine,
        "genexp": lambda: (i for i in range(3)),
    }.get(do, lambda: None)()


class Plain(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> Any:
        return _behave(event, ctx)


class Generating(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> Any:
        if event.input["do"] == "first_step":
            yield from ()
        _behave(event, ctx)
        if False:  # a generator action
            yield


class Async(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> Any:
        return _behave(event, ctx)


DOS = [
    "echo",
    "interrupt",
    "echo",
    "generator_exit",
    "cancelled",
    "no_json",
    "nan",
    "input_again",
    "typeless",
    "awaitable",
    "bare",
    "genexp",
    "sub",
    "first_step",
    "exit",
    "echo",
]


def _drive(agent: Agent, at_once: bool) -> dict[str, Any]:
    hooks, metrics = Hooks(), AgentMetrics()
    core = AgentCore(AgentPlan.from_agent(agent), observer=CompositeObserver(hooks, metrics))
    if not at_once:
        core._single = None
    core.open()
    seen: list[Any] = []
    try:
        for i, do in enumerate(DOS):
            key = f"k{i}"  # a key whose run an exception left live stays so: one key each
            state = InMemoryKeyState()
            try:
                res = core.on_input(key, {"key": key, "n": i, "do": do}, state, fresh=True)
                results = [res]
                while state.run is not None:
                    core.wait_for(key, 5.0)
                    assert core.has_deliveries(key), f"record {i} never ends"
                    results.append(core.advance(key, state))
                for r in results:
                    seen.append(("outputs", json.dumps(r.outputs, default=repr)))
                    seen.append(("errors", [e.model_dump() for e in r.errors]))
            except BaseException as e:  # noqa: BLE001 - what leaves the callback is compared
                live = sorted(core._live.get(key, {}))
                seen.append(("raised", i, type(e).__name__, live, sorted(state.run.inflight)))
            seen.append(("state", key, _stored(state)))
    finally:
        core.close()
    return {
        "seen": seen,
        "hooks": hooks.seen,
        "counters": dict(core.counters),
        "metrics": _latency_counts(metrics.snapshot()),
    }


@pytest.mark.parametrize("agent", [Plain, Generating, Async])
def test_hostile_actions_are_seen_the_same_on_either_path(agent):
    fast, general = _drive(agent(), True), _drive(agent(), False)
    assert fast == general
    raised = [s[1:] for s in fast["seen"] if s[0] == "raised"]
    assert [(i, name) for i, name, *_ in raised] == [
        (1, "KeyboardInterrupt"),
        (14, "SystemExit"),
    ]
    failed = [e for s in fast["seen"] if s[0] == "errors" for e in s[1]]
    assert [(e["key"], e["error_type"]) for e in failed if e["key"] in ("k3", "k4")] == [
        ("k3", "GeneratorExit"), ("k4", "CancelledError")]
    assert all(live == ["r0/on_input"] == inflight for *_, live, inflight in raised)
