"""A journal's record at a call's identity, as a recovery finds it.

A journal entry answers a call at once when it has the call's identity and argument digest.
An entry there with another digest is either another run's (another input at the run's
position, its records having come in another order after a failover), which the call must
not get, or the one the crashed attempt of this very run
made, after the last checkpoint, and the code changed across the restore: a call inserted
before it, the calls reordered, an argument changed. Ignoring the latter would run again a
call whose effect is done (a card charged twice), silently. Each journaled record carries
its ``origin`` (``CallLedger.origin``: the run's position and input, and the execution's
triggering event), which tells the two apart (a new job on an old job's journal file, with
the same input at the same position, looks like the crashed attempt: give each job its own
journal path):

- another run's (or no origin: journaled by an earlier version): not this call's record;
- this run's, for an execution triggered by another event than now (the action that sent
  the event sends its events in another order, or with other contents): a divergence;
- this run's, for this execution: the record stands as one in keyed state would, with the
  records the execution journaled after it, so the same checks apply (another kind or target
  at the identity, the arguments of another recorded call: a divergence; other arguments:
  the recorded outcome, with a warning, or in strict mode a divergence).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...api import ReplayDivergenceError
from ._state import CallKind, CallRecord

if TYPE_CHECKING:
    from ._execution import ActionExecution

__all__ = ["journaled"]

_MAX_TAKEN = 1000
"""The most records of one execution taken from the journal beyond the first that differs."""


def journaled(ctx: ActionExecution, ordinal: int, call_id: str, digest: str,
              current: tuple[CallKind, str]) -> CallRecord | None:
    """The journal's record of call ``call_id`` that stands for this call, if any.

    Args:
        ctx: the execution making the call.
        ordinal: the call's position in the execution.
        call_id: its identity.
        digest: its argument digest.
        current: its kind and target (for the error).

    Returns:
        The record (entered in the execution's state entry), or ``None``: the journal has
        none, one with no outcome, or another run's.

    Raises:
        ReplayDivergenceError: when the record is this run's, made for the execution
            triggered by another event.
    """
    ledger, key = ctx.ledger, ctx.key
    found = ledger.lookup(key, call_id)
    if found is None or not found.done:
        return None
    calls = ctx._record.calls
    if found.digest == digest:
        calls[str(ordinal)] = found
        return found
    now = ledger.origin(ctx.run, ctx._record.event) if found.origin is not None else None
    if now is None:
        return None
    (was_run, _, was_event), (now_run, _, now_event) = (found.origin or "").partition("."), \
        now.partition(".")
    if was_run != now_run:
        return None  # another run's record
    if was_event != now_event:
        kind, target = current
        ctx._diverge(ReplayDivergenceError(
            call_id, ctx._record.action,
            (found.kind.value if found.kind else "", found.target or ""), (kind.value, target),
            detail=f"key {key!r}: the journal holds the outcome of {call_id} that the crashed "
                   f"attempt of this run recorded after the last checkpoint, when execution "
                   f"{ctx.execution_id} was triggered by another event than now (the action "
                   "that sent it sends its events in another order, or with other contents): "
                   "the outcome is not this call's, and running the call again would repeat "
                   "its effect"))
    calls[str(ordinal)] = found
    for n in range(ordinal + 1, ordinal + 1 + _MAX_TAKEN):  # the execution's later records
        later = calls.get(str(n))
        if later is not None and later.done:
            continue
        rec = ledger.lookup(key, f"{ctx.execution_id}/c{n}")
        if rec is None:
            break
        if rec.done and rec.origin == now:
            calls[str(n)] = rec
    return found
