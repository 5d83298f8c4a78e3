"""``MetricsProbe``: ``AgentMetrics`` as the core's probe, counting each event directly.

When metrics are a core's only observer, the core reports to this probe instead of the
metrics' ``Observer`` hooks: events, outputs, runs and actions are counted inline (an echo
record costs one method call per event and no per-key bookkeeping), the clock is read once
at each start and its reading is the token the core hands back at the end. Keys with open
calls or chats (``AgentMetrics._keys``) and failed actions go through the metrics' own
bookkeeping, as their hooks would. Durable calls and replay findings go to the metrics'
hooks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..runtime import Probe

if TYPE_CHECKING:
    from ._metrics import AgentMetrics

__all__ = ["MetricsProbe"]


class MetricsProbe(Probe):
    """The probe of one ``AgentMetrics`` (see the module docstring).

    Args:
        metrics: the metrics it counts into.
        hooked_types: event types whose chat bookkeeping the metrics keep.
        on_failure: logs a failure of the metrics' bookkeeping (never raised to the core).
    """

    __slots__ = ("metrics", "counters", "events_by_type", "hooked_types", "clock", "tracked",
                 "actions_executed", "action_latency", "run_latency", "on_failure")

    def __init__(self, metrics: AgentMetrics, hooked_types: frozenset[str],
                 on_failure: Callable[[str], None]) -> None:
        self.metrics = metrics
        self.counters = metrics.counters
        self.events_by_type = metrics.labelled["events_processed_by_type"]
        self.hooked_types = hooked_types
        self.clock: Callable[[], float] = metrics.clock  # kept in step by ``AgentMetrics.clock``
        self.tracked = metrics._keys  # keys with open calls or chats
        self.actions_executed = metrics.labelled["actions_executed"]
        self.action_latency = metrics.latency["action_latency_ms"]
        runs = metrics.latency["run_latency_ms"]
        self.run_latency = runs.get(None) or metrics._distribution(runs, None)
        self.on_failure = on_failure

    def run_started(self, key: Any, seq: int) -> Any:
        """Count a run that started; its token is the clock's reading."""
        counters = self.counters
        counters["runs_started"] += 1
        counters["runs_in_flight"] += 1
        if self.tracked:
            self.tracked.pop(key, None)
        return self.clock()

    def run_completed(self, key: Any, seq: int, token: Any) -> None:
        """Count a completed run (``token``: the clock at its start, or ``None``)."""
        m = self.metrics
        if self.tracked and key in self.tracked:
            try:
                m._run_ended(key, token)
            except Exception:  # noqa: BLE001 - metrics never fail the agent
                self.on_failure("run_completed")
            return
        counters = self.counters
        counters["runs_completed"] += 1
        if counters["runs_in_flight"] > 0:  # a restored run was not counted as started
            counters["runs_in_flight"] -= 1
        if token is not None:
            d = self.run_latency
            values = d.values
            values.append((self.clock() - token) * 1000.0)
            if len(values) >= d.limit:
                d.fold()
        if m.flink is not None:
            try:
                m._maybe_flush(1)
            except Exception:  # noqa: BLE001
                self.on_failure("run_completed")

    def event_dispatched(self, key: Any, event: Any) -> None:
        """Count ``event`` by type; keep the chat bookkeeping of chat events."""
        etype = event.type
        self.counters["events_processed"] += 1
        by = self.events_by_type
        by[etype] = by.get(etype, 0) + 1
        if etype in self.hooked_types:
            try:
                self.metrics._chat_event(key, event, etype, None)
            except Exception:  # noqa: BLE001
                self.on_failure("event_dispatched")

    def output_emitted(self, key: Any, output: Any, event_id: str) -> None:
        """Count an output that left the agent."""
        self.counters["outputs_emitted"] += 1

    def action_started(self, key: Any, execution_id: str, action: str, reentered: bool) -> Any:
        """Count a re-entered execution; the token is the clock's reading."""
        if reentered:
            try:
                self.metrics._inc("actions_reentered", 1, action)
            except Exception:  # noqa: BLE001
                self.on_failure("action_started")
        return self.clock()

    def action_finished(self, key: Any, execution_id: str, action: str,
                        error: BaseException | None, token: Any) -> None:
        """Count a completed execution and its time (``token``: the clock at its start)."""
        if error is not None or (self.tracked and key in self.tracked):
            try:  # a failed action, or one of a key with calls or chats tracked
                self.metrics._action_ended(key, self.tracked.get(key), execution_id, action,
                                           error, token)
            except Exception:  # noqa: BLE001
                self.on_failure("action_finished")
            return
        by = self.actions_executed  # the usual case, inline
        by[action] = by.get(action, 0) + 1
        d = self.action_latency.get(action) or self.metrics._distribution(
            self.action_latency, action)
        values = d.values
        values.append((self.clock() - token) * 1000.0)
        if len(values) >= d.limit:
            d.fold()

    def call_started(self, key: Any, call_id: str, command: Any, replayed: bool) -> None:
        """The metrics' ``call_started`` (it catches what it raises)."""
        self.metrics.call_started(key, call_id, command, replayed)

    def call_finished(self, key: Any, call_id: str, ok: bool, result: Any) -> None:
        """The metrics' ``call_finished`` (it catches what it raises)."""
        self.metrics.call_finished(key, call_id, ok, result)

    def replay_finding(self, key: Any, execution_id: str, kind: str, message: str) -> None:
        """The metrics' ``replay_finding``."""
        try:
            self.metrics.replay_finding(key, execution_id, kind, message)
        except Exception:  # noqa: BLE001
            self.on_failure("replay_finding")
