"""Apache Flink Agents' memory observation events (its ``api/events/memory_event.py``).

Newer than 0.3: an event per kind of memory operation, ``{id, type, attributes: {key,
value}}``, where ``key`` is the record's key as text and ``value`` a JSON map of what the
operation did (for a short-term write, ``{"user.tier": "gold"}``: each path written and its
last value). An action may listen to one (``@action(ShortTermWriteEvent)``). Here
``ShortTermWriteEvent`` and ``SensoryWriteEvent`` are sent when an action that wrote that
memory completes (``runtime/_memory_events.py``); the other kinds exist so that programs
naming them import and build them, and none is sent. The write events are also sent, to
the event logs and listeners, when Flink Agents' file event log or an event listener is
configured; ``AgentRunBeginEvent`` (opt-in, ``agent-run.begin-event``) is sent by an action
the environment adds (``send_run_begin``), which runs before the agent's own on each input.
"""

from __future__ import annotations

import base64
import json
from typing import Any, ClassVar

from pydantic_core import to_jsonable_python

from ..api import Event, RunnerContext
from ..api import EventType as _EventType

__all__ = ["MemoryEvent", "ShortTermWriteEvent", "ShortTermReadEvent", "SensoryWriteEvent",
           "SensoryReadEvent", "LongTermUpdateEvent", "LongTermGetEvent",
           "LongTermSearchEvent", "EventType", "AgentRunBeginEvent", "send_run_begin"]


def _json_bytes(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):  # as Jackson writes a byte[]: base64 text
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _observation(key: Any, value: Any) -> dict[str, Any]:
    """The ``key`` / ``value`` attributes of a memory event, checked and made JSON."""
    if not isinstance(key, str):
        raise TypeError("a memory event's 'key' must be a string")
    if not isinstance(value, dict):
        raise TypeError("a memory event's 'value' must be a dict")
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, default=_json_bytes)
    except (TypeError, ValueError) as e:
        raise ValueError("a memory event's value must be JSON serializable") from e
    return {"key": key, "value": json.loads(text)}


class MemoryEvent(Event):
    """Base of the memory observation events: build one of its subclasses.

    Args:
        key: the record's key, as text.
        value: the operation's JSON map.

    Raises:
        TypeError: for this base class itself, a key that is not text or a value that is
            not a dict.
    """

    EVENT_TYPE: ClassVar[str | None] = "_memory_event"

    def __init__(self, *, key: str, value: dict[str, Any]) -> None:
        if type(self) is MemoryEvent:
            raise TypeError("MemoryEvent is abstract; instantiate one of its subclasses")
        super().__init__(type=type(self).EVENT_TYPE, attributes=_observation(key, value))

    @classmethod
    def is_memory_type(cls, type: str | None) -> bool:  # noqa: A002 - theirs
        """Whether ``type`` is one of the seven memory operation types."""
        return type in _BY_TYPE

    @classmethod
    def from_event(cls, event: Event) -> MemoryEvent:
        """The typed memory event of an event of a memory type (its id kept).

        Raises:
            ValueError: when the event's type is no memory type.
        """  # noqa: DOC201
        found = _BY_TYPE.get(event.type)
        if found is None:
            raise ValueError(f"Not a memory event type: {event.type}")
        given: dict[str, Any] = {"key": event.attributes.get("key"),
                                 "value": event.attributes.get("value")}
        if found is LongTermUpdateEvent:
            given["cleared_sets"] = event.attributes.get("cleared_sets", [])
        typed = found(**given)
        typed.__dict__["id"] = event.id  # the event it reads, as Flink Agents keeps it
        return typed

    @property
    def key(self) -> str:
        """The record's key, as text."""
        return str(self.attributes["key"])

    @property
    def value(self) -> dict[str, Any]:
        """The operation's JSON map."""
        found: dict[str, Any] = self.attributes["value"]
        return found


class ShortTermWriteEvent(MemoryEvent):
    """Short-term memory written by an action: ``value`` maps each path to its value."""

    EVENT_TYPE: ClassVar[str | None] = "_short_term_write_event"


class ShortTermReadEvent(MemoryEvent):
    """A read of short-term memory (not sent here)."""

    EVENT_TYPE: ClassVar[str | None] = "_short_term_read_event"


class SensoryWriteEvent(MemoryEvent):
    """Sensory memory written by an action: ``value`` maps each path to its value."""

    EVENT_TYPE: ClassVar[str | None] = "_sensory_write_event"


class SensoryReadEvent(MemoryEvent):
    """A read of sensory memory (not sent here)."""

    EVENT_TYPE: ClassVar[str | None] = "_sensory_read_event"


