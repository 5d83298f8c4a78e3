"""A freshly decoded record reaches its action without a second copy, and with the types a
replay gives it (issue 31, part 4: the echo record's cost).

The Flink operator's record is decoded for its one call (``AgentCore.on_input(...,
fresh=True)``): the action may get it as it is when it is what a copy of its stored form
would be, type for type. Anything else gets the copy, so that an action sees the same types
on its first run as after a restore (``input_event`` from the stored form).
"""

from __future__ import annotations

import enum
from typing import Any

import pytest

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore
from flink_agents_py.runtime._serde import to_json_value
from flink_agents_py.runtime.core._results import input_event
from flink_agents_py.runtime.recorder._state import InMemoryKeyState

pytestmark = pytest.mark.timeout(60)

SEEN: list[Any] = []


class Keeps(Agent):
    @action(InputEvent)
    @staticmethod
    def keep(event: InputEvent, ctx: RunnerContext) -> None:
        SEEN.append(event.input)
        if isinstance(event.input, dict) and event.input.get("fail"):
            event.input["n"] = "changed by the action"  # before it fails
            raise ValueError("fails after changing its input")
        ctx.send_event(OutputEvent(output={"n": event.input["n"]}))


def _run(record: Any, fresh: bool) -> tuple[Any, Any]:
    """What the action got for ``record``, and the key's result."""
    SEEN.clear()
    core = AgentCore(AgentPlan.from_agent(Keeps()), max_in_flight=4)
    core.open()
    try:
        res = core.on_input("k", record, InMemoryKeyState(), fresh=fresh)
    finally:
        core.close()
    assert len(SEEN) == 1
    return SEEN[0], res


def test_a_fresh_flat_record_reaches_the_action_without_a_copy():
    record = {"n": 1, "t": 1.5, "s": "x", "b": True, "z": None}
    got, res = _run(record, fresh=True)
    assert got is record and res.outputs == [{"n": 1}]
    got, _ = _run(dict(record), fresh=False)  # a record someone else holds: copied
    assert got == record and got is not record


def test_an_action_changing_its_fresh_input_changes_no_stored_form():
    record = {"n": 1, "fail": True}
    got, res = _run(record, fresh=True)
    assert got is record and record["n"] == "changed by the action"
    [error] = res.errors
    assert error.input == {"n": 1, "fail": True}  # the stored form: what a replay reads


class Sub(dict):  # type: ignore[type-arg]
    pass


class Name(str):
    pass


class Level(enum.IntEnum):
    HIGH = 3


@pytest.mark.parametrize(
    "record",
    [
        Sub(n=1),  # a dict subclass: a dict after a replay
        {"n": (1, 2)},  # a tuple: a list after a replay
        {Name("n"): 1},  # a str subclass key: a str after a replay
        {"n": Name("v")},  # a str subclass value
        {"n": Level.HIGH},  # an enum: its value after a replay
        {"n": {"deep": [1]}},  # nested: copied, as it always was
        {"$model": None, "data": {"n": 1}},  # a dict that looks like a tagged model
        [1, 2],
    ],
    ids=[
        "dict-subclass",
        "tuple",
        "str-subclass-key",
        "str-subclass-value",
        "enum",
        "nested",
        "tag-like",
        "list",
    ],
)
def test_a_fresh_record_reaches_the_action_with_the_types_of_a_replay(record):
    stored = to_json_value(record, "input record")
    replayed, _ = input_event("r0", stored)  # as after a restore: from the stored form
    got, _ = input_event("r0", stored, record)
    assert got.input == replayed.input
    assert _types(got.input) == _types(replayed.input)
    assert got.input is not record


def _types(value: Any) -> Any:
    if isinstance(value, dict):
        return (type(value), sorted((type(k).__name__, k, _types(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return (type(value), [_types(v) for v in value])
    return type(value)
