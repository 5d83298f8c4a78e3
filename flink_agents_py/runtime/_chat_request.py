"""A chat's request and answer events in and out of their stored JSON form, fast.

The chat action gets the request it answers rebuilt from the JSON form stored when it was
sent (``core/_results.event_of``): a fresh object, the same on a first run and on a replay
(the sender may still change its own request's lists after sending it). pydantic's
validation of that form is one of the costliest steps of a chat on the operator thread, and
for the usual request (text messages without tool calls or reasoning, no attributes) it
has nothing to check that is not checked here: ``request_event`` builds the request and its
messages as validation builds them (the values, the fields set; its dicts copies sharing no
list or dict with the stored form, ``unshared``), and leaves any other form
to validation (``tests/test_chat_request_event.py`` compares both, object for object).

The other way, a request's stored form is made as it is sent (``_serde.event_json``), and a
chat's answer event's as its action sends it: the general walk visits each field and
message, looks for models in the fields typed ``Any`` and for another class of the event's
type name, then checks the result encodes. For the usual request and the answer as the chat
action builds it, ``request_json`` and ``answer_json`` write that same form directly (key
for key, in the same order) and leave any other to the walk
(``tests/test_chat_event_forms.py`` compares both).
"""

from __future__ import annotations

from typing import Any

import orjson

from ..api import ChatMessage, ChatRequestEvent, ChatResponseEvent, MessageRole
from ..api.internal import EVENT_TYPES, SLOT_SETTERS
from ._json_codec import unshared

_REQUEST_TYPE, _ANSWER_TYPE = ChatRequestEvent.EVENT_TYPE, ChatResponseEvent.EVENT_TYPE
"""The built-in types (``BuiltinEventType``: compared by identity, looked up without a call)."""

__all__ = ["answer_json", "request_event", "request_forms", "request_json"]

_REQUEST_KEYS = frozenset(
    {"id", "type", "attributes", "attachments", "model", "messages", "prompt_args", "output_schema"}
)
_MESSAGE_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id", "name", "extra_args"})
_ROLES = {role.value: role for role in MessageRole}
_TEXT_OR_NONE = (str, type(None))
_FAST = (
    SLOT_SETTERS is not None
    and set(ChatRequestEvent.model_fields) == _REQUEST_KEYS
    and set(ChatMessage.model_fields) == _MESSAGE_KEYS | {"reasoning"}
    and not ChatRequestEvent.__private_attributes__
    and not ChatMessage.__private_attributes__
    and ChatRequestEvent.__pydantic_post_init__ is None
    and ChatMessage.__pydantic_post_init__ is None
)
"""Whether the classes are laid out as ``request_event`` knows them."""


def _message(data: Any) -> ChatMessage | None:
    """The message validation makes of ``data``, or ``None`` when validation must decide."""
    if type(data) is not dict or data.keys() != _MESSAGE_KEYS:
        return None
    role = _ROLES.get(data["role"]) if type(data["role"]) is str else None
    extra = data["extra_args"]
    calls = data["tool_calls"]
    if (
        role is None
        or type(data["content"]) is not str
        or type(calls) is not list
        or calls
        or type(data["tool_call_id"]) not in _TEXT_OR_NONE
        or type(data["name"]) not in _TEXT_OR_NONE
        or type(extra) is not dict
    ):
        return None
    set_dict, set_fields, set_extra, set_private = SLOT_SETTERS  # type: ignore[misc]
    message = ChatMessage.__new__(ChatMessage)
    set_dict(
        message,
        {
            "role": role,
            "content": data["content"],
            "tool_calls": [],
            "tool_call_id": data["tool_call_id"],
            "name": data["name"],
            "extra_args": unshared(extra) if extra else {},
            "reasoning": [],
        },
    )
    set_fields(message, set(_MESSAGE_KEYS))
    set_extra(message, None)
    set_private(message, None)
    return message


