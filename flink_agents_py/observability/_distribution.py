"""``Distribution``: the latency distributions ``AgentMetrics`` keeps in-process."""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["Distribution"]


class Distribution:
    """Count, sum, min, max, and percentiles over the most recent ``window`` values.

    An update appends to a list; every ``window`` updates the oldest values are folded into
    the count, sum, min and max (calling ``before_fold`` first when some of them were not
    pushed yet, so that a Flink push can read every value since the previous one).

    Args:
        window: how many recent values the percentiles are taken over.

    Attributes:
        values: the newest values (the same list for the distribution's life). A hot path
            may do what ``update`` does inline: append, take one from ``room``, then
            ``fold()`` once ``room`` is 0 (no ``len`` call a value).
        limit: the most values kept before a fold (twice ``window``).
        room: how many more values ``values`` takes before a fold is due (``limit`` less
            their number; each append takes one, each fold sets it again).
    """

    __slots__ = ("window", "before_fold", "values", "limit", "room", "pushed", "_count",
                 "_total", "_min", "_max")

    def __init__(self, window: int = 2048) -> None:
        self.window = window
        self.before_fold: Callable[[], None] | None = None
        self.values: list[float] = []  # the newest values (window..2*window after a fold)
        self.limit = 2 * window
        self.room = self.limit
        self.pushed = 0
        """How many of the first values a push has read (``FlinkMetricsMirror``): a fold of
        none but those calls no ``before_fold``."""
        self._count = 0  # of the values folded away
        self._total = 0.0
        self._min = math.inf
        self._max = -math.inf

    def update(self, value: float) -> None:
        """Add one value."""
        self.values.append(value)
        self.room -= 1
        if self.room <= 0:
            self.fold()

    def fold(self) -> None:
        """Fold the oldest values (all but the newest ``window``) into count, sum, min, max.

        ``before_fold`` is called first unless every value folded was pushed already.
        """
        values = self.values
        if self.before_fold is not None and \
                self.pushed < self._count + len(values) - self.window:
            self.before_fold()
        old = values[: len(values) - self.window]
        self._count += len(old)
        self._total += sum(old)
        self._min = min(self._min, *old)
        self._max = max(self._max, *old)
        del values[: len(old)]
        self.room = self.limit - len(values)

    @property
    def count(self) -> int:
        """How many values were added."""
        return self._count + len(self.values)

    @property
    def total(self) -> float:
        """Their sum."""
        return self._total + sum(self.values)

    @property
    def min(self) -> float:
        """The smallest (``inf`` when empty)."""
        return min(self._min, *self.values) if self.values else self._min

    @property
    def max(self) -> float:
        """The largest (``-inf`` when empty)."""
        return max(self._max, *self.values) if self.values else self._max

    def newest(self, n: int) -> list[float]:
        """The ``n`` newest values, oldest first (fewer if fewer are kept)."""
        return self.values[-n:] if n > 0 else []

    def percentile(self, q: float) -> float | None:
        """The ``q`` quantile (0..1) of the recent values (nearest rank), ``None`` if empty."""
        if not self.values:
            return None
        ordered = sorted(self.values[-self.window:])
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]

    def summary(self) -> dict[str, float | int | None]:
        """``count``, ``mean``, ``min``, ``p50``, ``p95``, ``p99``, ``max`` (ms, 3 decimals).

        Returns:
            The summary (``{"count": 0}`` when empty).
        """
        count = self.count
        if not count:
            return {"count": 0}
        ordered = sorted(self.values[-self.window:])

        def rank(q: float) -> float:
            return round(ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))], 3)

        return {"count": count, "mean": round(self.total / count, 3),
                "min": round(self.min, 3), "p50": rank(0.5), "p95": rank(0.95),
                "p99": rank(0.99), "max": round(self.max, 3)}
