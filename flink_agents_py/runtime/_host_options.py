"""``HostOptions``: the settings a host (the Flink operator, the local runner) runs a plan with.

One frozen object, made once by the environment and handed to every operator instance and
job, instead of the same keyword arguments copied through each constructor. It is plain
picklable data (the Flink client pickles it with the operator).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .core._observer import Observer
from .recorder._ledger import Failpoint, Journal

__all__ = ["HostOptions"]


@dataclass(frozen=True)
class HostOptions:
    """How a host runs an agent plan: limits, wake-ups, and what it records.

    The local runner reads ``max_in_flight(_per_key)``, ``metrics``, the event logs, ``journal``,
    ``failpoint`` and ``observer``; the limits and timings below them are the Flink operator's.

    Attributes:
        max_in_flight: the most I/O calls (model, tool, durable functions) running at once
            in one operator instance (one subtask), >= 1.
        max_in_flight_per_key: the most of those slots one key's calls hold at once (a
            record's calls with its chats' tools and sub-agents'), >= 1; freed slots go to
            the keys whose calls wait in turn, so one key that starts many calls does not
            hold up other keys' calls. ``None``: three quarters of ``max_in_flight``
            (rounded up; all of them for 1 to 3); more than ``max_in_flight``: all of them.
        max_waiting_calls: the most calls waiting for one of the ``max_in_flight`` slots
            before the operator stops taking input (backpressure): while more wait, each
            input record waits inside the operator until calls complete. ``None``: as many
            as ``max_in_flight``.
        max_queued_per_key: the most input records queued behind one key's in-flight run;
            a record arriving for a key at the limit waits (the operator blocks its input
            and works that key) until the key's queue is below it. ``None``: unbounded.
            Each such wait (and each wait for ``max_waiting_calls``) lasts at most
            ``drain_poll_s``; then the record is taken anyway, so that the task thread
            gets back to Flink's mailbox (checkpoint barriers, timers): with calls slower
            than that, a limit is exceeded by at most one record per ``drain_poll_s``.
        max_poll_interval_ms: the longest wait between checks of a key whose I/O has run
            past its expected duration, in ms.
        drain_poll_s: how long one wait for a key's I/O blocks while the operator must
            finish that key's work (at the end of input), and the longest an input record
            is held back by the limits above, in s.
        metrics: keep the agent metrics (``observability.AgentMetrics``; on Flink also in
            each subtask's metric group ``flink_agents``).
        event_log: an ``observability.EventLog`` (or a path, or a sink), or ``None``.
        apache_event_log: Apache Flink Agents' file event log, an
            ``observability.ApacheEventLog`` (``baseLogDir``), or ``None``.
        journal: a write-ahead journal of durable call outcomes, or ``None``.
        failpoint: a test hook for crash injection (see ``runtime.Failpoint``), or ``None``.
        observer: an extra ``runtime.Observer``, or ``None``.
        lineage: a token every attempt of one job shares (its restores), or ``None``: a key
            the state does not hold yet derives its long-term memory epoch from it, so a
            restore from a checkpoint taken before the key's first record (or a restart
            before any checkpoint) still leaves out what the key's crashed attempt wrote.
            ``None``: a random epoch per key (each attempt starts a new lineage). The Flink
            environment draws one per job it builds.

    Raises:
        ValueError: at construction, naming the option that is out of range.
    """

    max_in_flight: int = 32
    max_waiting_calls: int | None = None
    max_queued_per_key: int | None = 10_000
    max_poll_interval_ms: int = 20
    drain_poll_s: float = 1.0
    metrics: bool = True
    event_log: Any = None
    apache_event_log: Any = None
    journal: Journal | None = None
    failpoint: Failpoint | None = None
    observer: Observer | None = None
    lineage: str | None = None
    max_in_flight_per_key: int | None = None

    def __post_init__(self) -> None:
        """Check the limits (a clear error naming the option instead of a stuck job)."""
        for name in ("max_in_flight", "max_poll_interval_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"HostOptions.{name} must be an int >= 1, got {value!r}")
        for name in ("max_in_flight_per_key", "max_waiting_calls", "max_queued_per_key"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise ValueError(f"HostOptions.{name} must be None or an int >= 1, "
                                 f"got {value!r}")
        if not isinstance(self.drain_poll_s, (int, float)) or self.drain_poll_s <= 0:
            raise ValueError(f"HostOptions.drain_poll_s must be > 0 (seconds), "
                             f"got {self.drain_poll_s!r}")

    @property
    def waiting_calls_limit(self) -> int:
        """``max_waiting_calls``, or ``max_in_flight`` when that is ``None``."""
        return self.max_waiting_calls if self.max_waiting_calls is not None \
            else self.max_in_flight

    def replace(self, **changes: Any) -> HostOptions:
        """A copy with ``changes`` applied (checked as at construction).

        Args:
            **changes: field names and their new values.

        Returns:
            The new options.

        Raises:
            TypeError: when a name is not an option (names the known ones).
            ValueError: when a value is out of range.
        """
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise TypeError(f"unknown host option(s) {sorted(unknown)}; known: "
                            f"{[f.name for f in dataclasses.fields(self)]}")
        return dataclasses.replace(self, **changes)
