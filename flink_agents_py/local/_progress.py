"""The local runner's progress bar (``AgentsExecutionEnvironment.local(progress=True)``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._runner import LocalRunResult, _KeyState

__all__ = ["Progress", "bar_size"]

FALLBACK_SIZE = (80, 24)
"""The bar's columns and rows on a terminal that reports no size."""


def bar_size(stream: Any) -> dict[str, Any]:
    """The size options of a tqdm bar drawn on ``stream``.

    A terminal that reports a size of 0 (a pseudo-terminal nobody sized: ``script``, some CI
    runners and container consoles) made tqdm hide its bar (0 rows: no line to draw on) for
    the whole run. Such a terminal gets a fixed size; one that reports its size, and a
    stream that is no terminal (``FLINK_AGENTS_PY_PROGRESS=1`` into a log), are left to
    tqdm, which follows a terminal as it is resized.

    Returns:
        ``{"dynamic_ncols": True}``, or ``{"ncols": ..., "nrows": ...}`` from
        ``FALLBACK_SIZE`` for what the terminal reports as 0.
    """
    try:
        columns, lines = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return {"dynamic_ncols": True}
    if columns > 0 and lines > 0:
        return {"dynamic_ncols": True}
    return {"ncols": columns or FALLBACK_SIZE[0], "nrows": lines or FALLBACK_SIZE[1]}


class Progress:
    """The progress bar: input records done of total, outputs, errors, calls in flight.

    A record is done when its run completed or it was rejected; only records ``counted``
    selects are counted (control records such as end-of-input markers are left out).
    """

    def __init__(self, records: Iterable[Any], counted: Callable[[Any], bool] | None) -> None:
        from tqdm import tqdm

        self.counted = counted or (lambda record: True)
        total = (sum(1 for r in records if self.counted(r))
                 if hasattr(records, "__len__") else None)
        self.bar = tqdm(total=total, unit="rec", desc="agent", file=sys.stderr,
                        mininterval=0.5, **bar_size(sys.stderr))
        self.flags: dict[Any, list[bool]] = {}  # per key: counted flag of each queued record
        self.seen: dict[Any, int] = {}  # per key: how many of its records are done
        self.done = 0

    def queued(self, key: Any, record: Any) -> None:
        """``record`` was queued for ``key``."""
        self.flags.setdefault(key, []).append(self.counted(record))

    def rejected(self, record: Any) -> None:
        """``record`` was rejected (done, with an error record)."""
        self.done += 1 if self.counted(record) else 0
        self.bar.update(self.done - self.bar.n)

    def update(self, key: Any, state: _KeyState, result: LocalRunResult,
               in_flight: int) -> None:
        """``key`` advanced: count its runs that completed, show the totals."""
        finished = state.popped() - (1 if state.run is not None else 0)
        flags, seen = self.flags.get(key, []), self.seen.get(key, 0)
        if finished > seen:
            self.done += sum(flags[seen:finished])
            self.seen[key] = finished
        self.bar.set_postfix(outputs=len(result.outputs), errors=len(result.errors),
                             in_flight=in_flight, refresh=False)
        self.bar.update(self.done - self.bar.n)  # update() keeps the rate and refresh interval

    def close(self, result: LocalRunResult) -> None:
        """Show the final totals and close the bar."""
        self.bar.set_postfix(outputs=len(result.outputs), errors=len(result.errors),
                             in_flight=0, refresh=False)
        self.bar.update(self.done - self.bar.n)
        self.bar.close()
