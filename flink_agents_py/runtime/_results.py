"""What the core hands out at a run's edges.

The run's input event, error records, and the result of one host callback.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ..api import Event, InputEvent
from ..api._events import event_from_json
from ._serde import from_json_value, is_tagged_model

__all__ = ["ErrorRecord", "StepResult", "input_event", "input_record", "event_of"]

_PLAIN = frozenset({str, int, float, bool, type(None)})
_INPUT_KEYS = frozenset({"id", "type", "attributes", "input"})


class ErrorRecord(BaseModel):
    """An action that failed, as emitted on the error output.

    Attributes:
        key: the record key.
        seq: the input's position in its key's sequence.
        action: the failing action's name.
        execution_id: the failing execution's identity.
        error_type: the exception's type name.
        message: the exception's message (secret-looking values redacted).
        input: the input record of the run.
        traceback: where it failed: the traceback with the user's files and lines, and the
            original failure's when it crossed a boundary (a tool, a chat model call, a
            sub-agent, a restore); bounded and redacted (see ``runtime._failures``).
    """

    key: Any
    seq: int
    action: str
    execution_id: str
    error_type: str
    message: str
    input: Any = None
    traceback: str | None = None


@dataclass
class StepResult:
    """What one ``advance`` produced.

    Attributes:
        outputs: ``OutputEvent.output`` values, in emission order.
        errors: failed actions.
        busy: the key still has a run in flight or queued inputs (the host must wake it
            again when I/O completes; see ``AgentCore.wait_for``).
    """

    outputs: list[Any] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    busy: bool = False


def input_record(stored: Any) -> Any:
    """A queued input record (its stored JSON form) as the agent's error output shows it.

    A pydantic model is the model again.

    Returns:
        The record.
    """
    return from_json_value(stored) if is_tagged_model(stored) else stored


def _plain(value: Any) -> Any:
    """A copy of stored JSON-form data with model tags removed.

    Returns:
        What ``event_json`` makes of the value (fields of a model, by alias), without
        checking again.
    """
    kind = type(value)
    if kind is dict:
        if is_tagged_model(value):
            return _plain(value["data"])
        return {k: v if type(v) in _PLAIN else _plain(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [v if type(v) in _PLAIN else _plain(v) for v in value]
    return value


def input_event(event_id: str, stored: Any) -> tuple[InputEvent, dict[str, Any]]:
    """The ``InputEvent`` of a run and its JSON form, from the input's stored JSON form.

    The input was checked when it was queued, so its JSON form is built directly (no second
    walk); the event's ``input`` is a copy, as a replay's event parsed from state has.

    Returns:
        The event and its JSON form (what ``event_json`` gives for it).
    """
    data: dict[str, Any] = {"id": event_id, "type": "InputEvent", "attributes": {},
                            "input": _plain(stored)}
    return event_of(data), data  # type: ignore[return-value]


def event_of(data: dict[str, Any]) -> Event:
    """The event an action gets from an event's JSON form (a fresh object per action).

    Returns:
        The event (an ``InputEvent`` is built without validating again: its JSON form is
        the runtime's own).
    """
    if data.get("type") == "InputEvent" and data.keys() == _INPUT_KEYS:
        return InputEvent.model_construct(id=data["id"], type="InputEvent",
                                          attributes=dict(data["attributes"]),
                                          input=data["input"])
    return event_from_json(data)
