"""What the waits of ``AgentCore`` say about outside events, and which runs only hold them.

Module-level helpers of ``_waits``: whether a ``RunState`` only holds early events
(``is_holder``), and the texts of the error records of events no wait takes.
"""

from __future__ import annotations

import math
from typing import Any

from ...api.internal import key_from_json, key_json, shown_key
from ..recorder._state import CallKind, RunState, WaitRecord

__all__ = ["is_holder"]

_NO_RUN = "a reserved correlation id (starting with '#'), which is never held for a run to come"


def is_holder(run: RunState) -> bool:
    """Whether ``run`` only holds early events for a key with no run in flight.

    An outside event that arrives before its key's record started a run (two sources
    racing; an answer sent faster than its request was recorded) is held in such a
    ``RunState`` in the key's run slot of keyed state, parked, with no action in flight (a
    parked run has one: a wait is open in it). The key's next record takes it over: its run
    starts with the held events, its wait claims one as it opens (``AgentCore.advance``).

    Returns:
        ``True`` for a holder.
    """
    return run.parked and not run.inflight


def _waited_for(run: RunState, most: int = 5) -> str:
    """`` (the run waited for: 'a', 'b')``: the ids of the run's waits, to show a typo by."""
    ids = [cid for cid, w in run.waits.items() if not cid.startswith("#") and w.status != "early"]
    if not ids:
        return ""
    more = f" and {len(ids) - most} more" if len(ids) > most else ""
    return f" (the run waited for: {', '.join(shown_key(c) for c in ids[:most])}{more})"


def _typed_key_hint(key: Any) -> str:
    """A hint when ``key`` may be another key's text (``'7'`` for ``7``) or number.

    Keys are typed, and an outside event read from JSON text often carries a number as
    text: the run it is for waits under the other key.

    Returns:
        The hint, with its leading space; ``""`` for a key no other key's form is like.
    """
    if isinstance(key, str):
        tagged = _tagged_text(key)
        if tagged is not None:  # a UUID or a date as text: its key's JSON form is tagged
            return (
                f" (keys are typed: if the records' key is the {tagged} {key!r}, send the "
                f"event with that key, or its JSON form {{{tagged!r}: {key!r}}}, not the "
                "string)"
            )
        try:
            number: float = int(key)
        except ValueError:
            try:
                number = float(key)
            except ValueError:
                return ""
        if not math.isfinite(number):  # 'nan', 'inf': words, not numbers someone keyed by
            return ""
        return (
            f" (keys are typed: if the records' key is the number {number!r}, send the "
            f"event with that number as its key, not the string {key!r})"
        )
    if isinstance(key, (int, float)) and not isinstance(key, bool):
        return (
            f" (keys are typed: if the records' key is the string {str(key)!r}, send the "
            f"event with that string as its key, not the number {key!r})"
        )
    return ""


def _tagged_text(text: str) -> str | None:
    """The tag of the key type whose canonical text ``text`` is (``"uuid"``...), if any."""
    for tag in ("uuid", "date", "datetime"):
        try:
            if key_json(key_from_json({tag: text})) == {tag: text}:
                return tag
        except ValueError:
            continue
    return None


def _approval_problem(run: RunState, wait: WaitRecord, payload: Any) -> str | None:
    """Why ``payload`` is no answer to the approval ``wait`` holds (``None``: it is one).

    An approval (a tool call held by ``requires_approval``) takes ``True``/``False`` or a
    mapping whose ``approved`` is a boolean (what ``ApprovalRequest.approve``/``reject``
    build). Anything else (``"yes"``, ``{"approved": "true"}``, ``None``) was rejected
    silently before, so a reviewer's broken answers went unnoticed: now it is refused to the
    error output and the call stays held for an answer it can read (or its timeout).

    Returns:
        The reason, as the end of a sentence starting with the approval's id.
    """
    action = run.inflight.get(wait.caller)
    rec = action.calls.get(str(wait.ordinal)) if action is not None else None
    return None if rec is None else _answer_problem(rec.kind, payload)


def _answer_problem(kind: CallKind | None, payload: Any) -> str | None:
    """Why ``payload`` is no answer to a wait of call ``kind`` (``None``: it is one).

    Returns:
        The reason (see ``_approval_problem``); ``None`` for any wait but an approval's.
    """
    if kind is not CallKind.APPROVAL or isinstance(payload, bool):
        return None  # (a wait of ``ctx.wait_for`` takes any payload)
    if isinstance(payload, dict) and isinstance(payload.get("approved"), bool):
        return None
    got = payload.get("approved") if isinstance(payload, dict) else payload
    what = "its 'approved'" if isinstance(payload, dict) else "its payload"
    return (
        f"cannot be read: {what} is {got!r}, not true or false (answer with "
        "ApprovalRequest.approve() or reject(), or a payload {'approved': true|false, "
        "...}); the call stays held"
    )
