"""``OutputEvent(output=x)`` and ``InputEvent(input=x)`` skip pydantic's validation: same events.

Nearly every action builds an ``OutputEvent`` per record; its one field is typed ``Any``, so
``Event.__init__`` builds it as validation would, without validating (issue 31, part 4).
These tests hold the fast path to what validation makes, object for object, and keep every
other call (more keywords, a program's own subclass, bad input) on pydantic's path.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError, field_validator

from flink_agents_py.api import Event, InputEvent, OutputEvent
from flink_agents_py.api._event_build import bare_fields
from flink_agents_py.api._event_ids import EVENT_ID_SOURCE
from flink_agents_py.api._events import _OWN_FIELDS


class Point(BaseModel):
    x: int


VALUES: list[Any] = [
    None,
    0,
    "text",
    {"key": "k", "echo": {"a": [1, 2.5]}},
    [1, (2, 3)],
    Point(x=1),
    math.nan,
    {1: "not a text key"},
    object(),
]


def _validated(cls: type[Event], field: str, value: Any) -> Event:
    """What pydantic's own validation makes of ``cls(field=value)``."""
    event = cls.__new__(cls)
    cls.__pydantic_validator__.validate_python({field: value}, self_instance=event)
    return event


def _state(event: Event) -> tuple[Any, ...]:
    return (
        type(event),
        list(event.__dict__.items()),
        event.__pydantic_fields_set__,
        event.__pydantic_extra__,
        event.__pydantic_private__,
    )


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
@pytest.mark.parametrize(("cls", "field"), [(OutputEvent, "output"), (InputEvent, "input")])
def test_a_one_field_event_is_what_validation_makes(cls, field, value):
    ids = iter(["run/a/e0", "run/a/e1", "run/a/e2"])
    token = EVENT_ID_SOURCE.set(lambda: next(ids))
    try:
        by_keyword, by_position = cls(**{field: value}), cls(value)
        validated = _validated(cls, field, value)
    finally:
        EVENT_ID_SOURCE.reset(token)
    assert [e.id for e in (by_keyword, by_position, validated)] == [
        "run/a/e0",
        "run/a/e1",
        "run/a/e2",
    ]
    for event in (by_keyword, by_position):
        assert getattr(event, field) is value  # not a copy, as validation of ``Any``
        assert _state(event)[0] is type(validated)
        assert _state(event)[1][1:] == _state(validated)[1][1:]  # (ids aside, in order)
        assert _state(event)[2:] == _state(validated)[2:]
        assert event.model_fields_set == {"type", field}
        assert repr(event).replace(event.id, "") == repr(validated).replace(validated.id, "")
    with pytest.raises(ValidationError):  # frozen, as a validated one
        by_keyword.type = "Other"
    stored = by_keyword.__dict__["attributes"]  # (``attributes`` shows the payload)
    assert stored == {} and stored is not by_position.__dict__["attributes"]


def test_an_event_built_outside_an_action_has_no_id_yet_as_before():
    assert OutputEvent(output=1).id == "" == _validated(OutputEvent, "output", 1).id


def test_other_calls_keep_pydantic_validation_and_its_errors():
    assert OutputEvent(output=1, attributes={"a": 1}).__dict__["attributes"] == {"a": 1}
    assert OutputEvent(output=1, id="mine").id == "mine"
    assert OutputEvent().output is None and OutputEvent().model_fields_set == {"type"}
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        OutputEvent(outptu=1)
    with pytest.raises(ValidationError, match="has type 'OutputEvent', not 'Other'"):
        OutputEvent(output=1, type="Other")
    with pytest.raises(TypeError, match="at most 1 positional"):
        OutputEvent(1, 2)
    with pytest.raises(TypeError, match="by position and by keyword"):
        OutputEvent(1, output=2)


class CheckedOutput(OutputEvent):
    """A program's own output event with a validator of its field."""

    @field_validator("output")
    @classmethod
    def _positive(cls, value: Any) -> Any:
        if not isinstance(value, int) or value <= 0:
            raise ValueError("output must be a positive int")
        return value * 10


def test_a_programs_own_subclass_is_validated_as_it_declares():
    assert CheckedOutput(output=2).output == 20
    with pytest.raises(ValidationError, match="positive int"):
        CheckedOutput(output=-1)


def test_only_classes_validation_leaves_alone_qualify():
    class Typed(Event):
        EVENT_TYPE = "Typed"
        value: int = 0

    class Defaulted(Event):
        EVENT_TYPE = "Defaulted"
        value: Any = 5

    class Two(Event):
        EVENT_TYPE = "Two"
        a: Any = None
        b: Any = None

    found = bare_fields(
        Event, _OWN_FIELDS, OutputEvent, InputEvent, CheckedOutput, Typed, Defaulted, Two
    )
    assert found == {OutputEvent: "output", InputEvent: "input"}
