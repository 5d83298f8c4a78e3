"""An event's public JSON form rebuilds its own class, even when another class took its type.

The last class defined with a type name owns it: a program may define its own
``ChatRequestEvent`` (type ``"ChatRequestEvent"``). Before, ``Event.to_json()`` did not
name the class, so ``event_from_json(ChatRequestEvent(...).to_json())`` (and
``Event.from_json``) built the program's class from the built-in's JSON form: another class,
or a validation error. Now the public form names the class (``$class``) exactly when its
type's class is another one; the usual form, and Apache Flink Agents' shape, are unchanged.
"""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Iterator

import pytest

from flink_agents_py.api import ChatMessage, ChatRequestEvent, Event, InputEvent, OutputEvent
from flink_agents_py.api._events import _BY_CLASS, _REGISTRY, EVENT_CLASS_KEY, event_from_json

MODULE = "fapy_test_own_chat_request"


@pytest.fixture
def taken_over() -> Iterator[type[Event]]:
    """A user's module defining its own ``ChatRequestEvent`` (registered last), undone after."""
    saved_registry, saved_classes = dict(_REGISTRY), dict(_BY_CLASS)
    module = types.ModuleType(MODULE)
    sys.modules[MODULE] = module
    exec(  # noqa: S102
        "from typing import ClassVar\nfrom flink_agents_py.api import Event\n"
        "class ChatRequestEvent(Event):\n"
        "    EVENT_TYPE: ClassVar[str] = 'ChatRequestEvent'\n"
        "    topic: str = ''\n",
        module.__dict__,
    )
    try:
        yield module.ChatRequestEvent
    finally:
        _REGISTRY.clear()
        _REGISTRY.update(saved_registry)
        _BY_CLASS.clear()
        _BY_CLASS.update(saved_classes)
        del sys.modules[MODULE]


def test_a_builtin_event_round_trips_when_a_user_class_took_its_type(taken_over):
    built_in = ChatRequestEvent(model="m", messages=[ChatMessage(role="user", content="hi")])
    data = built_in.to_json()
    assert data[EVENT_CLASS_KEY] == "flink_agents_py.api._events:ChatRequestEvent"
    again = event_from_json(data)
    assert type(again) is ChatRequestEvent and again == built_in
    assert type(Event.from_json(json.dumps(data))) is ChatRequestEvent
    own = taken_over(topic="t")  # the class that owns the type needs no tag
    assert EVENT_CLASS_KEY not in own.to_json()
    assert type(event_from_json(own.to_json())) is taken_over


def test_the_usual_json_form_is_unchanged():
    for event in (
        InputEvent(input={"a": 1}),
        OutputEvent(output=2),
        ChatRequestEvent(model="m"),
        Event(type="Ad", attributes={"x": 1}),
    ):
        data = event.to_json()
        assert EVENT_CLASS_KEY not in data
        assert set(data) >= {"id", "type", "attributes"}
        assert type(Event.from_json(json.dumps(data))) is type(event)


def test_a_base_event_of_a_typed_class_s_type_reads_as_that_class_and_logs_without_the_tag(
        taken_over):
    """``Event(type=T, attributes=...)`` (Flink Agents' unified events) whose type a class
    owns: its JSON form names ``Event``, yet ``T.from_event`` reads it as ``T`` (the tag was
    an extra field that failed validation) and the Apache event log writes no ``$class``."""
    from flink_agents_py.observability._apache_event_log import apache_event

    sent = Event(type="ChatRequestEvent", attributes={"topic": "rates"})
    assert EVENT_CLASS_KEY in sent.to_json()  # (rebuilt as the base class it is)
    typed = taken_over.from_event(sent)
    assert type(typed) is taken_over and typed.topic == "rates" and typed.id == sent.id
    _, logged = apache_event(sent)
    assert EVENT_CLASS_KEY not in json.dumps(logged)
