"""The stored form of an event an action execution sends (``ActionExecution.send_event``).

A chat's request sent at the agent's root in its usual form gets, with its form, the copy
the built-in chat action answers (``_chat_request.request_forms``): made from the values
the sender's request held when it was sent, as the form is, and handed over when the
request is dispatched (``core/_at_once.dispatch_emitted``, the execution's ``handed``), so
the chat action's request is not built a second time from the form.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...api import ChatRequestEvent, Event
from .._chat_request import request_forms
from .._serde import event_json

if TYPE_CHECKING:
    from ._execution import ActionExecution

__all__ = ["sent_form"]


def sent_form(ex: ActionExecution, sent: Event, known: dict[str, Any] | None) -> dict[str, Any]:
    """``event_json`` of ``sent``, an event ``ex`` sends; a chat's request's copy kept on ``ex``.

    Args:
        ex: the sending execution (its ``handed`` gets a chat request's form and copy).
        sent: the event, as sent.
        known: JSON forms of some of its fields (``event_json``'s).

    Returns:
        The event's stored JSON form.

    Raises:
        SerializationError: the event has no JSON form (``event_json``'s, naming where).
    """
    if type(sent) is ChatRequestEvent and ex.scope is None and known is None:
        forms = request_forms(sent)
        if forms is not None and forms[1] is not None:
            ex.handed = (forms[0], forms[1])
            return forms[0]
    return event_json(sent, f"event {sent.type} sent by {ex.execution_id}", known)
