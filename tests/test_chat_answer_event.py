"""A chat's answer event is built without pydantic's validation: the same event, object for object.

The built-in chat action builds one ``ChatResponseEvent`` per chat (``_chat_steps.
answer_event``); what it builds must be what ``ChatResponseEvent(request_id=...,
response=...)`` makes (fields, fields set, id from the running action), and anything it
cannot build so goes through validation.
"""

from __future__ import annotations

from typing import Any

import pytest

from flink_agents_py.api import (
    ChatMessage,
    ChatResponse,
    ChatResponseEvent,
    MessageRole,
    SerializationError,
)
from flink_agents_py.api.internal import EVENT_ID_SOURCE
from flink_agents_py.runtime._chat_steps import answer_event
from flink_agents_py.runtime._serde import event_json, to_json_value


def _state(event: Any) -> tuple[Any, ...]:
    return (
        type(event),
        list(event.__dict__.items()),
        event.__pydantic_fields_set__,
        event.__pydantic_extra__,
        event.__pydantic_private__,
    )


def _answer() -> ChatResponse:
    return ChatResponse(
        message=ChatMessage(role=MessageRole.ASSISTANT, content="hi"), metadata={"k": 1}
    )


def test_the_answer_event_is_what_validation_makes():
    response = _answer()
    ids = iter(["r0/chat/e0", "r0/chat/e1"])
    token = EVENT_ID_SOURCE.set(lambda: next(ids))
    try:
        built = answer_event("r0/e0", response)
        validated = ChatResponseEvent(request_id="r0/e0", response=response)
    finally:
        EVENT_ID_SOURCE.reset(token)
    assert built.id == "r0/chat/e0" and validated.id == "r0/chat/e1"
    assert _state(built)[2:] == _state(validated)[2:]
    assert _state(built.model_copy(update={"id": "x"})) == _state(
        validated.model_copy(update={"id": "x"})
    )
    assert built.response is response and built == validated.model_copy(update={"id": built.id})
    assert built.model_dump() == validated.model_dump() | {"id": built.id}
    assert answer_event("r", response).id == ""  # built outside an action: no id yet


def test_what_it_cannot_build_goes_through_validation():
    class Mine(ChatResponse):
        note: str = ""

    own = Mine(message=ChatMessage(role=MessageRole.ASSISTANT, content="x"), note="n")
    event = answer_event("r", own)
    assert event.response is own and event.__pydantic_fields_set__ == {
        "request_id",
        "response",
        "type",
    }


@pytest.mark.parametrize("attributes", [{}, {"n": 1}, {"t": (1, "é")}])
@pytest.mark.parametrize("request_id", ["r0/e0", "r\u00e9", "r\ud800"])
def test_the_answer_events_stored_form_with_its_answer_known_is_the_walks(request_id, attributes):
    response = _answer()
    event = ChatResponseEvent(request_id=request_id, response=response, attributes=attributes)
    known = {"response": to_json_value(response, "an answer")["data"]}
    try:
        walked = event_json(event, "an answer event")
    except SerializationError:  # (a lone surrogate: no JSON form either way)
        with pytest.raises(SerializationError):
            event_json(event, "an answer event", known)
        return
    made = event_json(event, "an answer event", known)
    assert made == walked and list(made) == list(walked)
    assert made["attributes"] is not event.attributes