def request_event(data: dict[str, Any]) -> ChatRequestEvent | None:
    """``ChatRequestEvent.model_validate(data)`` for a request's usual stored form.

    Args:
        data: a ``ChatRequestEvent``'s stored JSON form.

    Returns:
        The request as validation builds it; ``None`` when validation must build it (any
        other form: a class of another name, attributes, a message with tool calls or
        reasoning, values of other types).
    """
    if (
        not _FAST
        or data.keys() != _REQUEST_KEYS
        or EVENT_TYPES.get(_REQUEST_TYPE) is not ChatRequestEvent
    ):
        return None
    event_id, model, args, schema = (
        data["id"],
        data["model"],
        data["prompt_args"],
        data["output_schema"],
    )
    if (
        data["type"] != "ChatRequestEvent"
        or type(event_id) is not str
        or type(model) is not str
        or data["attributes"] != {}
        or type(data["attributes"]) is not dict
        or data["attachments"] != {}
        or type(data["attachments"]) is not dict
        or type(data["messages"]) is not list
        or not (args is None or type(args) is dict)
        or not (schema is None or type(schema) is dict)
    ):
        return None
    messages = []
    for m in data["messages"]:
        message = _message(m)
        if message is None:
            return None
        messages.append(message)
    set_dict, set_fields, set_extra, set_private = SLOT_SETTERS  # type: ignore[misc]
    event = ChatRequestEvent.__new__(ChatRequestEvent)
    set_dict(
        event,
        {
            "id": event_id,
            "type": _REQUEST_TYPE,
            "attributes": {},
            "attachments": {},
            "model": model,
            "messages": messages,
            "prompt_args": None if args is None else unshared(args),
            "output_schema": None if schema is None else unshared(schema),
        },
    )
    set_fields(event, set(_REQUEST_KEYS))
    set_extra(event, None)
    set_private(event, None)
    return event


_REQUEST_ORDER = tuple(ChatRequestEvent.model_fields)
_MESSAGE_ORDER = tuple(ChatMessage.model_fields)
_ANSWER_ORDER = tuple(ChatResponseEvent.model_fields)
_FORMS = (
    _REQUEST_ORDER
    == (
        "id",
        "type",
        "attributes",
        "attachments",
        "model",
        "messages",
        "prompt_args",
        "output_schema",
    )
    and _MESSAGE_ORDER
    == ("role", "content", "tool_calls", "tool_call_id", "name", "extra_args", "reasoning")
    and _ANSWER_ORDER
    == ("id", "type", "attributes", "attachments", "request_id", "response", "error", "traceback")
    and not any(f.alias for f in ChatRequestEvent.model_fields.values())
    and not any(f.alias for f in ChatMessage.model_fields.values())
    and not any(f.alias for f in ChatResponseEvent.model_fields.values())
    and getattr(ChatMessage, "__json_omit_empty__", ()) == ("reasoning",)
    and not getattr(ChatRequestEvent, "__json_omit_empty__", ())
    and not getattr(ChatResponseEvent, "__json_omit_empty__", ())
)
"""Whether the classes are laid out as ``request_json`` and ``answer_json`` know them."""


def request_json(event: ChatRequestEvent) -> dict[str, Any] | None:
    """``event_json(event)`` for a request of the usual form, written directly.

    The usual form: the class registered for its type, no extra fields, no attributes or
    attachments, no prompt arguments or output schema, and messages of text only (no tool
    calls, ``extra_args`` or reasoning) whose values are of the types validation gives them.
    Its JSON form has no model to tag, no field typed ``Any`` holding a model and no class
    to name, so it is its fields' values, each message's fields with its role's value and
    its empty ``reasoning`` left out (``_serde.OMIT_EMPTY``).

    Args:
        event: a ``ChatRequestEvent`` (its exact class).

    Returns:
        The JSON form; ``None`` for any other form, and for text that is not valid UTF-8
        (``event_json``'s walk then makes it, or says what and where).
    """
    forms = request_forms(event, copy=False)
    return None if forms is None else forms[0]


