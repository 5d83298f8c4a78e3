"""The local runner's virtual clock and wait timers, and ``AdvanceTime`` for its second input.

The local runner skips time, as Temporal's time-skipping test server does: its clock starts
at 0 and moves only when nothing else can happen (to the next timer), or when the connected
outside events say so (``AdvanceTime``). So a test of an agent that waits an hour for an
approval runs in milliseconds, and the same every time.
"""

from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass
from typing import Any

from ..runtime import RunState

__all__ = ["AdvanceTime", "AfterRecords", "VirtualTimers"]


@dataclass(frozen=True)
class AdvanceTime:
    """An item of the local runner's outside events: let ``seconds`` of virtual time pass.

    Timers due meanwhile fire (waits time out, sleeps end) before the next outside event is
    delivered, so an event after ``AdvanceTime(3600)`` arrives late for a one-hour wait.

    Attributes:
        seconds: how long, in seconds (>= 0).
    """

    seconds: float

    def __post_init__(self) -> None:
        if isinstance(self.seconds, bool) or not isinstance(self.seconds, (int, float)) \
                or not math.isfinite(self.seconds) or self.seconds < 0:
            raise ValueError(f"AdvanceTime takes a number of seconds >= 0, got {self.seconds!r}")


@dataclass(frozen=True)
class AfterRecords:
    """An item of the local runner's interleaved outside events: the next go after ``count``.

    With ``connect(..., interleaved=True)``, the items after it go once the first ``count``
    input records are in.
    Those records are handed to the agent and worked off as far as they go (their runs
    completed or waiting) before the next item is delivered; the records after them flow
    once the items up to the next ``AfterRecords`` are delivered. So an approval can arrive
    while other records still flow: ``[AfterRecords(2), approve_a, AfterRecords(5),
    approve_b]``.

    Attributes:
        count: how many input records (>= 0, counted from the first, rejected ones too).
    """

    count: int

    def __post_init__(self) -> None:
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 0:
            raise ValueError(f"AfterRecords takes a number of records >= 0, got {self.count!r}")


class VirtualTimers:
    """The wait deadlines of a local job, by time, with its virtual clock (milliseconds).

    Attributes:
        now_ms: the virtual clock.
    """

    def __init__(self, now_ms: int = 0) -> None:
        self.now_ms = now_ms
        self._heap: list[tuple[int, int, Any]] = []
        self._order = itertools.count()

    def clock(self) -> int:
        """The virtual clock (what the core reads as ``clock_ms``).

        Returns:
            Milliseconds.
        """
        return self.now_ms

    def add(self, key: Any, deadlines: list[int] | None) -> None:
        """Keep a timer of ``key`` at each of ``deadlines`` (ms)."""
        for deadline in deadlines or ():
            heapq.heappush(self._heap, (deadline, next(self._order), key))

    def add_run(self, key: Any, run: RunState | None) -> None:
        """Keep the timers of ``run``'s open waits (after a restore)."""
        if run is not None:
            self.add(key, [w.deadline_ms for w in run.waits.values()
                           if w.status in ("open", "early") and w.deadline_ms is not None])

    def pop_due(self, until_ms: int | None) -> tuple[int, Any] | None:
        """The earliest timer at or before ``until_ms`` (any, for ``None``), moving the clock.

        Returns:
            ``(deadline, key)``, or ``None`` when none is due.
        """
        if not self._heap or (until_ms is not None and self._heap[0][0] > until_ms):
            return None
        deadline, _, key = heapq.heappop(self._heap)
        self.now_ms = max(self.now_ms, deadline)
        return deadline, key
