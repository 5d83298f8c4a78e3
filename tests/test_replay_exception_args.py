"""A recorded failure's ``args`` after a restore: the values the first run's exception held.

An exception's ``args`` were recorded as their plain JSON form: one holding a ``set`` (or a
``frozenset``) had none, and a ``dict`` holding a tuple came back with a list, so a replay
rebuilt it from its message alone. ``MissingKeys("missing", {"a", "b"})`` was, after a
restore, ``MissingKeys("('missing', {'a', 'b'})")``: one text argument where the first run
had two, and ``msg, keys = e.args`` failed the action on a replay only. They are recorded
tagged now, as a durable call's result is (core-level restores, ``support.harness``).
"""

from __future__ import annotations

from typing import Any

import pytest
from support.harness import KEY, call_of, drive_until, new_core, resume, run_to_end, snapshot_of
from support.probes import gate

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState

pytestmark = pytest.mark.timeout(60)


class MissingKeys(Exception):
    """Raised with a message and the keys not found."""


FAILURES = {
    "set": lambda: MissingKeys("missing", {"b", "a"}),
    "frozenset": lambda: MissingKeys(frozenset({"a"})),
    "set alone": lambda: LookupError({"a"}),
    "tuple in a dict": lambda: ValueError({"k": (1, 2)}),
    "tuple in a dict, two args": lambda: ValueError("bad", {"k": (1, 2)}),
}


def fail(kind: str) -> None:
    raise FAILURES[kind]()


def gated(tag: str) -> str:
    assert gate().wait(10), "gate never opened"
    return tag


def _shape(value: Any) -> Any:
    """``value`` with its containers' types spelled out (``1`` and ``(1,)`` differ)."""
    if isinstance(value, (set, frozenset)):
        return [type(value).__name__, sorted(_shape(v) for v in value)]
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, [_shape(v) for v in value]]
    if isinstance(value, dict):
        return ["dict", {k: _shape(v) for k, v in value.items()}]
    return [type(value).__name__, value]


class Catches(Agent):
    """Catches the failure of c0 and outputs its type, text and ``args``, after c1."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        try:
            await ctx.durable_execute_async(fail, event.input["kind"])
        except Exception as e:  # noqa: BLE001 - what the action sees
            seen = {"type": type(e).__name__, "text": str(e), "args": _shape(e.args)}
        await ctx.durable_execute_async(gated, "g")  # the snapshot is taken here
        ctx.send_event(OutputEvent(output=seen))


@pytest.mark.parametrize("kind", list(FAILURES))
def test_a_replayed_failure_has_the_args_the_first_run_had(kind, probes):
    plan = AgentPlan.from_agent(Catches())
    core = new_core(plan)
    try:
        gate().clear()
        state = InMemoryKeyState()
        res = core.on_input(KEY, {"kind": kind}, state)
        assert res.errors == []
        drive_until(core, state, quiet=True, done=lambda s: call_of(s, "go", 1) is not None)
        snapshot = snapshot_of(state, "json")
        gate().set()
        first, errors = run_to_end(core, state)
    finally:
        gate().set()
        core.close()
    assert errors == []
    raised = FAILURES[kind]()
    assert first == [{"type": type(raised).__name__, "text": str(raised),
                      "args": _shape(raised.args)}]
    outputs, errors, _ = resume(plan, snapshot)
    assert errors == [] and len(outputs) == 1
    [again] = outputs
    if "set" in kind:  # a set's text is in its hash order, which a restore's process draws anew
        assert sorted(again.pop("text")) == sorted(first[0]["text"])
        assert again == {k: v for k, v in first[0].items() if k != "text"}
    else:
        assert outputs == first
