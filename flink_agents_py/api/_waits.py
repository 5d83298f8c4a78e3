"""Waits for outside events and durable timers: what an action awaits besides its own calls.

An action pauses with ``await ctx.wait_for(correlation_id, timeout_s=...)`` until an
``ExternalEvent`` with that correlation id arrives for its key on the agent's second input,
or until the timeout; ``await ctx.sleep(seconds)`` pauses it for a while. Both are durable
calls: the waiting run lives in keyed state (nothing is held in memory while it waits), and
its outcome (the event's payload, a timeout, the end of the sleep) is recorded and replayed
like any other call's.

A tool declared with ``@tool(requires_approval=True)`` is a wait too: the model's call is
held, an ``ApprovalRequest`` goes to the agent's output, and an approval or a rejection
(``request.approve()``, ``request.reject(reason)``) on the second input releases or refuses
it.

These names are defined here and re-exported by ``flink_agents_py.api``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer, ValidationError

from ._errors import AgentsError
from ._key_forms import key_json, untag

__all__ = ["ExternalEvent", "ExternalEventError", "WaitTimeoutError", "UnmatchedEventError",
           "ApprovalRequest", "APPROVAL_REQUEST_KIND"]

APPROVAL_REQUEST_KIND = "approval_request"
"""The ``kind`` field of an ``ApprovalRequest`` as the agent's output carries it."""


class ExternalEventError(AgentsError):
    """A record on the agent's second input that is not an ``ExternalEvent``."""


class WaitTimeoutError(AgentsError):
    """What ``await ctx.wait_for(...)`` raises when no event arrived in time.

    Also raised when all input ended while the wait was open (nothing can arrive any more),
    and when the internal sub-agent call the wait is in was cancelled (the call ends without
    waiting for the event).

    Attributes:
        correlation_id: the correlation id waited for.
        timeout_s: the timeout, in seconds (``None``: the wait had none; the input ended).
    """

    def __init__(self, message: str, correlation_id: str | None = None,
                 timeout_s: float | None = None) -> None:
        super().__init__(message)
        self.correlation_id = correlation_id
        self.timeout_s = timeout_s


class UnmatchedEventError(AgentsError):
    """An outside event that arrived for no waiter (its error record's ``error_type``).

    The message says which: no run in flight for the key, no wait for that correlation id
    in the run (unknown, or not opened yet), a duplicate of an event delivered already, or a
    late one whose wait had timed out.
    """


_MAX_KEY_DEPTH = 64
"""The deepest list an outside event's key may nest (a deeper one stays a list: refused)."""


def _tuple_key(key: Any, depth: int = 0) -> Any:
    if type(key) is dict:  # a tagged key's JSON form ({"uuid": "..."}), else left a dict
        try:
            return untag(key)
        except ValueError:
            return key
    if type(key) is not list or depth > _MAX_KEY_DEPTH:
        return key
    return tuple(_tuple_key(k, depth + 1) for k in key)


class ExternalEvent(BaseModel):
    """An event from outside the agent (an approval, a payment notice...): the second input.

    The host routes it by ``key`` to the key's run, where it completes the action's
    ``await ctx.wait_for(correlation_id)`` with ``payload``. One that arrives for no waiter
    goes to the error output as an ``UnmatchedEventError`` record.

    Attributes:
        key: the key of the run it is for (what the agent's records are keyed by).
        correlation_id: the id the waiting action chose (``ApprovalRequest.approval_id``
            for a tool approval).
        payload: what the action's wait returns (any JSON value).
    """

    model_config = ConfigDict(frozen=True)

    key: Annotated[Any, PlainSerializer(key_json, when_used="json")]  # ``key_of`` reads it
    correlation_id: str
    payload: Any = None

    @staticmethod
    def key_of(record: Any) -> Any:
        """The key of an outside event record: its ``key`` (an event's, or a mapping's).

        The default key selector of the agents' second input.

        Returns:
            The key, or ``None`` when the record has none. A key's JSON form (an event read
            from JSON, ``runtime.key_json``) is that key: a list the tuple, nested lists too,
            a tagged object (``{"uuid": "..."}``) its value; no key is a list or a dict, so
            it names no other key.
        """
        key = record.key if isinstance(record, ExternalEvent) else (
            record.get("key") if isinstance(record, Mapping) else None)
        return _tuple_key(key)

    @classmethod
    def of(cls, record: Any, where: str = "outside event") -> ExternalEvent:
        """An ``ExternalEvent`` from a record of the second input (itself, or its dict).

        Args:
            record: an ``ExternalEvent``, or a mapping with ``key``, ``correlation_id`` and
                optionally ``payload``.
            where: names the record in the error (``"outside event 3"``).

        Returns:
            The event.

        Raises:
            ExternalEventError: naming what is missing or wrong, and where.
        """
        if isinstance(record, ExternalEvent):
            return record
        if not isinstance(record, Mapping):
            raise ExternalEventError(
                f"{where} is a {type(record).__name__}, not an ExternalEvent or a mapping "
                "with 'key', 'correlation_id' and 'payload'")
        shape = "a mapping with 'key', 'correlation_id' and 'payload'"
        extra = [str(k) for k in record if k not in cls.model_fields]
        if "payload" not in record and extra:  # a misspelt payload would arrive as None
            raise ExternalEventError(
                f"{where} has no 'payload' but {', '.join(map(repr, extra))}: an outside "
                f"event is {shape} (misspelt?)")
        try:
            return cls.model_validate(dict(record))
        except ValidationError as e:
            problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'record'}: {err['msg']}"
                                 for err in e.errors())
            raise ExternalEventError(
                f"{where} is not an ExternalEvent: {problems} (an outside event is {shape}; "
                f"it has {', '.join(repr(str(k)) for k in record) or 'no keys'})") from e


