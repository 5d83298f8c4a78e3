"""Apache Flink Agents' dynamic events: an event named by a string, its fields given freely.

``ctx.send_event(identifier="Scored", score=3)`` (or ``ctx.send_event(DynamicEvent(
identifier="Scored", score=3))``) sends an event of type ``"Scored"`` that ``@action("Scored")``
receives, with ``score`` read as a field (``event.score``) or an attribute
(``event.get_attr("score")``, ``event.attributes["score"]``). It is stored, routed and replayed
as any event of a program's own: its JSON form names its class and keeps its fields as
attributes.
"""

from __future__ import annotations

from typing import Any

from ._errors import UsageError
from ._event_types import BUILTIN_TYPE_NAMES
from ._events import Event
from ._secrets import cut_masked

__all__ = ["DynamicEvent", "SendEventArgumentError", "event_to_send"]


class SendEventArgumentError(UsageError, ValueError):
    """``send_event`` was given both an event and an ``identifier``, or neither.

    A ``ValueError``, as Apache Flink Agents raises, and our ``UsageError`` (a ``TypeError``,
    as this runtime raised before).
    """


class DynamicEvent(Event):
    """An event whose type is a string chosen when it is built (Flink Agents' ``DynamicEvent``).

    Args:
        identifier: the event's type: the string an action listens to it by
            (``@action("Scored")``). Required, a non-empty string.
        **fields: its fields (JSON data or pydantic models), kept as attributes.

    Raises:
        UsageError: when ``identifier`` is missing, empty or not a string, or names a
            built-in event type (``"OutputEvent"``, ``"_output_event"``...).
    """

    def __init__(self, identifier: str | None = None, /, **fields: Any) -> None:
        if identifier is None:
            identifier = fields.pop("identifier", None)
        elif "identifier" in fields:
            raise UsageError("DynamicEvent got its identifier twice (by position and keyword)")
        if "type" in fields and identifier is None:  # its stored form: {"type": ..., ...}
            identifier = fields.pop("type")
        if not isinstance(identifier, str) or not identifier:
            raise UsageError(
                f"DynamicEvent needs identifier= as a non-empty string (the type "
                f"an action listens to it by), got {cut_masked(repr(identifier), 80)}"
            )
        if identifier in BUILTIN_TYPE_NAMES:
            raise UsageError(
                f"DynamicEvent(identifier={identifier!r}) names a built-in event "
                f"type: build that event itself (OutputEvent(output=...)), or send "
                f"it with ctx.send_event(identifier={identifier!r}, ...)"
            )
        if fields.get("type", identifier) != identifier:
            raise UsageError(
                f"DynamicEvent got type={fields['type']!r} beside identifier="
                f"{identifier!r}: the identifier is its type"
            )
        fields.pop("type", None)
        super().__init__(type=identifier, **fields)

    @property
    def identifier(self) -> str:
        """The string this event was built with: its type."""
        return self.type


# its keywords it does not declare are kept as attributes (as a program's own event class
# keeps them; a class of this package refuses them unless it says so)
DynamicEvent.__event_fields__ = frozenset(DynamicEvent.model_fields)


def event_to_send(event: Event | None, identifier: str | None, attributes: dict[str, Any]) -> Event:
    """The event a ``send_event`` call names.

    ``event``, or Apache Flink Agents' dynamic event ``send_event(identifier="Type",
    **attributes)`` as a ``DynamicEvent`` (a built-in type's name, ``"_output_event"``, as
    ``Event(type=..., attributes=...)``, which the runtime makes the built-in event).

    Args:
        event: the event given, or ``None``.
        identifier: the dynamic event's type, or ``None``.
        attributes: the dynamic event's fields.

    Returns:
        The event to send.

    Raises:
        SendEventArgumentError: when the call names both an event and an identifier, or
            neither.
        UsageError: when it gives keyword attributes beside an event.
    """
    if identifier is not None:
        if event is not None:
            raise SendEventArgumentError(
                "send_event takes an event or identifier=..., not both (got "
                f"{type(event).__name__} and identifier={cut_masked(repr(identifier), 80)})"
            )
        if identifier in BUILTIN_TYPE_NAMES:
            return Event(type=identifier, attributes=attributes)
        return DynamicEvent(identifier, **attributes)
    if event is None:
        raise SendEventArgumentError(
            "send_event needs an event or identifier='MyType' with its fields as keywords"
        )
    if attributes:
        raise UsageError(
            f"send_event got {sorted(attributes)} beside an event: keyword "
            f"attributes go with identifier='MyType' (or build the event with them)"
        )
    return event
