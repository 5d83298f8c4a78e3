"""A chat request rebuilt for the chat action without validation: the same, object for object.

The built-in chat action gets its request rebuilt from the stored JSON form
(``core/_results.event_of``); the usual form is built as pydantic's validation builds it
(``_chat_request.request_event``). What it builds must be what ``model_validate`` makes
(values, fields set, fresh containers: the stored form is never shared), and every other
form must go to validation.
"""

from __future__ import annotations

from typing import Any

import pytest

from flink_agents_py.api import ChatMessage, ChatRequestEvent, MessageRole, ToolCall
from flink_agents_py.runtime._chat_request import request_event
from flink_agents_py.runtime._serde import event_json
from flink_agents_py.runtime.core._results import event_of


def _state(model: Any) -> tuple[Any, ...]:
    return (
        type(model),
        [
            (
                k,
                _state(v)
                if isinstance(v, ChatMessage)
                else [_state(m) for m in v]
                if k == "messages"
                else v,
            )
            for k, v in model.__dict__.items()
        ],
        model.__pydantic_fields_set__,
        model.__pydantic_extra__,
        model.__pydantic_private__,
    )


def _stored(**fields: Any) -> dict[str, Any]:
    event = ChatRequestEvent(model="m", **fields)
    return event_json(event.model_copy(update={"id": "r0/e0"}), "a request")


USUAL = [
    {"messages": [ChatMessage(content="hi")]},
    {"messages": []},
    {
        "messages": [
            ChatMessage(role=MessageRole.SYSTEM, content="be brief", name="rules"),
            ChatMessage(content="é ✓"),
            ChatMessage(role=MessageRole.TOOL, content="42", tool_call_id="t", name="f"),
            ChatMessage(content="x", extra_args={"tone": "dry", "n": [1, {"a": 2.5}]}),
        ]
    },
    {
        "messages": [ChatMessage(content="q")],
        "prompt_args": {"city": "Oslo", "n": [1]},
        "output_schema": {"type": "object", "properties": {"a": {"type": "integer"}}},
    },
]


@pytest.mark.parametrize("fields", USUAL)
def test_the_usual_request_is_built_as_validation_builds_it(fields):
    data = _stored(**fields)
    built = request_event(data)
    assert built is not None
    validated = ChatRequestEvent.model_validate(data)
    assert _state(built) == _state(validated)
    assert built == validated and event_of(data) == validated
    for name in ("prompt_args", "output_schema"):  # fresh containers, as validation's
        assert getattr(built, name) is None or getattr(built, name) is not data[name]
    for message, stored in zip(built.messages, data["messages"], strict=True):
        assert message.extra_args is not stored["extra_args"]
    assert event_json(built, "again") == data  # its JSON form is the stored one


OTHER = {
    "tool calls": (
        {
            "messages": [
                ChatMessage(
                    role=MessageRole.ASSISTANT,
                    tool_calls=[ToolCall(id="t", name="f", arguments={"a": 1})],
                )
            ]
        },
        None,
    ),
    "reasoning": (
        {
            "messages": [
                ChatMessage(role=MessageRole.ASSISTANT, content="a", reasoning=[{"type": "t"}])
            ]
        },
        None,
    ),
    "attributes": ({"messages": [], "attributes": {"a": 1}}, None),
    "a role of no such name": (
        {"messages": [ChatMessage(content="x")]},
        lambda d: d["messages"][0].update(role="boss"),
    ),
    "a number for text": (
        {"messages": [ChatMessage(content="x")]},
        lambda d: d["messages"][0].update(content=5),
    ),
    "a missing message field": (
        {"messages": [ChatMessage(content="x")]},
        lambda d: d["messages"][0].pop("name"),
    ),
    "an extra message field": (
        {"messages": [ChatMessage(content="x")]},
        lambda d: d["messages"][0].update(note="n"),
    ),
    "a class named": ({"messages": []}, lambda d: d.update({"$class": "a.b:C"})),
    "prompt values as a list": ({"messages": []}, lambda d: d.update(prompt_args=[1])),
    "another type": ({"messages": []}, lambda d: d.update(type="Other")),
}


@pytest.mark.parametrize("case", list(OTHER))
def test_any_other_form_is_left_to_validation(case):
    fields, change = OTHER[case]
    data = _stored(**fields)
    if change is not None:
        change(data)
    assert request_event(data) is None
