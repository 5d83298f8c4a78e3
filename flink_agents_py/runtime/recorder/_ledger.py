"""``CallLedger``: where a durable call's record goes besides keyed state.

An action context writes its calls' records into its state entry and tells the ledger, which
journals each outcome (write-ahead, before the action goes on), answers journal lookups at
recovery, tells the probe, counts, and calls the test failpoint. One ledger per core; the
contexts get it as an argument, so they never call the core.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._failures import FailureMessage
from .._serde import digest
from ._journaled import JournaledCall
from ._state import CallRecord, RunState

if TYPE_CHECKING:
    from ..core._commands import CallCommand
    from ..core._observer import Probe

__all__ = ["CallLedger", "Journal", "Failpoint"]


class Journal:
    """A write-ahead journal of durable call outcomes (the base records nothing).

    Subclasses append each outcome before the action continues and answer lookups at
    recovery for calls the restored checkpoint does not hold.
    """

    def append(self, key: Any, call_id: str, record: CallRecord) -> None:
        """Store ``record`` for ``(key, call_id)``."""

    def lookup(self, key: Any, call_id: str) -> CallRecord | None:
        """Return the record stored for ``(key, call_id)``, or ``None``."""
        return None

    def run_completed(self, key: Any, run: str) -> None:
        """Run ``run`` (``r<seq>``) of ``key`` completed: its entries may be pruned later."""


Failpoint = Callable[[str, Any, dict[str, Any]], None]
"""A test hook called at named points: ``(point, key, info)``. To inject a crash it raises
an exception that is not an ``Exception`` (the core lets those through, so the host's
callback fails and Flink restarts the job). Points: ``"call_recorded"`` (``call_id``),
``"run_completed"`` (``seq``), and the host's ``"element"``, ``"timer"`` and
``"outputs_emitted"`` (``outputs``)."""


class CallLedger:
    """The journal, probe, failpoint and counters, as durable calls see them.

    Args:
        counters: the core's counters (``calls_executed``, ``calls_replayed``,
            ``replay_divergences``...).
        probe: receives ``call_started``, ``call_finished`` and ``replay_finding``.
        journal: the write-ahead journal, if any.
        failpoint: the test hook, if any.
    """

    __slots__ = ("counters", "probe", "journal", "failpoint")

    def __init__(self, counters: collections.Counter[str], probe: Probe | None,
                 journal: Journal | None, failpoint: Failpoint | None) -> None:
        self.counters = counters
        self.probe = probe
        self.journal = journal
        self.failpoint = failpoint

    def origin(self, run: RunState, event: Any) -> str | None:
        """Which run attempt a journaled record comes from: ``<run digest>.<event digest>``.

        The run digest is of the run's position in its key's sequence and its input record:
        a restored run's crashed attempt had the same, another input at that position
        (records that came in another order after a failover) another. The job's lineage is
        not part of it: a job resubmitted from a retained checkpoint or a savepoint (new
        code deployed after a crash) draws a new lineage, and its runs' crashed attempts
        must still be recognised. The event digest is of the JSON form of the triggering
        event of the call's action execution.

        Args:
            run: the run the call belongs to.
            event: the JSON form of its execution's triggering event.

        Returns:
            The origin, or ``None`` when the input has no JSON form (not kept then).
        """
        try:
            return f"{digest([run.seq, run.input])}.{digest(event)}"
        except Exception:  # noqa: BLE001 - not kept: the record is journaled without it
            return None

    def lookup(self, key: Any, call_id: str) -> CallRecord | None:
        """The journal's record of ``call_id``, when there is a journal and it has one."""
        return self.journal.lookup(key, call_id) if self.journal is not None else None

    def started(self, key: Any, command: CallCommand, replayed: bool) -> None:
        """Count one durable call (executed, or answered from its record); tell the probe."""
        self.counters["calls_replayed" if replayed else "calls_executed"] += 1
        if self.probe is not None:
            self.probe.call_started(key, command.call.call_id, command, replayed)

    def finding(self, key: Any, execution_id: str, kind: str, message: str) -> None:
        """A replay did something that may be wrong but did not fail: count it, tell the probe.

        Args:
            key: the record key.
            execution_id: the action execution replayed.
            kind: ``"arguments_changed"`` (a call replayed with other arguments) or
                ``"unreached_calls"`` (an execution completed without making recorded calls).
            message: what the log says, naming the calls.
        """
        self.counters[f"replay_{kind}"] += 1
        if self.probe is not None:
            self.probe.replay_finding(key, execution_id, kind, message)

    def recorded(self, key: Any, call_id: str, record: CallRecord,
                 run: RunState | None = None, event: Any = None) -> None:
        """An outcome entered keyed state: tell the probe, journal it, call the failpoint.

        The journal gets it before the action goes on (write-ahead), with its ``origin``
        when ``run`` (and ``event``, the JSON form of the triggering event of the call's
        execution) are given.
        """
        if self.probe is not None:
            self.probe.call_finished(key, call_id, record.ok, record.value if record.ok
                                        else FailureMessage(record.error_message or "",
                                                            record.traceback))
        if self.journal is not None:
            origin = self.origin(run, event) if run is not None else None
            self.journal.append(key, call_id, record if origin is None else
                                JournaledCall.of(record, origin))
        if self.failpoint is not None:
            self.failpoint("call_recorded", key, {"call_id": call_id})
