"""Reading the runtime's identities and durable call names (shared by metrics, log, trace)."""

from __future__ import annotations

from typing import Any

from ._payload import to_loggable

__all__ = ["CHAT_ACTION", "call_parent", "action_parent", "run_of",
           "chat_response_of", "parse_result"]

CHAT_ACTION = "_chat_model_action"

def call_parent(call_id: str) -> str:
    """The action execution a durable call belongs to (``r0/ask/c1`` -> ``r0/ask``)."""
    return call_id.rsplit("/", 1)[0]


def action_parent(execution_id: str, action: str) -> str:
    """The event that triggered an action execution (``<event id>/<action>``)."""
    suffix = "/" + action
    return execution_id[: -len(suffix)] if execution_id.endswith(suffix) else \
        execution_id.rsplit("/", 1)[0]


def run_of(identity: str) -> str:
    """The run an identity belongs to (``r3/ask/c0`` -> ``r3``)."""
    return identity.split("/", 1)[0]


def parse_result(result: Any) -> tuple[str | None, Any]:
    """Split a recorded result (``{"$model": ..., "data": ...}``) into class name and data.

    Args:
        result: the recorded result.

    Returns:
        ``(class name or None, data)``, the data with nested model tags removed.
    """
    if isinstance(result, dict) and set(result) == {"$model", "data"} \
            and isinstance(result["$model"], str):  # (``None``: an escaped plain dict)
        cls = str(result["$model"]).rsplit(":", 1)[-1]
        return cls, to_loggable(result["data"])
    return None, to_loggable(result)


def chat_response_of(result: Any) -> dict[str, Any] | None:
    """The data of a recorded ``ChatResponse`` result, or ``None``."""
    cls, data = parse_result(result)
    if cls == "ChatResponse" and isinstance(data, dict):
        return data
    if cls is None and isinstance(data, dict) and "message" in data and "usage" in data:
        return data
    return None
