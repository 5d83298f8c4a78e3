"""Event ids while an action runs, and which events a program may still change.

An event built inside an action gets its id at once from the execution being stepped
(``EVENT_ID_SOURCE``), which keeps it as not sent until ``send_event`` sends that very object.
Until then the event is only the action's own object: nothing recorded holds it, so its
fields may be set, as Apache Flink Agents' mutable events allow (``event.value = 2``). Once
sent (or received by an action) it is what the runtime recorded and replays.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

__all__ = ["EVENT_ID_SOURCE", "assign_unsent_field", "is_unsent", "new_event_id"]

EVENT_ID_SOURCE: contextvars.ContextVar[Callable[[], str] | None] = contextvars.ContextVar(
    "flink_agents_py_event_id_source", default=None
)
"""Set by the runtime while it steps an action: gives an event built there its id at once."""


def new_event_id() -> str:
    """The id of an event being built: the stepped execution's next one, else ``""``."""
    source = EVENT_ID_SOURCE.get()
    return source() if source is not None else ""


def is_unsent(event_id: str) -> bool:
    """Whether an event with ``event_id`` is its program's own object, recorded nowhere.

    Args:
        event_id: the event's id.

    Returns:
        True for an event built outside any action (no id: sending it sends a copy with an
        id of its own), or built by the action being stepped and not sent yet; False for an
        event sent or received (its id is no unsent one of the stepped execution).
    """
    if not event_id:
        return True
    execution = getattr(EVENT_ID_SOURCE.get(), "__self__", None)  # the stepped execution
    unsent = getattr(execution, "_unsent_ids", None)
    return unsent is not None and event_id in unsent


def assign_unsent_field(event: BaseModel, name: str, value: Any) -> None:
    """Set field ``name`` of an event ``is_unsent`` allows, validated as building it would.

    Args:
        event: the event (a frozen model: its field is replaced in place).
        name: one of its declared fields.
        value: the new value.

    Raises:
        ValidationError: when the event with that value does not validate; it is left as
            it was.
    """
    fields = {k: event.__dict__[k] for k in type(event).model_fields}
    fields[name] = value
    checked = type(event).model_validate(fields)
    event.__dict__[name] = checked.__dict__[name]
    event.__pydantic_fields_set__.add(name)
