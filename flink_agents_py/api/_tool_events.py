"""The tool events: a chat's tool calls asked of the tool call action, and their results."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, ValidationInfo, field_validator, model_validator

from ._event_types import BuiltinEventType
from ._events import Event
from ._messages import ToolCall, ToolResult

__all__ = ["ToolRequestEvent", "ToolResponseEvent"]


class ToolRequestEvent(Event, defer_build=True):
    """Asks the tool call action to run ``tool_calls`` for the chat of model ``model``.

    Each call needs an id of its own: the answer, ``ToolResponseEvent.responses``, is keyed
    by it. A call built without one (``ToolCall(name=..., arguments=...)``) gets a synthetic
    id here, ``<the request's event id>#<its position>`` (``call#<position>`` for a request
    built outside an action, which has no event id yet), so the same request built again by
    a replayed action gets the same ids; read them from ``request.tool_calls[i].id``. A
    request whose calls repeat an id is refused where it is built (pydantic's
    ``ValidationError``, a ``ValueError``, naming the id and the calls' positions); a model's
    answer never repeats one (the chat action gives its tool calls unique ids).
    """

    EVENT_TYPE: ClassVar[str] = BuiltinEventType("ToolRequestEvent")
    POSITIONAL: ClassVar[tuple[str, ...]] = ("model", "tool_calls")
    model: str
    tool_calls: list[ToolCall] = Field(default_factory=list)

    @field_validator("tool_calls")
    @classmethod
    def _ids_unique(cls, calls: list[ToolCall], info: ValidationInfo) -> list[ToolCall]:
        """Give id-less calls synthetic ids; refuse two calls with one id.

        The answer, ``ToolResponseEvent.responses``, is keyed by call id. A model's answer
        never gets here so: the chat action gives id-less and repeated ids of a model's tool
        calls unique ones before it sends the request.

        Returns:
            ``calls``, an id-less one with its synthetic id (``<event id>#<position>``, with
            ``.<n>`` added should one of the others hold it already).

        Raises:
            ValueError: naming the id and the positions of the calls that share it.
        """
        if any(not call.id for call in calls):
            calls = _with_synthetic_ids(calls, str(info.data.get("id") or "call"))
        first: dict[str, int] = {}
        for i, call in enumerate(calls):
            j = first.setdefault(call.id, i)
            if j != i:
                raise ValueError(
                    f"tool_calls[{j}] and tool_calls[{i}] share the id {call.id!r}: each call "
                    "needs its own id, since ToolResponseEvent.responses is keyed by it")
        return calls


def _with_synthetic_ids(calls: list[ToolCall], base: str) -> list[ToolCall]:
    """``calls``, each id-less one given ``<base>#<position>`` (an id no other call holds)."""
    taken = {call.id for call in calls if call.id}
    fixed = []
    for i, call in enumerate(calls):
        if not call.id:
            made, n = f"{base}#{i}", 0
            while made in taken:
                n += 1
                made = f"{base}#{i}.{n}"
            taken.add(made)
            call = call.model_copy(update={"id": made})
        fixed.append(call)
    return fixed


class ToolResponseEvent(Event, defer_build=True):
    """Results of a ``ToolRequestEvent``, one per call id.

    Attributes:
        request_id: id of the ``ToolRequestEvent`` this answers.
        responses: results keyed by tool call id.
    """

    EVENT_TYPE: ClassVar[str] = BuiltinEventType("ToolResponseEvent")
    POSITIONAL: ClassVar[tuple[str, ...]] = ("request_id", "responses", "external_ids",
                                             "success", "error")
    request_id: str
    responses: dict[str, ToolResult] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _flink_agents_form(cls, data: Any) -> Any:
        # Apache Flink Agents builds it as (request_id, responses: {id: value}, external_ids,
        # success: {id: bool}, error: {id: str}): each value becomes a ToolResult
        if not isinstance(data, dict):
            return data
        data = dict(data)
        success = data.pop("success", None) or {}
        error = data.pop("error", None) or {}
        external_ids = data.pop("external_ids", None)
        if external_ids:
            data["attributes"] = {**(data.get("attributes") or {}),
                                  "external_ids": dict(external_ids)}
        responses = data.get("responses")
        if isinstance(responses, dict):
            data["responses"] = {
                str(k): v if _is_tool_result(v) else ToolResult(
                    call_id=str(k), name="", ok=bool(success.get(k, k not in error)),
                    content=v, error=error.get(k))
                for k, v in responses.items()}
        return data

    @property
    def success(self) -> dict[str, bool]:
        """Whether each call succeeded, by call id (Flink Agents' name; ``ToolResult.ok``)."""
        return {k: r.ok for k, r in self.responses.items()}

    @property
    def error(self) -> dict[str, str]:
        """Why each failed call failed, by call id (Flink Agents' name)."""
        return {k: r.error or "" for k, r in self.responses.items() if not r.ok}

    @property
    def external_ids(self) -> dict[str, str | None]:
        """Flink Agents' provider-side call ids, when given (calls here keep their own)."""
        return dict(self.attributes.get("external_ids") or {})


def _is_tool_result(value: Any) -> bool:
    return isinstance(value, ToolResult) or (
        isinstance(value, dict) and {"call_id", "name"} <= value.keys())
