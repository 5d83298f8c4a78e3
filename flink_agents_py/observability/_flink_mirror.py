"""``FlinkMetricsMirror``: ``AgentMetrics`` values pushed to a PyFlink metric group in batches.

The names, kinds and batching are described in ``_metrics`` (the module docstring). Label
values (metric group names) are masked (``api.mask_secrets``) before they reach Flink.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..api import mask_secrets
from ._distribution import Distribution

__all__ = ["FlinkMetricsMirror", "METRIC_GROUP"]

METRIC_GROUP = "flink_agents"

_SCALAR_COUNTERS = ("events_processed", "outputs_emitted", "runs_started", "runs_completed",
                    "durable_calls_executed", "durable_calls_replayed")
_GAUGES = ("runs_in_flight", "calls_in_flight", "runs_waiting")
_LABELLED = {  # name -> label key
    "events_processed_by_type": "type",
    "actions_executed": "action", "actions_failed": "action", "actions_reentered": "action",
    "chats": "model", "chats_failed": "model",
    "chat_calls": "model", "chat_calls_failed": "model",
    "input_tokens": "model", "output_tokens": "model",
    "chat_calls_throttled": "model", "flow_wait_ms": "model", "cost_micros": "model",
    "tool_calls": "tool", "tool_calls_failed": "tool",
    "subagent_calls": "subagent", "subagent_calls_failed": "subagent",
}
_LABELLED_GAUGES = {"flow_concurrency_limit": "model", "budget_remaining_tokens": "model",
                    "budget_remaining_cost_micros": "model"}
"""Live values (``AgentMetrics.gauge_source``), by label key: counters that go up and down."""
_DISTRIBUTIONS = {"run_latency_ms": None, "action_latency_ms": "action",
                  "chat_latency_ms": "model", "chat_call_latency_ms": "model",
                  "tool_latency_ms": "tool", "subagent_latency_ms": "subagent"}
_METERS = {"events_processed_rate": "events_processed", "runs_completed_rate": "runs_completed"}
"""Each meter and the local counter whose gains it is marked with."""
_EMBEDDED = "pyflink.fn_execution.metrics.embedded"
"""Thread-mode metric classes: every update is a call into Java; a distribution keeps only
its last value."""
_PROCESS = "pyflink.fn_execution.metrics.process"
"""Process-mode metric classes: Beam cells in Python, sent with each bundle."""


try:  # (PyFlink's dependency: there wherever a Flink metric group is)
    import numpy as _np
except ImportError:  # pragma: no cover - a fake metric group without numpy
    _np = None  # type: ignore[assignment]


def whole_sum(values: list[float]) -> int:
    """``sum(map(round, values))``: each value rounded half to even, then added up.

    Many values are rounded by numpy's ``rint`` (half to even, as ``round``; a whole float
    sum is exact below 2**53), about four times as fast as a ``round`` call per value.

    Args:
        values: latencies in milliseconds.

    Returns:
        The sum of the values rounded to whole numbers.
    """
    if _np is not None and len(values) >= 64:
        return int(_np.rint(_np.array(values, dtype=float)).sum())
    return sum(map(round, values))


class FlinkMetricsMirror:
    """Pushes ``AgentMetrics`` values to a PyFlink ``MetricGroup`` (duck-typed), in batches.

    Scalar metrics are registered at once; labelled ones when a label value is first pushed
    (a key-value subgroup ``<label key>=<value>``). Registration failures are not retried.
    Counters, gauges and meters are pushed as the gain of the local count since the last
    push, distributions as the values added since (:meth:`push`).

    Args:
        group: the group to register in (the operator's ``get_metrics_group()``; a subgroup
            ``flink_agents`` is added).
        actions: action names to register ``actions_*`` metrics for up front.
    """

    def __init__(self, group: Any, actions: Iterable[str] = ()) -> None:
        self.group = group.add_group(METRIC_GROUP)
        self._metrics: dict[tuple[str, str | None], Any] = {}
        self._groups: dict[tuple[str, str], Any] = {}
        self._pushed: dict[tuple[str, str | None], int] = {}
        for name in (*_SCALAR_COUNTERS, *_GAUGES):
            self._metrics[(name, None)] = self.group.counter(name)
        run_latency, _ = self._distribution("run_latency_ms", None, None)
        for name in _METERS:
            self._metrics[(name, None)] = self.group.meter(name, 60)
        for action in actions:
            for name in ("actions_executed", "actions_failed", "actions_reentered"):
                self._labelled(name, "action", action)
            self._distribution("action_latency_ms", "action", action)
        module = type(run_latency).__module__
        self.last_value_only = module.startswith(_EMBEDDED)
        """Thread mode: a distribution reports its last value only, so only that is pushed."""
        self.batched = not module.startswith(_PROCESS)
        """False in process mode: Beam already batches updates in Python per bundle, and a
        push outside a bundle (at close) would be lost, so every check pushes."""

    def _subgroup(self, label_key: str, label: str) -> Any:
        g = self._groups.get((label_key, label))
        if g is None:
            # a label can come from a provider (the model it reported): no known secret in it
            g = self._groups[(label_key, label)] = self.group.add_group(
                label_key, mask_secrets(str(label)))
        return g

    def _labelled(self, name: str, label_key: str, label: str) -> Any:
        m = self._metrics.get((name, label))
        if m is None:
            metric = "events_processed" if name == "events_processed_by_type" else name
            m = self._metrics[(name, label)] = self._subgroup(label_key, label).counter(metric)
        return m

    def _distribution(self, name: str, label_key: str | None, label: str | None) -> tuple[Any, Any]:
        d = self._metrics.get((name, label))
        if d is None:
            g = self.group if label_key is None else self._subgroup(label_key, label or "")
            d = self._metrics[(name, label)] = g.distribution(name)
            self._metrics[(name + "_total", label)] = g.counter(name + "_total")
        return d, self._metrics[(name + "_total", label)]

    def behind(self, counters: Mapping[str, int]) -> bool:
        """Whether there is something to push.

        Args:
            counters: the local scalar counters and gauges (``AgentMetrics.counters``).

        Returns:
            True when a scalar moved since the last :meth:`push` (every update of the agent
            metrics comes with a scalar's: an event, a run, or a durable call's start or end).
        """
        pushed = self._pushed
        return any(value != pushed.get((name, None), 0) for name, value in counters.items())

    def _gain(self, key: tuple[str, str | None], value: int) -> int:
        return value - self._pushed.get(key, 0)

    def push(self, counters: Mapping[str, int], labelled: Mapping[str, Mapping[str, int]],
             latency: Mapping[str, Mapping[str | None, Distribution]],
             gauges: Mapping[str, Mapping[str, int]] | None = None) -> None:
        """Bring every Flink metric up to the local values.

        Args:
            counters: scalar counters and gauges by name (``AgentMetrics.counters``).
            labelled: labelled counters, ``{name: {label: count}}`` (``AgentMetrics.labelled``).
            latency: distributions, ``{name: {label: Distribution}}`` (``AgentMetrics.latency``);
                each must not have folded away values added since the last push (its
                ``before_fold`` pushes).
            gauges: live values, ``{name: {label: value}}`` (``AgentMetrics.gauges``).
        """
        metrics, pushed = self._metrics, self._pushed  # a value counts as pushed once sent
        for name, value in counters.items():
            gain = self._gain((name, None), value)
            if gain:
                metrics[(name, None)].inc(gain)
                pushed[(name, None)] = value
        for meter, counter in _METERS.items():
            value = counters[counter]
            gain = self._gain((meter, None), value)
            if gain:
                metrics[(meter, None)].mark_event(gain)
                pushed[(meter, None)] = value
        for name, by in labelled.items():
            for label, value in by.items():
                gain = self._gain((name, label), value)
                if gain:
                    self._labelled(name, _LABELLED[name], label).inc(gain)
                    pushed[(name, label)] = value
                elif (name, label) not in metrics:  # counted zero (no tokens): registered
                    self._labelled(name, _LABELLED[name], label)
        for name, by in (gauges or {}).items():
            for label, value in by.items():
                key = ("gauge:" + name, label)
                gain = self._gain(key, value)
                if gain or key not in pushed:
                    metric = metrics.get(key)
                    if metric is None:
                        metric = metrics[key] = self._subgroup(
                            _LABELLED_GAUGES[name], label).counter(name)
                    if gain:
                        metric.inc(gain)
                    pushed[key] = value
        for dist, dists in latency.items():
            for dist_label, local in dists.items():
                count = local.count
                gain = self._gain((dist, dist_label), count)
                if not gain:
                    continue
                values = local.newest(gain)  # whole milliseconds, rounded in C (``map``)
                d, total = self._distribution(dist, _DISTRIBUTIONS[dist], dist_label)
                if self.last_value_only:
                    d.update(round(values[-1]))
                    total.inc(whole_sum(values))
                else:
                    whole = list(map(round, values))
                    for v in whole:
                        d.update(v)
                    total.inc(sum(whole))
                pushed[(dist, dist_label)] = local.pushed = count
