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

from typing import TYPE_CHECKING, Any

from ...api import ReplayDivergenceError
from ...api.internal import shown_key
from ._state import CallKind, CallRecord

if TYPE_CHECKING:
    from ._execution import ActionExecution

__all__ = ["JournaledCall", "journaled"]

_MAX_TAKEN = 1000
"""The most records of one execution taken from the journal beyond the first that differs."""


class JournaledCall(CallRecord, kw_only=True, repr_omit_defaults=True):
    """A journal's copy of a ``CallRecord``, with which run attempt made it.

    Keyed state never holds one (``in_state``): its records keep their format.

    Attributes:
        origin: ``CallLedger.origin`` of the attempt that made the call, so a recovery tells
            the record the restored run's crashed attempt made from another input's at the
            same identity (``_journaled``). ``None``: not known.
    """

    origin: str | None = None

    @classmethod
    def of(cls, record: CallRecord, origin: str) -> JournaledCall:
        """``record`` with ``origin``, for a journal.

        Returns:
            The copy.
        """
        return cls(**{f: getattr(record, f) for f in CallRecord.__struct_fields__},
                   origin=origin)

    @staticmethod
    def read(text: str | bytes) -> CallRecord:
        """A journal's record from its JSON text (``to_json``).

        Returns:
            A ``JournaledCall`` when the text holds an origin, else a ``CallRecord`` (a
            record journaled without one, or by an earlier version).

        Raises:
            StateFormatError: when the text does not hold a call record.
        """
        record = JournaledCall.from_json(text)
        if not isinstance(record, JournaledCall) or record.origin is not None:
            return record
        return record.in_state()

    def to_builtins(self) -> dict[str, Any]:
        """The record's JSON-form data and its ``origin``."""
        return {**super().to_builtins(), "origin": self.origin}

    def in_state(self) -> CallRecord:
        """The record without its origin, as keyed state keeps it."""
        return CallRecord(**{f: getattr(self, f) for f in CallRecord.__struct_fields__})


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
    origin = getattr(found, "origin", None)  # (a record journaled without one: ``None``)
    now = ledger.origin(ctx.run, ctx._record.event) if origin is not None else None
    if found.digest == digest:
        kept = calls[str(ordinal)] = _in_state(found)
        if origin is not None and origin == now:  # its later records, to tell a reorder
            _take_later(ctx, ordinal, now)  # (a lambda's other code, same digest)
        return kept
    if origin is None or now is None:
        return None
    (was_run, _, was_event), (now_run, _, now_event) = origin.partition("."), \
        now.partition(".")
    if was_run != now_run:
        return None  # another run's record
    if was_event != now_event:
        kind, target = current
        ctx._diverge(ReplayDivergenceError(
            call_id, ctx._record.action,
            (found.kind.value if found.kind else "", found.target or ""), (kind.value, target),
            detail=f"key {shown_key(key)}: the journal holds the outcome of {call_id} that the "
                   f"crashed attempt of this run recorded after the last checkpoint, when "
                   f"execution {ctx.execution_id} was triggered by another event than now "
                   "(the action that sent it sends its events in another order, or with "
                   "other contents): the outcome is not this call's, and running the call "
                   "again would repeat its effect"))
    kept = calls[str(ordinal)] = _in_state(found)
    _take_later(ctx, ordinal, now)
    return kept


def _take_later(ctx: ActionExecution, ordinal: int, now: str | None) -> None:
    """Enter the execution's records journaled after ``ordinal`` by this run's attempt."""
    calls = ctx._record.calls
    for n in range(ordinal + 1, ordinal + 1 + _MAX_TAKEN):  # the execution's later records
        later = calls.get(str(n))
        if later is not None and later.done:
            continue
        rec = ctx.ledger.lookup(ctx.key, f"{ctx.execution_id}/c{n}")
        if rec is None:
            break
        if rec.done and getattr(rec, "origin", None) == now:
            calls[str(n)] = _in_state(rec)


def _in_state(rec: CallRecord) -> CallRecord:
    """A journal's record as keyed state keeps it (without its origin)."""
    return rec.in_state() if isinstance(rec, JournaledCall) else rec
