"""Events rebuilt from their JSON form: from text of any origin, and from the runtime's own state.

An event's JSON form may name its class (``EVENT_CLASS_KEY``, ``"$class"``), as
``module:qualname``. JSON read from outside (a Kafka record, a file, a server's answer handed
to ``Event.from_json``) is data: its tag selects among the ``Event`` subclasses this process
has already defined, and never makes it import a module (importing runs the module's code).
Only the runtime's own stored form (keyed state, a snapshot, written by ``Event.to_json``) may
import the module its tag names, as a restore in a fresh worker must.
"""

from __future__ import annotations

from typing import Any

from ._events import _BY_CLASS, EVENT_CLASS_KEY, Event, event_class_for
from ._secrets import cut_masked

__all__ = ["event_from_json", "stored_event_from_json"]

_BASE_TAG = f"{Event.__module__}:{Event.__qualname__}"
"""The tag of ``Event`` itself (an ad-hoc event of a type a class owns), never imported."""


def _defined(tag: Any) -> type[Event] | None:
    """The event class ``tag`` names among those defined in this process, or ``None``."""
    if type(tag) is not str:
        return None
    return Event if tag == _BASE_TAG else _BY_CLASS.get(tag)


def event_from_json(data: dict[str, Any], where: str = "an event's JSON form") -> Event:
    """Rebuild an event from its JSON form, of any origin (``Event.to_json``'s form).

    As the class its ``EVENT_CLASS_KEY`` names, when it has one; else as the class registered
    for its type. A tag may name only an ``Event`` subclass already defined in this process
    (its module imported): nothing is imported for it, so JSON from outside cannot make the
    process run a module's code.

    Args:
        data: the JSON object.
        where: names the JSON in an error (``"record 3"``, ``"the answer of server S"``).

    Returns:
        The event.

    Raises:
        ValueError: when the tag names no ``Event`` subclass of this process (naming the
            tag and ``where``); a ``pydantic.ValidationError`` when the fields do not fit.
    """
    if EVENT_CLASS_KEY not in data:
        return event_class_for(str(data.get("type", ""))).model_validate(data)
    data = dict(data)
    tag = data.pop(EVENT_CLASS_KEY)
    cls = _defined(tag)
    if cls is None:
        raise ValueError(
            f"{where}: its {EVENT_CLASS_KEY!r} tag {cut_masked(str(tag), 200)!r} names no Event "
            "subclass defined in this process, and nothing is imported for a tag of JSON read from "
            "outside: import the module that defines the class before reading the event, or "
            "drop the tag to rebuild it as its type's class"
        )
    return cls.model_validate(data)


def stored_event_from_json(data: dict[str, Any]) -> Event:
    """Rebuild an event from the runtime's own stored form (keyed state, a snapshot).

    That form was written by this program's code (``Event.to_json``), so its tag names a
    class the program defined: when that class's module is not imported yet (a restore in a
    fresh worker), it is imported. A tag that names no ``Event`` subclass, or whose module
    cannot be imported, rebuilds the event as its type's class. Never call it on JSON read
    from outside: use ``event_from_json``.

    Returns:
        The event.
    """
    tag = data.get(EVENT_CLASS_KEY)
    if type(tag) is str and _defined(tag) is None:
        from ._resources import import_qualified  # (not at import: _resources is heavier)

        try:
            import_qualified(tag)  # its class registers itself in ``_BY_CLASS`` when defined
        except Exception:  # noqa: BLE001 - rebuilt as its type's class instead
            pass
    if _defined(tag) is not None:
        return event_from_json(data)
    return event_class_for(str(data.get("type", ""))).model_validate(
        {k: v for k, v in data.items() if k != EVENT_CLASS_KEY}
    )
