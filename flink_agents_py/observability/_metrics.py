"""``AgentMetrics``: counters, in-flight gauges and latency distributions of an agent.

One observer keeps every value in-process (``snapshot()`` returns them as a dict; the local
runner puts it on ``LocalRunResult.metrics``) and, when given a PyFlink metric group, mirrors
each update to Flink metrics so they reach any configured Flink metric reporter.

Metric names (``{label}``: a key-value metric group on Flink, a nested dict in the snapshot):

==============================  ===========  =================================================
name                            kind         what
==============================  ===========  =================================================
events_processed                counter      events dispatched (inputs, sent, bootstrap)
events_processed{type}          counter      ... by event type
outputs_emitted                 counter      ``OutputEvent`` outputs that left the agent
runs_started / runs_completed   counter      runs (one per input record)
runs_in_flight                  gauge        started, not completed
actions_executed{action}        counter      action executions completed (ok or failed)
actions_failed{action}          counter      ... that raised
actions_reentered{action}       counter      executions rebuilt after a restore
chats{model}                    counter      chats (``ChatRequestEvent``, ``ctx.chat``) started
chats_failed{model}             counter      chats answered with an error
chat_calls{model}               counter      model calls executed (one per chat round)
chat_calls_failed{model}        counter      ... that failed (after the setup's retries)
input_tokens{model}             counter      usage reported by recorded ``ChatResponse``s
output_tokens{model}            counter      ...
tool_calls{tool}                counter      tool calls executed
tool_calls_failed{tool}         counter      ... whose result is an error
subagent_calls{subagent}        counter      sub-agent calls (internal, deferred, async)
subagent_calls_failed{subagent} counter      ... failed or cancelled delegations
durable_calls_executed          counter      durable calls run (every kind above and more)
durable_calls_replayed          counter      durable calls answered from their record
calls_in_flight                 gauge        executed durable calls not completed yet
run_latency_ms                  distribution run start to completion
action_latency_ms{action}       distribution an action execution, start to completion
chat_latency_ms{model}          distribution a whole chat (request to response, all rounds)
chat_call_latency_ms{model}     distribution one model call
tool_latency_ms{tool}           distribution one tool call
subagent_latency_ms{subagent}   distribution one sub-agent call
==============================  ===========  =================================================

``model`` is the chat model setup's resource name (e.g. ``review_model``; when a restored
chat's request was not seen by this process, the model name the provider reported). On
Flink everything is in the operator's group ``flink_agents``; gauges are Flink counters that
go up and down (PyFlink gauges are polled from a Java thread, which thread mode cannot
serve safely), each distribution is a PyFlink ``distribution`` of whole milliseconds (in
process mode a count/sum/min/max; in thread mode PyFlink reports only the last value) plus a
``<name>_total`` counter of milliseconds, so a reporter gets the mean as total / count in
both modes; ``events_processed_rate`` and ``runs_completed_rate`` are meters (per second,
over 60 s).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from ._ids import chat_response_of, parse_result
from ._tracking import CallInfo, TrackingObserver

__all__ = ["AgentMetrics", "Distribution", "FlinkMetricsMirror", "METRIC_GROUP"]

METRIC_GROUP = "flink_agents"

_SCALAR_COUNTERS = ("events_processed", "outputs_emitted", "runs_started", "runs_completed",
                    "durable_calls_executed", "durable_calls_replayed")
_GAUGES = ("runs_in_flight", "calls_in_flight")
_LABELLED = {  # name -> label key
    "events_processed_by_type": "type",
    "actions_executed": "action", "actions_failed": "action", "actions_reentered": "action",
    "chats": "model", "chats_failed": "model",
    "chat_calls": "model", "chat_calls_failed": "model",
    "input_tokens": "model", "output_tokens": "model",
    "tool_calls": "tool", "tool_calls_failed": "tool",
    "subagent_calls": "subagent", "subagent_calls_failed": "subagent",
}
_DISTRIBUTIONS = {"run_latency_ms": None, "action_latency_ms": "action",
                  "chat_latency_ms": "model", "chat_call_latency_ms": "model",
                  "tool_latency_ms": "tool", "subagent_latency_ms": "subagent"}
_METERS = ("events_processed_rate", "runs_completed_rate")


class Distribution:
    """Count, sum, min, max, and percentiles over the most recent ``window`` values."""

    __slots__ = ("count", "total", "min", "max", "_recent", "_next", "window")

    def __init__(self, window: int = 2048) -> None:
        self.count = 0
        self.total = 0.0
        self.min = math.inf
        self.max = -math.inf
        self.window = window
        self._recent: list[float] = []
        self._next = 0

    def update(self, value: float) -> None:
        """Add one value."""
        self.count += 1
        self.total += value
        if value < self.min:
            self.min = value
        if value > self.max:
            self.max = value
        recent = self._recent
        if len(recent) < self.window:
            recent.append(value)
        else:
            recent[self._next] = value
            self._next = (self._next + 1) % self.window

    def percentile(self, q: float) -> float | None:
        """The ``q`` quantile (0..1) of the recent values (nearest rank), ``None`` if empty."""
        if not self._recent:
            return None
        ordered = sorted(self._recent)
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]

    def summary(self) -> dict[str, float | int | None]:
        """``count``, ``mean``, ``min``, ``p50``, ``p95``, ``p99``, ``max`` (ms, 3 decimals)."""
        if not self.count:
            return {"count": 0}
        ordered = sorted(self._recent)

        def rank(q: float) -> float:
            return round(ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))], 3)

        return {"count": self.count, "mean": round(self.total / self.count, 3),
                "min": round(self.min, 3), "p50": rank(0.5), "p95": rank(0.95),
                "p99": rank(0.99), "max": round(self.max, 3)}


class FlinkMetricsMirror:
    """Mirrors ``AgentMetrics`` updates to a PyFlink ``MetricGroup`` (duck-typed).

    Scalar metrics are registered at once; labelled ones when a label value is first seen
    (a key-value subgroup ``<label key>=<value>``). Registration failures are not retried.

    Args:
        group: the group to register in (the operator's ``get_metrics_group()``; a subgroup
            ``flink_agents`` is added).
        actions: action names to register ``actions_*`` metrics for up front.
    """

    def __init__(self, group: Any, actions: Iterable[str] = ()) -> None:
        self.group = group.add_group(METRIC_GROUP)
        self._metrics: dict[tuple[str, str | None], Any] = {}
        self._groups: dict[tuple[str, str], Any] = {}
        for name in (*_SCALAR_COUNTERS, *_GAUGES):
            self._metrics[(name, None)] = self.group.counter(name)
        self._metrics[("run_latency_ms", None)] = self.group.distribution("run_latency_ms")
        self._metrics[("run_latency_ms_total", None)] = self.group.counter("run_latency_ms_total")
        for name in _METERS:
            self._metrics[(name, None)] = self.group.meter(name, 60)
        for action in actions:
            for name in ("actions_executed", "actions_failed", "actions_reentered"):
                self._labelled(name, "action", action)
            self._distribution("action_latency_ms", "action", action)

    def _subgroup(self, label_key: str, label: str) -> Any:
        g = self._groups.get((label_key, label))
        if g is None:
            g = self._groups[(label_key, label)] = self.group.add_group(label_key, label)
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

    def inc(self, name: str, n: int = 1, label: str | None = None) -> None:
        """Add ``n`` (may be negative, for gauges) to a counter."""
        if label is None:
            self._metrics[(name, None)].inc(n)
        else:
            self._labelled(name, _LABELLED[name], label).inc(n)

    def mark(self, name: str, n: int = 1) -> None:
        """Mark ``n`` events on a meter."""
        self._metrics[(name, None)].mark_event(n)

    def observe(self, name: str, value_ms: float, label: str | None = None) -> None:
        """Add a latency (whole milliseconds on Flink)."""
        d, total = self._distribution(name, _DISTRIBUTIONS[name], label)
        ms = int(round(value_ms))
        d.update(ms)
        total.inc(ms)


class AgentMetrics(TrackingObserver):
    """The metrics observer (see the module docstring for the names).

    Args:
        flink_group: a PyFlink metric group to mirror to (``None``: in-process only).
        actions: action names to pre-register on Flink.
        clock: monotonic seconds (default ``time.perf_counter``).
    """

    def __init__(self, flink_group: Any = None, actions: Iterable[str] = (),
                 clock: Callable[[], float] | None = None) -> None:
        super().__init__(clock)
        self.counters: dict[str, int] = dict.fromkeys((*_SCALAR_COUNTERS, *_GAUGES), 0)
        self.labelled: dict[str, dict[str, int]] = {name: {} for name in _LABELLED}
        self.latency: dict[str, dict[str | None, Distribution]] = {n: {} for n in _DISTRIBUTIONS}
        self.flink = FlinkMetricsMirror(flink_group, actions) if flink_group is not None else None

    # -- updates -----------------------------------------------------------------------
    def _inc(self, name: str, n: int = 1, label: str | None = None) -> None:
        if label is None:
            self.counters[name] += n
        else:
            by = self.labelled[name]
            by[label] = by.get(label, 0) + n
        if self.flink is not None:
            self.flink.inc(name, n, label)

    def _inc_event(self, etype: str) -> None:
        counters = self.counters
        counters["events_processed"] += 1
        by = self.labelled["events_processed_by_type"]
        by[etype] = by.get(etype, 0) + 1
        if self.flink is not None:
            self.flink.inc("events_processed")
            self.flink.inc("events_processed_by_type", 1, etype)
            self.flink.mark("events_processed_rate")

    def _observe(self, name: str, value_ms: float | None, label: str | None = None) -> None:
        if value_ms is None:
            return
        by = self.latency[name]
        d = by.get(label)
        if d is None:
            d = by[label] = Distribution()
        d.update(value_ms)
        if self.flink is not None:
            self.flink.observe(name, value_ms, label)

    def _mark(self, name: str) -> None:
        if self.flink is not None:
            self.flink.mark(name)

    # -- callbacks ----------------------------------------------------------------------
    def on_run_started(self, key: Any, run: str, seq: int) -> None:
        counters = self.counters
        counters["runs_started"] += 1
        counters["runs_in_flight"] += 1
        if self.flink is not None:
            self.flink.inc("runs_started")
            self.flink.inc("runs_in_flight")

    def on_run_completed(self, key: Any, run: str, seq: int, duration_ms: float | None) -> None:
        self._inc("runs_completed")
        self._mark("runs_completed_rate")
        if self.counters["runs_in_flight"] > 0:  # a restored run was not counted as started
            self._inc("runs_in_flight", -1)
        self._observe("run_latency_ms", duration_ms)

    def on_event(self, key: Any, event: Any, parent: str | None, chat: str | None,
                 model: str | None) -> None:
        etype = getattr(event, "type", "?")
        self._inc_event(etype)
        if etype == "ChatRequestEvent":
            self._inc("chats", 1, model or "?")

    def on_chat_finished(self, key: Any, chat: str, model: str | None, error: str | None,
                         duration_ms: float | None) -> None:
        if error is not None:
            self._inc("chats_failed", 1, model or "?")
        self._observe("chat_latency_ms", duration_ms, model or "?")

    def on_action_started(self, key: Any, execution_id: str, action: str, parent: str,
                          reentered: bool) -> None:
        if reentered:
            self._inc("actions_reentered", 1, action)

    def on_action_finished(self, key: Any, execution_id: str, action: str, parent: str,
                           error: BaseException | None, duration_ms: float | None) -> None:
        self._inc("actions_executed", 1, action)
        if error is not None:
            self._inc("actions_failed", 1, action)
        self._observe("action_latency_ms", duration_ms, action)

    def on_call_started(self, key: Any, call: CallInfo) -> None:
        if call.replayed:
            self._inc("durable_calls_replayed")
            return
        self._inc("durable_calls_executed")
        self._inc("calls_in_flight")

    def on_call_finished(self, key: Any, call: CallInfo, status: str, result: Any,
                         duration_ms: float | None) -> None:
        if call.kind != "unknown":
            self._inc("calls_in_flight", -1)
        ok = status == "ok"
        kind = call.kind
        cls, data = parse_result(result) if ok else (None, None)
        if kind == "unknown":  # started before a restore: tell the kind from the result
            kind = {"ChatResponse": "chat_model", "ToolResult": "tool",
                    "SubagentResult": "subagent"}.get(cls or "", "function")
        if kind == "chat_model":
            response = chat_response_of(result) if ok else None
            model = call.model or (response or {}).get("model") or "?"
            self._inc("chat_calls", 1, model)
            if not ok:
                self._inc("chat_calls_failed", 1, model)
            usage = (response or {}).get("usage")
            if isinstance(usage, dict):
                self._inc("input_tokens", int(usage.get("input_tokens") or 0), model)
                self._inc("output_tokens", int(usage.get("output_tokens") or 0), model)
            self._observe("chat_call_latency_ms", duration_ms, model)
        elif kind == "tool":
            name = (data.get("name") if isinstance(data, dict) else None) or call.name or "?"
            self._inc("tool_calls", 1, name)
            if not ok or (isinstance(data, dict) and data.get("ok") is False):
                self._inc("tool_calls_failed", 1, name)
            self._observe("tool_latency_ms", duration_ms, name)
        elif kind == "subagent":
            name = call.name or "?"
            self._inc("subagent_calls", 1, name)
            if not ok or (isinstance(data, dict) and data.get("success") is False):
                self._inc("subagent_calls_failed", 1, name)
            self._observe("subagent_latency_ms", duration_ms, name)

    def on_output(self, key: Any, output: Any, parent: str) -> None:
        self._inc("outputs_emitted")

    # -- reading -------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Every metric as plain data: scalars, ``{label: value}`` maps, and
        ``latency_ms: {"run"|"action"|"chat"|"chat_call"|"tool"|"subagent": summary}``
        (a summary per label; ``run`` has one summary)."""
        out: dict[str, Any] = dict(self.counters)
        for name, by in self.labelled.items():
            out[name] = dict(sorted(by.items()))
        latency: dict[str, Any] = {}
        for name, by in self.latency.items():
            short = name.removesuffix("_latency_ms")
            if _DISTRIBUTIONS[name] is None:
                latency[short] = by[None].summary() if None in by else {"count": 0}
            else:
                latency[short] = {label: d.summary() for label, d in sorted(by.items())}
        out["latency_ms"] = latency
        return out
