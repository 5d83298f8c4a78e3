"""``MetricCounts``: what ``AgentMetrics`` counts, and its push to the Flink metric group.

The ``TrackingObserver`` callbacks (the path a subclass overriding one of them takes), the
counting of a durable call that ended (shared with ``AgentMetrics``' direct hooks) and the
batched push to Flink (``FlinkMetricsMirror``). ``AgentMetrics`` sets every attribute
declared below and handles the core's hooks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..api.internal import BuiltinEventType
from ._distribution import Distribution
from ._flink_mirror import FlinkMetricsMirror
from ._labels import OTHER_LABEL, add_label, kept_label
from ._payload import to_loggable
from ._tracking import CallInfo, TrackingObserver

if TYPE_CHECKING:
    from ._metrics_probe import MetricsProbe

__all__ = ["MetricCounts"]

log = logging.getLogger("flink_agents_py.observability")


_CLASS_NAMES: dict[str, str] = {}
"""The class name of each ``$model`` tag seen (``module:Class`` -> ``Class``)."""
_KIND_OF_RESULT = {"ChatResponse": "chat_model", "ToolResult": "tool",
                   "SubagentResult": "subagent"}
"""The call kind of a result's class (a call started before a restore)."""
_USAGE_FIELDS = ("input_tokens", "output_tokens")
_METADATA_FIELDS = ("budget", "throttled", "flow_wait_s")
_CHAT_REQUEST = BuiltinEventType("ChatRequestEvent")
"""Compared by identity first (``==`` on a built-in type is a Python call)."""
_PLAIN = frozenset((str, int, float, bool, type(None)))
"""Types ``to_loggable`` returns as they are."""


def _loggable_fields(value: Any, names: tuple[str, ...]) -> tuple[Any, ...] | None:
    """The fields ``names`` of ``to_loggable(value)`` (each ``None`` when absent).

    A plain dict with text keys (no model tag) has only those fields made loggable, not the
    whole value.

    Returns:
        The fields, or ``None`` when ``to_loggable(value)`` is not a dict.
    """
    if type(value) is dict and "$model" not in value:
        for k in value:
            if type(k) is not str:
                break
        else:
            fields = []
            for name in names:
                v = value.get(name)
                fields.append(v if type(v) in _PLAIN else to_loggable(v))
            return tuple(fields)
    form = to_loggable(value)
    if not isinstance(form, dict):
        return None
    return tuple([form.get(name) for name in names])


