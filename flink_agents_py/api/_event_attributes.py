"""A built-in event's ``attributes`` as Apache Flink Agents shows them: its payload too.

Flink Agents' built-in events (``InputEvent``, ``OutputEvent``, ``ChatRequestEvent``...)
keep their payload in ``attributes`` (``api/events/event.py``, 0.3.1: ``InputEvent(x)`` is
``Event(type="_input_event", attributes={"input": x})``), and its documentation says every
event carries its payload in that map, so programs read ``event.attributes["input"]``.
Ours keep the payload in typed fields; ``event.attributes`` of a built-in event is a dict of
those fields and its free attributes, read as Flink Agents reads it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["PayloadAttributes", "row_form", "typed_copy"]


class _AttributesView(dict[str, Any]):
    """The payload fields and free attributes of one event; a write goes to the event.

    A new free attribute set through it (``event.attributes["note"] = 1``) is the event's, as
    ``set_attr`` sets one; a payload field cannot be set (built events are immutable).
    """

    def __init__(self, own: dict[str, Any], fields: Iterable[tuple[str, Any]]) -> None:
        super().__init__(fields)
        self._fields = frozenset(self)
        self.update(own)
        self._own = own

    def __setitem__(self, name: str, value: Any) -> None:
        if name in self._fields:
            from ._errors import UsageError

            raise UsageError(f"{name!r} is a field of this event, which is immutable: build "
                             f"the event with it instead of setting it in its attributes")
        self._own[name] = value
        super().__setitem__(name, value)

    def __delitem__(self, name: str) -> None:
        del self._own[name]
        super().__delitem__(name)


class PayloadAttributes:
    """The ``attributes`` of a built-in event class (a data descriptor over the field).

    Args:
        payload: the names of the class's payload fields, in Flink Agents' order.
    """

    def __init__(self, payload: tuple[str, ...]) -> None:
        self._payload = payload

    def __get__(self, event: Any, owner: Any = None) -> Any:
        if event is None:  # the field's definition: what pydantic finds building a subclass
            return owner.model_fields["attributes"] if owner is not None else self
        values = event.__dict__
        return _AttributesView(values["attributes"],
                               ((name, values[name]) for name in self._payload))

    def __set__(self, event: Any, value: Any) -> None:
        event.__dict__["attributes"] = dict(value)


def typed_copy(cls: Any, event: Any) -> Any:
    """``event`` (not a ``cls``) as a ``cls``: what ``cls.from_event(event)`` returns.

    An ``Event`` built as Flink Agents builds one, ``Event(type="_input_event",
    attributes={"input": x})`` (or of the class's own type), becomes the class with those
    attributes as its fields (as given: a message stays a message), keeping its id.

    Args:
        cls: the event class.
        event: the event.

    Returns:
        The typed event.
    """
    from ._event_types import FLINK_AGENTS_EVENT_TYPES
    from ._events import EVENT_CLASS_KEY

    data = event.to_json()
    data.pop(EVENT_CLASS_KEY, None)  # (named when ``cls`` took the event's type over)
    if FLINK_AGENTS_EVENT_TYPES.get(data.get("type", "")) == cls.EVENT_TYPE:
        data["type"] = cls.EVENT_TYPE
    given = event.attributes
    moved = [n for n in cls.model_fields if n in given and n not in data]
    if moved:
        data["attributes"] = {k: v for k, v in (data.get("attributes") or {}).items()
                              if k not in moved}
        data.update((n, given[n]) for n in moved)
    return cls.model_validate(data)


def row_form(value: Any) -> dict[str, Any]:
    """The JSON form of a PyFlink ``Row`` in an event, as Flink Agents 0.3 writes it.

    ``{"type": "Row", "values": [...], "fields": [...]}`` (``fields`` when the row has
    names); pydantic's serialization fallback for an event's ``model_dump_json`` and
    ``to_json``.

    Args:
        value: a value pydantic cannot serialize.

    Returns:
        The row's form.

    Raises:
        PydanticSerializationError: for anything but a row, as pydantic raises it.
    """
    cls = type(value)
    if cls.__name__ != "Row" or not cls.__module__.startswith("pyflink"):
        from pydantic_core import PydanticSerializationError

        raise PydanticSerializationError(f"Unable to serialize unknown type: {cls}")
    form: dict[str, Any] = {"type": "Row", "values": list(value._values)}
    names = getattr(value, "_fields", None)
    if names:
        form["fields"] = list(names)
    return form