def request_forms(
    event: ChatRequestEvent, copy: bool = True
) -> tuple[dict[str, Any], ChatRequestEvent | None] | None:
    """``request_json(event)`` and the request the chat action gets, made in one pass.

    The second is what ``request_event`` builds from the first (the chat action's own copy,
    sharing no list or dict with the form or with ``event``), made from ``event``'s values
    as the form is written, when the request is sent: the sender may change its request
    after sending it, and the copy, like the form, is what it held then.

    Args:
        event: a ``ChatRequestEvent`` (its exact class).
        copy: whether to make the copy (else the second is ``None``: ``request_json``).

    Returns:
        The JSON form and the copy; ``None`` when ``request_json`` gives ``None``, or (with
        ``copy``) ``request_event`` would leave the form to validation.
    """
    values = event.__dict__
    if (
        not _FORMS
        or tuple(values) != _REQUEST_ORDER
        or event.__pydantic_extra__
        or values["type"] is not _REQUEST_TYPE
        or EVENT_TYPES.get(_REQUEST_TYPE) is not ChatRequestEvent
        or type(values["id"]) is not str
        or type(values["model"]) is not str
        or values["prompt_args"] is not None
        or values["output_schema"] is not None
        or (attributes := values["attributes"]).__class__ is not dict
        or attributes
        or (attachments := values["attachments"]).__class__ is not dict
        or attachments
        or (messages := values["messages"]).__class__ is not list
    ):
        return None
    if copy and not _FAST:
        return None
    copies: list[ChatMessage] | None = [] if copy else None
    forms = []
    for m in messages:
        fields = m.__dict__
        if (
            type(m) is not ChatMessage
            or tuple(fields) != _MESSAGE_ORDER
            or m.__pydantic_extra__
            or (role := fields["role"]).__class__ is not MessageRole
            or type(content := fields["content"]) is not str
            or (calls := fields["tool_calls"]).__class__ is not list
            or calls
            or type(call_id := fields["tool_call_id"]) not in _TEXT_OR_NONE
            or type(name := fields["name"]) not in _TEXT_OR_NONE
            or (extra := fields["extra_args"]).__class__ is not dict
            or extra
            or fields["reasoning"]
        ):
            return None
        forms.append(
            {
                "role": role._value_,  # (``.value`` without its descriptor)
                "content": content,
                "tool_calls": [],
                "tool_call_id": call_id,
                "name": name,
                "extra_args": {},
            }
        )
        if copies is not None:  # (``_message`` of that form: its values, its fields set)
            set_dict, set_fields, set_extra, set_private = SLOT_SETTERS  # type: ignore[misc]
            message = ChatMessage.__new__(ChatMessage)
            set_dict(
                message,
                {
                    "role": role,
                    "content": content,
                    "tool_calls": [],
                    "tool_call_id": call_id,
                    "name": name,
                    "extra_args": {},
                    "reasoning": [],
                },
            )
            set_fields(message, set(_MESSAGE_KEYS))
            set_extra(message, None)
            set_private(message, None)
            copies.append(message)
    data: dict[str, Any] = {
        "id": values["id"],
        "type": "ChatRequestEvent",
        "attributes": {},
        "attachments": {},
        "model": values["model"],
        "messages": forms,
        "prompt_args": None,
        "output_schema": None,
    }
    try:
        orjson.dumps(data)  # what keyed state can hold: UTF-8 text (as the walk checks)
    except orjson.JSONEncodeError:
        return None
    if copies is None:
        return data, None
    set_dict, set_fields, set_extra, set_private = SLOT_SETTERS  # type: ignore[misc]
    request = ChatRequestEvent.__new__(ChatRequestEvent)  # (``request_event`` of ``data``)
    set_dict(
        request,
        {
            "id": data["id"],
            "type": _REQUEST_TYPE,
            "attributes": {},
            "attachments": {},
            "model": data["model"],
            "messages": copies,
            "prompt_args": None,
            "output_schema": None,
        },
    )
    set_fields(request, set(_REQUEST_KEYS))
    set_extra(request, None)
    set_private(request, None)
    return data, request


def answer_json(event: ChatResponseEvent, known: dict[str, Any]) -> dict[str, Any] | None:
    """``event_json(event, known=known)`` for a chat's answer as its action sends it.

    That answer (``_chat_steps.answer_event``) holds its request's id, the response whose
    JSON form ``known`` gives (its model call's record), no error, attributes or
    attachments, and is of the class registered for its type: its JSON form is those
    values, the response's taken as given.

    Args:
        event: a ``ChatResponseEvent`` (its exact class).
        known: the JSON forms of some of its fields (``event_json``'s).

    Returns:
        The JSON form; ``None`` for any other event (the walk makes it), and for text that
        is not ASCII (the walk checks it).
    """
    values = event.__dict__
    if (
        not _FORMS
        or known.keys() != _RESPONSE_ONLY
        or tuple(values) != _ANSWER_ORDER
        or event.__pydantic_extra__
        or values["type"] is not _ANSWER_TYPE
        or EVENT_TYPES.get(_ANSWER_TYPE) is not ChatResponseEvent
        or type(event_id := values["id"]) is not str
        or not event_id.isascii()
        or type(request_id := values["request_id"]) is not str
        or not request_id.isascii()
        or values["error"] is not None
        or values["traceback"] is not None
        or (attributes := values["attributes"]).__class__ is not dict
        or attributes
        or (attachments := values["attachments"]).__class__ is not dict
        or attachments
    ):
        return None
    return {
        "id": event_id,
        "type": "ChatResponseEvent",
        "attributes": {},
        "attachments": {},
        "request_id": request_id,
        "response": known["response"],
        "error": None,
        "traceback": None,
    }


_RESPONSE_ONLY = frozenset({"response"})
