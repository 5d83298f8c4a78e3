"""``event_is_plain``: the check that lets a sent output skip its JSON copy.

A sent event whose values are plain JSON data is handed on as it is; any other is turned into
its JSON form, which says what is wrong and where (``event_json``). The check must never pass
what ``event_json`` refuses or changes (a subclass, an enum, a UUID, a date, a non-finite
float, a text key's subclass, a lone surrogate, an integer past 64 bits, a cycle), and must
pass plain data, else every output pays the copy (issue 31, part 4).
"""

from __future__ import annotations

import datetime
import enum
import json
import uuid
from typing import Any

import pytest

from flink_agents_py.api import OutputEvent
from flink_agents_py.runtime._serde import event_is_plain, event_json


class Colour(enum.IntEnum):
    RED = 1


class Text(str):
    pass


class Mapping(dict):  # type: ignore[type-arg]
    pass


def _deep(n: int) -> Any:
    value: Any = 1
    for _ in range(n):
        value = [value]
    return value


def _output(value: Any) -> OutputEvent:
    return OutputEvent.model_construct(
        id="r0/a/e0", type="OutputEvent", attributes={}, attachments={}, output=value
    )


PLAIN = [
    None,
    1,
    "s",
    2.5,
    [],
    {},
    (),
    {"key": "k", "echo": {"n": 1, "t": 1.5, "s": "x"}},
    [1, [2, [3, (4, 5)]], {"a": [None, True, False]}],
    {"a": ""},
    {"a": 2.5, "b": [], "c": {}, "d": -0.0},
    _deep(200),
    [{"i": i} for i in range(1000)],
]
NOT_PLAIN = [
    float("nan"),
    {"a": [float("inf")]},
    {"a": float("nan")},
    {"a": 1, "b": float("-inf")},
    {"a": Mapping(b=1)},
    {"a": (1, b"x")},
    (float("-inf"),),
    {1: "x"},
    {"a": {2: "x"}},
    {"a": {1, 2}},
    {"a": b"bytes"},
    {"a": Colour.RED},
    {"a": uuid.UUID(int=1)},
    {"a": datetime.date(2026, 1, 1)},
    {"a": Text("t")},
    [Mapping(a=1)],
    {Text("k"): 1},
    {"a": "\ud800"},
    {"a": 2**64},
    {"a": [object()]},
    _deep(600),
]


@pytest.mark.parametrize("value", PLAIN, ids=lambda v: type(v).__name__)
def test_plain_data_is_plain_and_its_json_form_is_itself(value):
    event = _output(value)
    assert event_is_plain(event)
    assert event_json(event, "event")["output"] == json.loads(json.dumps(value))  # (tuples: lists)


@pytest.mark.parametrize("value", NOT_PLAIN, ids=lambda v: type(v).__name__)
def test_what_event_json_refuses_or_changes_is_never_plain(value):
    """Not plain: the output goes through ``event_json`` (refused, or a JSON copy)."""
    assert not event_is_plain(_output(value))


def test_cyclic_values_are_not_known():
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    loop: list[Any] = []
    loop.append([loop])
    assert not event_is_plain(_output(cyclic)) and not event_is_plain(_output(loop))
