"""The built-in events' type names: ours, and Apache Flink Agents' spelling of each.

Events route by our names (``"OutputEvent"``), which keyed state, event logs and replay
records hold. Flink Agents names the same events ``"_output_event"``, and a program written
for it compares with that: ``event.type == "_output_event"``,
``OutputEvent.EVENT_TYPE == "_output_event"``, a listener's ``context.eventType ==
OutputEvent.EVENT_TYPE``. A built-in event's ``EVENT_TYPE`` (and so its ``type``) is a
``BuiltinEventType``: our name, equal to both spellings.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BuiltinEventType",
    "BUILTIN_TYPE_NAMES",
    "FLINK_AGENTS_EVENT_TYPES",
    "FLINK_AGENTS_NAMES",
    "builtin_keys",
]

FLINK_AGENTS_NAMES: dict[str, str] = {
    f"{camel}Event": f"_{snake}_event"
    for snake, camel in (
        ("input", "Input"),
        ("output", "Output"),
        ("chat_request", "ChatRequest"),
        ("chat_response", "ChatResponse"),
        ("tool_request", "ToolRequest"),
        ("tool_response", "ToolResponse"),
        ("context_retrieval_request", "ContextRetrievalRequest"),
        ("context_retrieval_response", "ContextRetrievalResponse"),
    )
}
"""Our type of each built-in event (``"InputEvent"``) and Apache Flink Agents' name of it."""


_INTERNED: dict[str, BuiltinEventType] = {}


class BuiltinEventType(str):
    """A built-in event's type: our name (``"OutputEvent"``), equal to Flink Agents' too.

    It is the text of our name (printed, written to JSON and keyed state as
    ``OutputEvent``) and compares equal to that and to Flink Agents' name of the type
    (``"_output_event"``). Its hash is our name's: a dict or set holding Flink Agents'
    names does not find it (look ``FLINK_AGENTS_NAMES[str(t)]`` up instead).

    Args:
        name: our name of a built-in event type (a key of ``FLINK_AGENTS_NAMES``).
    """

    __slots__ = ()

    def __new__(cls, name: str) -> BuiltinEventType:  # noqa: D102 - the class says it
        found = _INTERNED.get(str(name))  # one object a name: a dict finds it by identity,
        if found is not None:  # not by a Python ``__eq__`` call (the hot path's lookups)
            return found
        if name not in FLINK_AGENTS_NAMES:
            raise ValueError(
                f"{name!r} is no built-in event type (one of {', '.join(FLINK_AGENTS_NAMES)})"
            )
        made = _INTERNED[str(name)] = super().__new__(cls, name)
        return made

    def __eq__(self, other: object) -> bool:
        return str.__eq__(self, other) is True or (
            isinstance(other, str)
            and str.__eq__(other, FLINK_AGENTS_NAMES[str.__str__(self)]) is True
        )

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = str.__hash__

    def __reduce__(self) -> tuple[type[BuiltinEventType], tuple[str]]:
        return (BuiltinEventType, (str.__str__(self),))


FLINK_AGENTS_EVENT_TYPES: dict[str, str] = {
    theirs: BuiltinEventType(ours) for ours, theirs in FLINK_AGENTS_NAMES.items()
}
"""Apache Flink Agents' type strings of the built-in events (``"_input_event"``), to ours."""

BUILTIN_TYPE_NAMES: dict[str, str] = {
    **FLINK_AGENTS_EVENT_TYPES,
    **{ours: ours for ours in FLINK_AGENTS_EVENT_TYPES.values()},
}
# (keys: Flink Agents' names, plain, and ours, the ``BuiltinEventType`` objects themselves)
"""Both names of each built-in event type (``"_output_event"``, ``"OutputEvent"``), to ours."""


def builtin_keys(by_type: dict[str, Any]) -> dict[str, Any]:
    """``by_type`` keyed by the built-in types' own objects (``BuiltinEventType``), when named.

    A dict keyed by plain text finds an event's ``type`` (a ``BuiltinEventType``) only
    through a Python ``__eq__`` call a lookup; keyed by the object itself, by identity.

    Returns:
        A dict of the same items.
    """
    return {BUILTIN_TYPE_NAMES.get(t, t): v for t, v in by_type.items()}
