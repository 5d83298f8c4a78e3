"""The context side of waits: ``ctx.wait_for``, ``ctx.sleep`` and held tool calls as calls.

A wait takes a durable call identity in program order like any call. Replayed (its outcome
is recorded), it is answered from its record; otherwise it becomes a ``StartWait`` command,
which the core carries out after the action's step (``_waits.WaitsCore``): a wait that is
open already (an action re-entered after a restore, or after its run was parked) is left as
it is, with its deadline.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...api import UsageError
from .._keys import encode_key
from ..context._calls import DurableCall, creation_site
from ..core._commands import StartWait
from ._outcomes import call_digest
from ._state import CallKind, WaitRecord

if TYPE_CHECKING:
    from ._execution import ActionExecution

__all__ = ["wait_call", "approval_key_tag", "approval_for_another_key", "SLEEP_PREFIX",
           "APPROVAL_PREFIX", "MAX_WAIT_S"]

APPROVAL_PREFIX = "approval:"
"""The correlation id of a tool call held for approval: this, its call id, ``@`` and the
tag of its key (``approval_key_tag``): unique across keys, so an answer sent with another
key's id (or a reviewer's index by id alone) cannot release another key's call."""

_APPROVAL_ID = re.compile(r"approval:r\d+/.*/c\d+@([0-9a-f]{16})")


def approval_key_tag(key: Any) -> str:
    """The tag of ``key`` that ends its approval ids: 16 hex digits of its stable encoding.

    Args:
        key: the run's key (its value).

    Returns:
        The tag.
    """
    text = encode_key(key).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(text, digest_size=8).hexdigest()


def approval_for_another_key(correlation_id: str, key: Any) -> bool:
    """Whether ``correlation_id`` is an approval id made for a run of another key than ``key``.

    Args:
        correlation_id: an outside event's correlation id.
        key: the key it was sent with (its value).

    Returns:
        ``True`` when it has an approval id's form and another key's tag.
    """
    found = _APPROVAL_ID.fullmatch(correlation_id)
    return found is not None and found.group(1) != approval_key_tag(key)

SLEEP_PREFIX = "#sleep/"
"""The correlation id of a sleep: this, then its call id (user ids may not start with ``#``)."""


_ENDED = {"delivered": "which got its event", "timed_out": "which timed out",
          "cancelled": "which ended when its sub-agent call was cancelled"}
"""How the refusal of a second wait for a correlation id tells how the first one ended."""

MAX_WAIT_S = 1e9
"""The longest timeout or sleep, in seconds (about 31 years; a deadline is a Flink ``long``)."""


def _checked_seconds(value: Any, what: str, execution_id: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or not 0 < value <= MAX_WAIT_S:
        raise UsageError(f"{what} must be a positive number of seconds, at most "
                         f"{MAX_WAIT_S:.0e}, got {value!r} (in action execution {execution_id})")
    return float(value)


def _opened_with(ctx: ActionExecution, kind: CallKind, call_id: str,
                 correlation_id: str | None, timeout_s: Any) -> Any:
    """The timeout a wait opened with, when it did; else ``timeout_s``.

    A wait's deadline is fixed when it opens: on re-entry its length is not read again,
    so a length computed anew (``ctx.sleep(deadline - time.time())``) is no other argument
    (before, each wake-up logged the call's arguments as changed).

    Returns:
        The recorded timeout of the open (or ended) wait of ``call_id``, or ``timeout_s``.
    """
    cid = SLEEP_PREFIX + call_id if kind is CallKind.SLEEP else correlation_id
    wait = ctx.run.waits.get(cid) if cid is not None else None
    if wait is None and kind is CallKind.APPROVAL:
        wait = next((w for w in ctx.run.waits.values() if w.call_id == call_id), None)
    if wait is None or wait.call_id != call_id or wait.status == "early":
        return timeout_s
    return wait.timeout_s


def wait_call(ctx: ActionExecution, kind: CallKind, target: str, correlation_id: str | None,
              timeout_s: Any, announce: Callable[[str], Any] | None = None) -> DurableCall:
    """Make the durable call of a wait: ``kind`` ``WAIT``, ``SLEEP`` or ``APPROVAL``.

    Args:
        ctx: the action's context.
        kind: what waits.
        target: the record's target (the correlation id, ``""`` for a sleep, the tool).
        correlation_id: what the outside event carries (``None`` for a sleep, and for an
            approval, whose id is ``approval:<call id>@<key tag>``).
        timeout_s: seconds until the timeout (a sleep's length); ``None``: none.
        announce: gives, from the correlation id, an output emitted when the wait opens
            (an approval request).

    Returns:
        The call (already ``done`` when replayed); awaiting it waits.

    Raises:
        UsageError: when the correlation id is not a non-empty string (or starts with
            ``#``), the timeout is not a positive number, or the run already waits for
            that correlation id in another call.
    """
    ctx.check_live("a wait" if kind is not CallKind.SLEEP else "sleep")
    where = ctx.execution_id
    if kind is CallKind.APPROVAL:
        pass  # its correlation id is made from its call id, below
    elif kind is CallKind.SLEEP:
        timeout_s = _checked_seconds(timeout_s, "ctx.sleep's seconds", where)
    else:
        if not isinstance(correlation_id, str) or not correlation_id \
                or correlation_id.startswith("#"):
            raise UsageError(f"a correlation id must be a non-empty string not starting with "
                             f"'#', got {correlation_id!r} (in action execution {where})")
        if timeout_s is not None:
            timeout_s = _checked_seconds(timeout_s, "timeout_s", where)
    ordinal, call_id, digest, rec = ctx._allocate(
        kind, target, lambda cid: call_digest(
            f"{kind.value}:{target}",
            (correlation_id, _opened_with(ctx, kind, cid, correlation_id, timeout_s)), {}, cid))
    if kind is CallKind.APPROVAL:  # one opened before (an upgrade: without the tag) keeps its id
        cid = next((c for c, w in ctx.run.waits.items()
                    if w.call_id == call_id and w.status != "early"),
                   f"{APPROVAL_PREFIX}{call_id}@{approval_key_tag(ctx.key)}")
    else:
        cid = correlation_id if correlation_id is not None else SLEEP_PREFIX + call_id
    other = ctx.run.waits.get(cid)
    pending = next((c for c in ctx.commands if isinstance(c, StartWait)
                    and c.correlation_id == cid and c.call.call_id != call_id), None)
    if pending is not None:  # opened in this step: the run's waits get it after the step
        other = WaitRecord(call_id=pending.call.call_id, caller=where,
                           ordinal=pending.call.ordinal)
    if other is not None and other.call_id != call_id and other.status != "early":
        first = (f"the run already waits for correlation id {cid!r} (call {other.call_id})"
                 if other.status == "open" else
                 f"the run waited for correlation id {cid!r} already (call {other.call_id}, "
                 f"{_ENDED.get(other.status, 'which has ended')})")
        raise UsageError(f"{first}; a correlation id is waited for once per run: make it "
                         "unique in the run (a sub-agent called more than once waits for ids "
                         f"made from its input) (in action execution {where})")
    call = DurableCall(call_id, ordinal, digest, kind, target)
    if kind is not CallKind.APPROVAL:  # the action's own: warned about when never awaited
        call.site = creation_site()
    ctx.calls[ordinal] = call
    command = StartWait(call, cid, timeout_s, announce(cid) if announce is not None else None)
    if rec is not None and rec.done:
        ctx._replay(call, rec, command)
    else:
        ctx.commands.append(command)
    return call
