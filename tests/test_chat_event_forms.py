"""A chat's request and answer events get the stored form the general walk gives them.

``_serde.event_json`` writes the usual ``ChatRequestEvent`` (``_chat_request.request_json``)
and a chat's answer as its action sends it (``answer_json``) directly, without the walk.
What it writes must be the walk's form key for key and in the same order (keyed state holds
it as text: a run journaled either way restores and replays the same), no container may be
shared with the event (the sender may change its lists after sending), and every other form
must go to the walk, which makes it or says what and where.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from flink_agents_py.api import (
    ChatMessage,
    ChatRequestEvent,
    ChatResponse,
    ChatResponseEvent,
    MessageRole,
    SerializationError,
    ToolCall,
)
from flink_agents_py.api.internal import EVENT_ID_SOURCE
from flink_agents_py.runtime import _serde
from flink_agents_py.runtime._chat_request import (
    answer_json,
    request_event,
    request_forms,
    request_json,
)
from flink_agents_py.runtime._chat_steps import answer_event
from flink_agents_py.runtime._serde import event_json, to_json_value
from flink_agents_py.runtime.core._results import event_of


def _walked(event: Any, known: Any = None) -> Any:
    """The form the general walk makes (the direct forms switched off), or its error."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_serde, "_REQUEST", None)
        mp.setattr(_serde, "_ANSWER", None)
        try:
            return event_json(event, "an event", known)
        except SerializationError as e:
            return e


def _same_text(a: Any, b: Any) -> bool:
    """The same JSON text (key order included), as keyed state would hold it."""
    return json.dumps(a, ensure_ascii=False) == json.dumps(b, ensure_ascii=False)


def _request(**fields: Any) -> ChatRequestEvent:
    fields.setdefault("messages", [ChatMessage(content="hi")])
    return ChatRequestEvent(model=fields.pop("model", "m"), **fields).model_copy(
        update={"id": "r0/ask/e0"}
    )


USUAL = [
    {},
    {"messages": []},
    {"model": "modèle ✓"},
    {
        "messages": [
            ChatMessage(role=MessageRole.SYSTEM, content="be brief", name="rules"),
            ChatMessage(content="é ✓ \u2028"),
            ChatMessage(role=MessageRole.TOOL, content="42", tool_call_id="t", name="f"),
            ChatMessage(role=MessageRole.ASSISTANT, content=""),
        ]
    },
]
OTHER = [
    {"prompt_args": {"city": "Oslo"}},
    {"prompt_args": {}},
    {"output_schema": {"type": "object"}},
    {"attributes": {"n": 1}},
    {"messages": [ChatMessage(content="x", extra_args={"tone": "dry"})]},
    {"messages": [ChatMessage(content="x", reasoning=[{"type": "thinking", "text": "because"}])]},
    {
        "messages": [
            ChatMessage(
                role=MessageRole.ASSISTANT,
                content="",
                tool_calls=[ToolCall(id="c", name="f", arguments={"a": 1})],
            )
        ]
    },
    {"messages": [ChatMessage(content="bad \ud800")]},  # no JSON form: the walk says so
    {"model": "bad \udfff"},
]


@pytest.mark.parametrize("fields", USUAL)
def test_the_usual_request_is_written_as_the_walk_writes_it(fields):
    event = _request(**fields)
    made = request_json(event)
    assert made is not None
    walked = _walked(event)
    assert made == walked and _same_text(made, walked)
    assert event_json(event, "an event") == walked
    # nothing shared with the event the sender holds
    assert made["messages"] is not event.messages
    for m, original in zip(made["messages"], event.messages, strict=True):
        assert m["tool_calls"] is not original.tool_calls
        assert m["extra_args"] is not original.extra_args
    assert made["attributes"] is not event.attributes
    # and the chat action's copy is rebuilt from it as from the walk's form
    assert event_of(made) == event_of(walked) == event