class ApprovalRequest(BaseModel):
    """A tool call held for approval, as the agent's output carries it (``kind`` first).

    The output is this model's JSON form (``request.model_dump(mode="json")``), a dict
    whose ``kind`` is ``"approval_request"``; read it back with ``ApprovalRequest.of``.
    Answer it on the agent's second input with ``request.approve()`` or
    ``request.reject(reason)``: the held call then runs, or the model reads the refusal as
    the tool's result.

    Attributes:
        kind: always ``"approval_request"``.
        approval_id: the correlation id the answer must carry (stable across replays;
            unique across keys: it ends with a tag of the key).
        key: the key of the run that holds the call, in its own type (a tuple, a UUID...):
            its JSON form (``key_json``: an array, ``{"uuid": "..."}``) in the output, read
            back as the key by ``of``.
        tool: the tool's name.
        arguments: the model's arguments for it.
        tool_call_id: the model's id of the call.
        timeout_s: how long the call is held, in seconds (``None``: until answered).
    """

    model_config = ConfigDict(frozen=True)

    kind: str = APPROVAL_REQUEST_KIND
    approval_id: str
    # the keys' JSON form out, the key back in (before: pydantic's defaults dumped a UUID or
    # a date key as bare text, so an answer went to a string key and never released the call)
    key: Annotated[Any, BeforeValidator(_tuple_key), PlainSerializer(key_json, when_used="json")]
    tool: str
    arguments: dict[str, Any]
    tool_call_id: str
    timeout_s: float | None = None

    @classmethod
    def of(cls, output: Any) -> ApprovalRequest | None:
        """The approval request an agent output holds, or ``None`` for any other output.

        Returns:
            The request, or ``None``.
        """
        if isinstance(output, ApprovalRequest):
            return output
        if isinstance(output, Mapping) and output.get("kind") == APPROVAL_REQUEST_KIND:
            return cls.model_validate(dict(output))
        return None

    def approve(self, **details: Any) -> dict[str, Any]:
        """The answer that releases the held call, as a record of the second input.

        Args:
            **details: extra fields kept in the payload (who approved...).

        Returns:
            ``{"key", "correlation_id", "payload": {"approved": True, ...}}``, the key in
            its JSON form (a record ready to write to a topic).

        Raises:
            TypeError: when ``details`` has an ``approved`` field (the method decides it).
        """
        return self._answer({"approved": True, **_extra(details, "approve")})

    def reject(self, reason: str = "rejected", **details: Any) -> dict[str, Any]:
        """The answer that refuses the held call; the model reads ``reason`` as its result.

        Args:
            reason: why (the model is told).
            **details: extra fields kept in the payload.

        Returns:
            ``{"key", "correlation_id", "payload": {"approved": False, "reason", ...}}``,
            the key in its JSON form.

        Raises:
            TypeError: when ``details`` has an ``approved`` field (``reject(approved=True)``
                approved the call before: use ``approve``).
        """
        return self._answer({"approved": False, "reason": reason,
                             **_extra(details, "reject")})

    def _answer(self, payload: dict[str, Any]) -> dict[str, Any]:
        # the key's JSON form: the answer can be written to a topic as it is, and is read
        # back as the key (``ExternalEvent.key_of``)
        return {"key": key_json(self.key), "correlation_id": self.approval_id,
                "payload": payload}


def _extra(details: dict[str, Any], method: str) -> dict[str, Any]:
    """``details``, refused when it would decide the answer in ``method``'s place."""
    if "approved" in details:
        raise TypeError(f"ApprovalRequest.{method}() decides 'approved' itself; "
                        "call approve() to release the call and reject() to refuse it")
    return details
