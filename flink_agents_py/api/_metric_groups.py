"""Metric groups an action updates (Flink Agents' ``ctx.agent_metric_group``...).

Counters, meters, histograms and gauges by name (``ctx.agent_metric_group``,
``ctx.action_metric_group``). They are kept in this process, one tree per agent
(``MetricGroup.snapshot()`` reads it); they are not reported to Flink's metric system (the
built-in metrics are: see ``observability``). An action re-executed after a restore updates
them again.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

__all__ = ["MetricGroup", "Counter", "Meter", "Histogram", "Gauge", "agent_metric_group"]

_LOCK = threading.Lock()


class Counter:
    """A count that goes up and down."""

    def __init__(self) -> None:
        self._count = 0

    def inc(self, n: int = 1) -> None:
        """Add ``n``."""
        with _LOCK:
            self._count += n

    def dec(self, n: int = 1) -> None:
        """Subtract ``n``."""
        with _LOCK:
            self._count -= n

    def get_count(self) -> int:
        """The current count."""
        return self._count


class Meter:
    """Throughput: marks per second over the last minute."""

    _SPAN_S = 60.0

    def __init__(self) -> None:
        self._marks: deque[tuple[float, int]] = deque()
        self._count = 0

    def mark(self, n: int = 1) -> None:
        """Record ``n`` events now."""
        now = time.monotonic()
        with _LOCK:
            self._marks.append((now, n))
            self._count += n
            while self._marks and self._marks[0][0] < now - self._SPAN_S:
                self._marks.popleft()

    def get_rate(self) -> float:
        """Events per second over the last minute."""
        now = time.monotonic()
        with _LOCK:
            recent = sum(n for t, n in self._marks if t >= now - self._SPAN_S)
        return recent / self._SPAN_S

    def get_count(self) -> int:
        """Every event marked."""
        return self._count


class Histogram:
    """Statistics of the last ``window_size`` values."""

    def __init__(self, window_size: int = 100) -> None:
        self._values: deque[float] = deque(maxlen=max(1, window_size))
        self._count = 0

    def update(self, value: float) -> None:
        """Record ``value``."""
        with _LOCK:
            self._values.append(value)
            self._count += 1

    def get_mean(self) -> float:
        """The mean of the window (0 when empty)."""
        values = list(self._values)
        return sum(values) / len(values) if values else 0.0

    def get_max(self) -> float:
        """The largest value of the window (0 when empty)."""
        return max(self._values, default=0)

    def get_min(self) -> float:
        """The smallest value of the window (0 when empty)."""
        return min(self._values, default=0)

    def get_count(self) -> int:
        """Every value recorded."""
        return self._count


class Gauge:
    """A value set by the program."""

    def __init__(self) -> None:
        self._value: Any = None

    def update(self, value: Any) -> None:
        """Set the value."""
        self._value = value

    def get_value(self) -> Any:
        """The value last set."""
        return self._value


class MetricGroup:
    """Metrics by name, and sub-groups by name (created on first use)."""

    def __init__(self) -> None:
        self._groups: dict[str, MetricGroup] = {}
        self._metrics: dict[str, Any] = {}

    def _get(self, name: str, kind: type, *args: Any) -> Any:
        with _LOCK:
            found = self._metrics.get(name)
            if found is None:
                found = self._metrics[name] = kind(*args)
        if not isinstance(found, kind):
            raise TypeError(f"metric {name!r} is a {type(found).__name__}, not a "
                            f"{kind.__name__}")
        return found

    def get_sub_group(self, name: str) -> MetricGroup:
        """The sub-group ``name``."""
        with _LOCK:
            return self._groups.setdefault(name, MetricGroup())

    def get_counter(self, name: str) -> Counter:
        """The counter ``name``."""
        counter: Counter = self._get(name, Counter)
        return counter

    def get_meter(self, name: str) -> Meter:
        """The meter ``name``."""
        meter: Meter = self._get(name, Meter)
        return meter

    def get_histogram(self, name: str, window_size: int = 100) -> Histogram:
        """The histogram ``name`` (statistics of its last ``window_size`` values)."""
        histogram: Histogram = self._get(name, Histogram, window_size)
        return histogram

    def get_gauge(self, name: str) -> Gauge:
        """The gauge ``name``."""
        gauge: Gauge = self._get(name, Gauge)
        return gauge

    def snapshot(self) -> dict[str, Any]:
        """Every metric of the group and its sub-groups, as plain data.

        Returns:
            Counters and meters as their counts, histograms as ``{count, mean, min, max}``,
            gauges as their values, sub-groups as nested dicts.
        """
        out: dict[str, Any] = {}
        for name, metric in list(self._metrics.items()):
            if isinstance(metric, Histogram):
                out[name] = {"count": metric.get_count(), "mean": metric.get_mean(),
                             "min": metric.get_min(), "max": metric.get_max()}
            elif isinstance(metric, Gauge):
                out[name] = metric.get_value()
            else:
                out[name] = metric.get_count()
        for name, group in list(self._groups.items()):
            out[name] = group.snapshot()
        return out


_AGENTS: dict[str, MetricGroup] = {}


def agent_metric_group(agent: str) -> MetricGroup:
    """The metric group of the agent ``agent`` (``module:qualname``) in this process.

    Returns:
        The group (made on first use).
    """
    with _LOCK:
        return _AGENTS.setdefault(agent, MetricGroup())