@pytest.mark.parametrize("fields", USUAL)
def test_the_chat_actions_copy_made_with_the_form_is_the_one_rebuilt_from_it(fields):
    event = _request(**fields)
    made = request_forms(event)
    assert made is not None
    form, copy = made
    assert form == request_json(event)
    rebuilt = request_event(form)
    assert rebuilt is not None
    assert _model_state(copy) == _model_state(rebuilt)  # values, fields set, extra, private
    # nothing shared with the sender's request or with the stored form
    assert copy is not event and copy.messages is not event.messages
    assert copy.messages is not form["messages"]
    for m, original in zip(copy.messages, event.messages, strict=True):
        assert m is not original
        assert m.tool_calls is not original.tool_calls
        assert m.extra_args is not original.extra_args
        assert m.reasoning is not original.reasoning
    assert copy.attributes is not event.attributes
    event.messages.append(ChatMessage(content="after sending"))  # the sender's changes
    event.messages[0].extra_args["tone"] = "changed"  # (a message is frozen, its dicts not)
    event.attributes["a"] = 1
    assert copy == rebuilt and event_json(copy, "again") == form


@pytest.mark.parametrize("fields", OTHER)
def test_no_copy_is_made_for_a_request_of_another_form(fields):
    assert request_forms(_request(**fields)) is None


def _model_state(model: Any) -> tuple[Any, ...]:
    return (
        type(model),
        [
            (k, [_model_state(m) for m in v] if k == "messages" else v)
            for k, v in model.__dict__.items()
        ],
        model.__pydantic_fields_set__,
        model.__pydantic_extra__,
        model.__pydantic_private__,
    )


@pytest.mark.parametrize("fields", OTHER)
def test_any_other_request_goes_to_the_walk(fields):
    event = _request(**fields)
    assert request_json(event) is None
    walked = _walked(event)
    if isinstance(walked, SerializationError):
        with pytest.raises(SerializationError):
            event_json(event, "an event")
    else:
        assert _same_text(event_json(event, "an event"), walked)


def test_a_request_of_another_shape_goes_to_the_walk():
    class Mine(ChatRequestEvent):
        pass

    built = ChatMessage.model_construct(role="user", content="x")  # its role as text
    for event in (
        ChatRequestEvent.model_construct(id="e", model="m", messages=[built]),
        ChatRequestEvent.model_construct(id="e", model="m", messages=[]),  # fields missing
        _request().model_copy(update={"type": "Other"}),
        _request(messages=[ChatMessage(content="x")]).model_copy(update={"id": 3}),
    ):
        assert request_json(event) is None
    mine = Mine(model="m", messages=[ChatMessage(content="x")])
    assert request_json(mine) is None
    assert _same_text(event_json(mine, "an event"), _walked(mine))  # its class named


def _answer(**fields: Any) -> tuple[ChatResponseEvent, dict[str, Any]]:
    response = fields.pop(
        "response",
        ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content="re: hi"),
            metadata={"tokens": 3},
        ),
    )
    token = EVENT_ID_SOURCE.set(lambda: fields.pop("id", "r0/ask/e0/chat_model_action/e0"))
    try:
        event = answer_event(fields.pop("request_id", "r0/ask/e0"), response)
    finally:
        EVENT_ID_SOURCE.reset(token)
    if fields:
        event = event.model_copy(update=fields)
    return event, {"response": to_json_value(response, "an answer")["data"]}


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"request_id": "r1/é"},
        {"id": "r0/ächt/e0/chat_model_action/e0"},
        {"error": "x"},
        {"traceback": "t"},
        {"attributes": {"n": 1}},
    ],
)
def test_the_answer_is_written_as_the_walk_writes_it_with_its_answer_known(fields):
    event, known = _answer(**fields)
    made = event_json(event, "an answer", known)
    walked = _walked(event, known)
    assert made == walked and _same_text(made, walked)
    assert made["response"] is known["response"]
    assert made["attributes"] is not event.attributes
    direct = answer_json(event, known)
    assert (direct is not None) is (fields == {})


def test_an_answer_without_its_known_form_or_another_event_goes_to_the_walk():
    event, known = _answer()
    assert answer_json(event, {"response": known["response"], "error": None}) is None
    assert _same_text(event_json(event, "an answer"), _walked(event))
    failed = ChatResponseEvent(request_id="r0/e0", error="the model said no")
    assert _same_text(event_json(failed, "an answer"), _walked(failed))