class MetricCounts(TrackingObserver):
    """Counters, labelled counters and distributions, with their callbacks and Flink push.

    Attributes:
        counters: scalar counters and gauges, by metric name (a property).
        labelled: ``{label: count}`` by metric name.
        latency: ``{label: Distribution}`` by metric name (label ``None`` when unlabelled).
        flink: the Flink mirror, or ``None`` (in-process only).
        flush_every: push after this many completed runs...
        flush_interval_s: ... or this many seconds since the last push.
    """

    _counts: dict[str, int]  # ``counters`` as the hooks keep them (two worked out on reading)
    labelled: dict[str, dict[str, int]]
    latency: dict[str, dict[str | None, Distribution]]
    flink: FlinkMetricsMirror | None
    flush_every: int
    flush_interval_s: float
    _push_failures: int
    _tally: MetricsProbe  # keeps when the next push is due (``push_runs``, ``push_due``)
    _clock: Callable[[], float]  # ``clock`` (``AgentMetrics.clock`` sets it)
    _chat_calls: dict[str, int]
    _chat_call_latency: dict[str | None, Distribution]
    gauges: dict[str, dict[str, int]]
    gauge_source: Callable[[], dict[str, dict[str, int]]] | None

    @property
    def counters(self) -> dict[str, int]:
        """Scalar counters and gauges by name (the same dict for the observer's life).

        Two are worked out when read instead of being counted per event and run:
        ``events_processed`` is the sum of ``events_processed{type}``, and ``runs_in_flight``
        is ``runs_started`` less the runs completed that were counted as started (each
        timed: ``run_latency_ms``'s count; a run restored from a checkpoint was neither).
        """
        counts = self._counts
        counts["events_processed"] = sum(self.labelled["events_processed_by_type"].values())
        runs = self.latency["run_latency_ms"].get(None)
        counts["runs_in_flight"] = counts["runs_started"] - (runs.count if runs else 0)
        return counts

    # -- pushing to Flink ----------------------------------------------------------------
    def flush(self) -> None:
        """Push every value counted since the last push to the Flink metric group.

        Without a metric group this does nothing.
        """
        if self.flink is not None:
            tally = self._tally
            tally.push_runs = self._counts["runs_completed"] + self.flush_every
            tally.push_due = self._clock() + self.flush_interval_s
            try:
                self.read_gauges()
                self.flink.push(self.counters, self.labelled, self.latency, self.gauges)
            except Exception:  # noqa: BLE001 - metrics never fail the agent; retried next time
                self._push_failures += 1
                if self._push_failures == 1:
                    log.warning("pushing agent metrics to Flink failed (logged once)",
                                exc_info=True)

    def read_gauges(self) -> None:
        """Bring ``gauges`` up to the live values of ``gauge_source`` (when one is set)."""
        source = self.gauge_source
        if source is None:
            return
        try:
            for name, by in source().items():
                self.gauges.setdefault(name, {}).update(by)
        except Exception:  # noqa: BLE001 - metrics never fail the agent
            log.debug("reading the live gauges failed", exc_info=True)

    @property
    def unflushed(self) -> bool:
        """Whether values counted since the last push wait to reach the Flink metric group."""
        if self.flink is None:
            return False
        return self.flink.behind(self.counters)

    def _maybe_flush(self) -> None:
        """Push if ``flush_every`` runs completed or ``flush_interval_s`` passed since the last."""
        if self.flink is None:
            return
        tally = self._tally
        if self._counts["runs_completed"] >= tally.push_runs or self._clock() >= tally.push_due:
            self.flush()

    # -- updates -----------------------------------------------------------------------
    def _inc(self, name: str, n: int = 1, label: str | None = None) -> None:
        if label is None:
            self._counts[name] += n
        else:
            by = self.labelled[name]
            if label in by:
                by[label] += n
            else:
                add_label(by, label, n)

    def _observe(self, name: str, value_ms: float | None, label: str | None = None) -> None:
        if value_ms is None:
            return
        by = self.latency[name]
        d = by.get(label) or self._distribution(by, label)
        d.values.append(value_ms)  # ``d.update`` inline
        d.room -= 1
        if d.room <= 0:
            d.fold()

    def _distribution(self, by: dict[str | None, Distribution], label: str | None) -> Distribution:
        """``by[label]``, made now (a new label; kept as ``_labels.kept_label`` says)."""
        if kept_label(by, label) is OTHER_LABEL:
            other = by.get(OTHER_LABEL)
            if other is not None:
                return other
            label = OTHER_LABEL
        d = by[label] = Distribution()
        if self.flink is not None:
            d.before_fold = self.flush
        return d

    # -- callbacks ----------------------------------------------------------------------
    def on_run_started(self, key: Any, run: str, seq: int) -> None:
        self._counts["runs_started"] += 1
        self._maybe_flush()

    def on_run_completed(self, key: Any, run: str, seq: int, duration_ms: float | None) -> None:
        self._counts["runs_completed"] += 1  # (``runs_in_flight``: worked out, ``counters``)
        self._observe("run_latency_ms", duration_ms)
        self._maybe_flush()

    def on_event(self, key: Any, event: Any, parent: str | None, chat: str | None,
                 model: str | None) -> None:
        etype = getattr(event, "type", "?")
        by = self.labelled["events_processed_by_type"]  # (their sum: ``events_processed``)
        if etype in by:
            by[etype] += 1
        else:
            add_label(by, etype)
        if etype is _CHAT_REQUEST or (  # (``is`` first: ``==`` on it is a Python call)
                type(etype) is not BuiltinEventType and etype == "ChatRequestEvent"):
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
        self._count_call(call.kind, call.model if call.kind == "chat_model" else call.name,
                         status, result, duration_ms)
        self._maybe_flush()

    def _count_call(self, kind: str, name: str | None, status: str, result: Any,
                    duration_ms: float | None) -> None:
        """Count a durable call that ended (``calls_in_flight`` and the push aside).

        Args:
            kind: ``CallInfo.kind`` (``unknown``: started before a restore).
            name: the chat model setup (``chat_model``), tool, sub-agent, or ``None``.
            status: ``ok``, ``failed`` or ``abandoned``.
            result: the recorded result (``None`` unless ok).
            duration_ms: since the call started (``None`` when not seen).
        """
        ok = status == "ok"
        cls: str | None = None  # ``parse_result`` without the deep copy: the metrics read a
        data = result if ok else None  # few top-level fields, each made loggable on its own
        # (each field read by ``in`` then ``[]``, not ``dict.get``: no call when found)
        if ok and type(result) is dict and "$model" in result and len(result) == 2:
            tag = result["$model"]
            if tag is not None and "data" in result:  # a tagged model: its class and data
                cls = _CLASS_NAMES[tag] if type(tag) is str and tag in _CLASS_NAMES else None
                if cls is None:
                    text = str(tag)
                    cls = text[text.rfind(":") + 1:]
                    if type(tag) is str and len(_CLASS_NAMES) < 1024:
                        _CLASS_NAMES[tag] = cls
                data = result["data"]
        if kind == "unknown":  # started before a restore: tell the kind from the result
            kind = _KIND_OF_RESULT.get(cls or "", "function")
        if kind == "chat_model":
            response = data if (type(data) is dict or isinstance(data, dict)) and (
                cls == "ChatResponse" or (cls is None and "message" in data and "usage" in data)
            ) else None
            model = name or (to_loggable(response.get("model")) if response else None) or "?"
            by = self._chat_calls
            if model in by:
                by[model] += 1
            else:
                add_label(by, model)
            if not ok:
                self._inc("chat_calls_failed", 1, model)
            if response:
                usage = response["usage"] if "usage" in response else None
                if usage is not None:
                    usage = _loggable_fields(usage, _USAGE_FIELDS)
                    if usage is not None:
                        self._inc("input_tokens", int(usage[0] or 0), model)
                        self._inc("output_tokens", int(usage[1] or 0), model)
                meta = response["metadata"] if "metadata" in response else None
                fields = None if meta is None or (type(meta) is dict and not meta) else \
                    _loggable_fields(meta, _METADATA_FIELDS)
                if fields is not None:  # flow control: throttled answers, time held
                    budget, throttled, wait_s = fields
                    cost = budget.get("cost") if isinstance(budget, dict) else None
                    if isinstance(cost, (int, float)) and cost:
                        self._inc("cost_micros", round(cost * 1e6), model)
                    if isinstance(throttled, int) and throttled:
                        self._inc("chat_calls_throttled", throttled, model)
                    if isinstance(wait_s, (int, float)) and wait_s:
                        self._inc("flow_wait_ms", round(wait_s * 1000), model)
            if duration_ms is not None:  # ``_observe`` inline
                dists = self._chat_call_latency
                d = dists[model] if model in dists else self._distribution(dists, model)
                d.values.append(duration_ms)
                d.room -= 1
                if d.room <= 0:
                    d.fold()
        elif kind == "tool":
            name = (to_loggable(data.get("name")) if isinstance(data, dict) else None) \
                or name or "?"
            self._inc("tool_calls", 1, name)
            if not ok or (isinstance(data, dict) and data.get("ok") is False):
                self._inc("tool_calls_failed", 1, name)
            self._observe("tool_latency_ms", duration_ms, name)
        elif kind == "subagent":
            name = name or "?"
            self._inc("subagent_calls", 1, name)
            if not ok or (isinstance(data, dict) and data.get("success") is False):
                self._inc("subagent_calls_failed", 1, name)
            self._observe("subagent_latency_ms", duration_ms, name)

    def on_output(self, key: Any, output: Any, parent: str) -> None:
        self._inc("outputs_emitted")