class LongTermUpdateEvent(MemoryEvent):
    """Long-term memory adds, updates and deletes, and sets cleared (not sent here).

    Args:
        key: the record's key, as text.
        value: the operation's JSON map.
        cleared_sets: the memory sets cleared.

    Raises:
        TypeError: when ``cleared_sets`` is not a list of names.
    """

    EVENT_TYPE: ClassVar[str | None] = "_long_term_update_event"

    def __init__(self, *, key: str, value: dict[str, Any],
                 cleared_sets: list[str] | None = None) -> None:
        if cleared_sets is not None and not (
                isinstance(cleared_sets, list) and all(isinstance(s, str) for s in cleared_sets)):
            raise TypeError("a long-term update's 'cleared_sets' must be a list of names")
        super().__init__(key=key, value=value)
        self.attributes["cleared_sets"] = list(cleared_sets or [])

    @property
    def cleared_sets(self) -> list[str]:
        """The memory sets cleared."""
        return list(self.attributes.get("cleared_sets", []))


class LongTermGetEvent(MemoryEvent):
    """A long-term memory read by id (not sent here)."""

    EVENT_TYPE: ClassVar[str | None] = "_long_term_get_event"


class LongTermSearchEvent(MemoryEvent):
    """A search of long-term memory (not sent here)."""

    EVENT_TYPE: ClassVar[str | None] = "_long_term_search_event"

    @property
    def results(self) -> dict[str, Any]:
        """``value``: each query's ordered hits."""
        return self.value


_BY_TYPE: dict[str | None, type[MemoryEvent]] = {c.EVENT_TYPE: c for c in (
    ShortTermWriteEvent, ShortTermReadEvent, SensoryWriteEvent, SensoryReadEvent,
    LongTermUpdateEvent, LongTermGetEvent, LongTermSearchEvent)}


class AgentRunBeginEvent(Event):
    """The begin of a run: the key's short-term memory values (Flink Agents' run event).

    Sent when ``agent-run.begin-event`` is on, before the run's actions run: ``value`` maps
    each short-term memory path holding a value (dotted, ``"user.tier"``) to its JSON form;
    objects themselves, and values with no JSON form, are left out. Not a ``MemoryEvent``.

    Args:
        key: the record's key, as text.
        value: the snapshot.

    Raises:
        TypeError: when the key is not text or the value not a dict.
    """

    EVENT_TYPE: ClassVar[str | None] = "_agent_run_begin_event"

    def __init__(self, *, key: str, value: dict[str, Any]) -> None:
        super().__init__(type=AgentRunBeginEvent.EVENT_TYPE, attributes=_observation(key, value))

    @property
    def key(self) -> str:
        """The record's key, as text."""
        return str(self.attributes["key"])

    @property
    def value(self) -> dict[str, Any]:
        """The short-term memory values, by dotted path."""
        found: dict[str, Any] = self.attributes["value"]
        return found


def _values(fields: dict[str, Any], prefix: str, out: dict[str, Any]) -> dict[str, Any]:
    """The JSON values of ``fields`` by dotted path (objects walked; others left out)."""
    for name, value in fields.items():
        if isinstance(value, dict):  # an object (a ``MemoryObject``: a dict of its fields)
            _values(value, f"{prefix}{name}.", out)
            continue
        try:
            out[prefix + name] = json.loads(json.dumps(
                value, allow_nan=False, default=lambda v: _json_bytes(v)
                if isinstance(v, (bytes, bytearray)) else to_jsonable_python(v)))
        except (TypeError, ValueError):
            continue  # no JSON form: left out, as Flink Agents omits it
    return out


def send_run_begin(event: Event, ctx: RunnerContext) -> None:
    """Send the run's ``AgentRunBeginEvent`` (the action the environment adds, run first).

    Args:
        event: the run's input event.
        ctx: the action's context.
    """
    ctx.send_event(AgentRunBeginEvent(key=str(ctx.key),
                                      value=_values(ctx.short_term_memory.get_fields(), "", {})))


class EventType(_EventType):
    """The built-in events' routing types, with Flink Agents' memory event types.

    Each built-in type equals Flink Agents' name of it as well (``EventType.InputEvent ==
    "_input_event"``, as there), so a program comparing event log records or a listener's
    ``context.eventType`` with these works (``api.EventType``'s, a ``BuiltinEventType``).
    """

    ShortTermWriteEvent = "_short_term_write_event"
    ShortTermReadEvent = "_short_term_read_event"
    SensoryWriteEvent = "_sensory_write_event"
    SensoryReadEvent = "_sensory_read_event"
    LongTermUpdateEvent = "_long_term_update_event"
    LongTermGetEvent = "_long_term_get_event"
    LongTermSearchEvent = "_long_term_search_event"
    AgentRunBeginEvent = "_agent_run_begin_event"
