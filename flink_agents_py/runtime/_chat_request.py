"""A chat request rebuilt from its stored JSON form for the built-in chat action, fast.

The chat action gets the request it answers rebuilt from the JSON form stored when it was
sent (``core/_results.event_of``): a fresh object, the same on a first run and on a replay
(the sender may still change its own request's lists after sending it). pydantic's
validation of that form is one of the costliest steps of a chat on the operator thread, and
for the usual request (text messages without tool calls or reasoning, no attributes) it
has nothing to check that is not checked here: ``request_event`` builds the request and its
messages as validation builds them (the values, the fields set; its dicts copies sharing no
list or dict with the stored form, ``unshared``), and leaves any other form
to validation (``tests/test_chat_request_event.py`` compares both, object for object).
"""

from __future__ import annotations

from typing import Any

from ..api import ChatMessage, ChatRequestEvent, MessageRole
from ..api.internal import EVENT_TYPES, SLOT_SETTERS
from ._json_codec import unshared

__all__ = ["request_event"]

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
        or EVENT_TYPES.get("ChatRequestEvent") is not ChatRequestEvent
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
            "type": "ChatRequestEvent",
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
