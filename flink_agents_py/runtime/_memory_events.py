"""Apache Flink Agents' memory write events, sent when an action that wrote memory completes.

Flink Agents (newer than 0.3; its ``api/events/memory_event.py`` and ``MemoryEventOptions``)
sends, at the end of an action that wrote short-term or sensory memory, a
``_short_term_write_event`` / ``_sensory_write_event`` whose attributes are ``key`` (the
record's key as text) and ``value`` (each path written and its last value). Writes are on
by default (``memory.generate-event`` and ``memory.generate-event.short-term-write`` /
``.sensory-write`` turn them off). Here such an event is sent only when an action of the
agent listens to its type, so an agent that does not costs nothing.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

from ..api.internal import event_class_for
from ._serde import from_json_value
from .context._memory import _DELETE

if TYPE_CHECKING:
    from collections.abc import Callable

    from .recorder._execution import ActionExecution

__all__ = ["WRITE_TYPES", "send_memory_events"]

_WRITE_EVENTS: tuple[tuple[str, str, Callable[[ActionExecution], list[Any]]], ...] = (
    ("_short_term_write_event", "short-term-write", lambda ctx: ctx.short_term_writes()),
    ("_sensory_write_event", "sensory-write", lambda ctx: ctx.sensory_writes()))
_SWITCH = "memory.generate-event"
WRITE_TYPES = tuple(t for t, _, _ in _WRITE_EVENTS)
"""The write event types: the core looks them up in ``plan.actions_by_event`` inline, so an
action that used memory in an agent not listening costs no call (``tests/test_call_budget``)."""


def _enabled(config: dict[str, Any], operation: str) -> bool:
    """Flink Agents' resolution: the operation's own key, else the master switch, else on."""
    for key in (f"{_SWITCH}.{operation}", _SWITCH):
        value = config.get(key)
        if value is not None:
            return value is True or str(value).strip().lower() == "true"
    return True


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):  # as Flink Agents' Jackson writes a byte[]
        return base64.b64encode(bytes(value)).decode("ascii")
    return to_jsonable_python(value)  # a model's fields, a UUID's or a date's text


def _as_json(stored: Any) -> Any:
    """A written value as a write event's JSON map holds it (Flink Agents': plain JSON).

    The value ``get`` reads (its models, bytes, UUIDs rebuilt from the stored form), in JSON:
    a model as its fields, ``bytes`` as base64 text, as ``ShortTermWriteEvent`` takes them.

    Returns:
        The JSON value.
    """
    return json.loads(json.dumps(from_json_value(stored), default=_json_default))


def send_memory_events(ctx: ActionExecution) -> BaseException | None:
    """Send the memory write events of a completed action that the agent listens to.

    Args:
        ctx: the action's execution, before it is marked finished.

    Returns:
        What sending raised (the event chain limit), which fails the action; else ``None``.
    """
    listened = ctx.plan.actions_by_event
    for event_type, operation, writes_of in _WRITE_EVENTS:
        if event_type not in listened:
            continue
        writes = writes_of(ctx)
        if not writes or not _enabled(ctx.plan.config, operation):
            continue
        folded = {".".join(w[0]): None if w[1] is _DELETE else _as_json(w[1]) for w in writes}
        try:
            ctx.send_event(event_class_for(event_type).model_validate(
                {"type": event_type, "attributes": {"key": str(ctx.key), "value": folded}}))
        except Exception as e:  # noqa: BLE001 - it fails the action, as any send_event
            return e
    return None
