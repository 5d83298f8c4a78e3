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
runs_in_flight                  gauge        started here, not completed (a restored run
                                             was never counted as started)
actions_executed{action}        counter      action executions completed (ok or failed)
actions_failed{action}          counter      ... that raised
actions_reentered{action}       counter      executions rebuilt after a restore
chats{model}                    counter      chats (``ChatRequestEvent``, ``ctx.chat``) started
chats_failed{model}             counter      chats answered with an error
chat_calls{model}               counter      model calls executed (one per chat round)
chat_calls_failed{model}        counter      ... that failed (after the setup's retries)
input_tokens{model}             counter      usage reported by recorded ``ChatResponse``s
output_tokens{model}            counter      ...
chat_calls_throttled{model}     counter      throttled answers (429, 529) held and sent again
flow_wait_ms{model}             counter      time model calls were held by flow control
cost_micros{model}              counter      cost of model calls by their budget's price table,
                                             in millionths of its currency
flow_concurrency_limit{model}   gauge        the setup's connection's current concurrency
                                             limit (while flow control limits it)
budget_remaining_tokens{model}  gauge        an agent budget: tokens left of this subtask's
                                             share in the window (the tightest token limit)
budget_remaining_cost_micros{model} gauge    ... cost left, in millionths
tool_calls{tool}                counter      tool calls executed
tool_calls_failed{tool}         counter      ... whose result is an error
subagent_calls{subagent}        counter      sub-agent calls (internal, deferred, async)
subagent_calls_failed{subagent} counter      ... failed or cancelled delegations
durable_calls_executed          counter      durable calls run (every kind above and more)
durable_calls_replayed          counter      durable calls answered from their record
calls_in_flight                 gauge        executed durable calls not completed yet
runs_waiting                    gauge        runs parked waiting for an outside event or a
                                             timer (``ctx.wait_for``, ``ctx.sleep``,
                                             approvals), kept by the host's core
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

Every value is counted in Python; the Flink metrics are updated in batches
(:class:`FlinkMetricsMirror`): after ``flush_every`` completed runs or ``flush_interval_s``
seconds, whichever comes first (checked when a run completes and when a durable
call finishes), and at :meth:`AgentMetrics.flush` (the host calls it at close). A flush
adds to each Flink counter and meter what its local count gained since the last one, and
gives each distribution the values it missed (in thread mode, where the reporter sees only
the last value, just the last one), so after a flush a reporter reads exactly what
per-update calls would have left there, without a call into Java per update.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from ..api.internal import BuiltinEventType
from ._distribution import Distribution
from ._flink_mirror import (
    _DISTRIBUTIONS,
    _GAUGES,
    _LABELLED,
    _LABELLED_GAUGES,
    _SCALAR_COUNTERS,
    METRIC_GROUP,
    FlinkMetricsMirror,
)
from ._labels import add_label
from ._metric_counts import MetricCounts
from ._metrics_probe import MetricsProbe, new_track

__all__ = ["AgentMetrics", "Distribution", "FlinkMetricsMirror", "METRIC_GROUP"]

log = logging.getLogger("flink_agents_py.observability")

_CHAT_EVENTS = frozenset(BuiltinEventType(name) for name in (
    "ChatRequestEvent", "ChatResponseEvent", "ToolRequestEvent", "ToolResponseEvent"))
"""Event types whose chat context ``TrackingObserver.event_dispatched`` works out: the
built-in type objects, which a built-in event's ``type`` is, so that a lookup finds its own
by identity (a plain name in the set made each lookup call ``BuiltinEventType.__eq__``)."""
_FAST_HOOKS = ("on_run_started", "on_run_completed", "on_event", "on_chat_finished",
               "on_action_started", "on_action_finished", "on_call_started", "on_call_finished",
               "on_output")
"""The callbacks ``AgentMetrics``' direct hooks stand in for (a subclass overriding one
gets ``TrackingObserver``'s hooks, which call them)."""
_CORE_HOOKS = ("run_started", "run_completed", "event_dispatched", "action_started",
               "action_finished", "call_started", "call_finished", "output_emitted")
"""The ``Observer`` hooks, each of which ``AgentMetrics`` makes catch what it raises."""
FLUSH_EVERY = 1000
"""Default: push to Flink after this many completed runs..."""
FLUSH_INTERVAL_S = 0.5
"""... or this many seconds since the last push, whichever comes first."""




def _hook_failed(name: str) -> None:
    log.exception("observer hook %s failed", name)


class AgentMetrics(MetricCounts):
    """The metrics observer (see the module docstring for the names).

    Args:
        flink_group: a PyFlink metric group to mirror to (``None``: in-process only).
        actions: action names to pre-register on Flink.
        clock: monotonic seconds (default ``time.perf_counter``).
        flush_every: push to Flink after this many completed runs (at most).
        flush_interval_s: ... or after this many seconds since the last push, whichever
            comes first (checked when a run completes or a durable call finishes).

    Its hooks log what they raise instead of raising (``hooks_never_raise``), so the core
    calls them directly. Unless a subclass overrides an ``on_*`` callback, each hook counts
    by itself, reading the clock once: no ``CallInfo`` per durable call (an executed call in
    flight is one ``(start, kind, label)`` tuple on its key's track), no callback per hook,
    and a key's track for its run is a plain list of three dicts (``new_track``), made only
    for a key with chats or calls and dropped when its run completes. As a core's
    only observer it hands the core its ``probe`` (``MetricsProbe``), which counts events,
    outputs, runs, actions, chat events and durable calls inline and times them with
    ``clock``; the direct hooks count chat events and durable calls with the same probe.
    """

    hooks_never_raise = True

    def __init__(self, flink_group: Any = None, actions: Iterable[str] = (),
                 clock: Callable[[], float] | None = None, *, flush_every: int = FLUSH_EVERY,
                 flush_interval_s: float = FLUSH_INTERVAL_S) -> None:
        super().__init__(clock)
        if flush_every < 1 or flush_interval_s < 0:
            raise ValueError(f"AgentMetrics: flush_every must be >= 1 and flush_interval_s >= 0, "
                             f"got {flush_every} and {flush_interval_s}")
        self._counts: dict[str, int] = dict.fromkeys((*_SCALAR_COUNTERS, *_GAUGES), 0)
        self.labelled: dict[str, dict[str, int]] = {name: {} for name in _LABELLED}
        self.gauges: dict[str, dict[str, int]] = {name: {} for name in _LABELLED_GAUGES}
        self.gauge_source: Callable[[], dict[str, dict[str, int]]] | None = None
        """Live gauge values, read at each push and snapshot (``HostObservability.watch``)."""
        self.latency: dict[str, dict[str | None, Distribution]] = {n: {} for n in _DISTRIBUTIONS}
        self.flink = FlinkMetricsMirror(flink_group, actions) if flink_group is not None else None
        batched = self.flink is not None and self.flink.batched
        self.flush_every = flush_every if batched else 1
        self.flush_interval_s = flush_interval_s if batched else 0.0
        self._push_failures = 0
        self._run_start: dict[Any, float] = {}  # by key, for the runs started here
        self._events_by_type = self.labelled["events_processed_by_type"]
        self._actions_executed = self.labelled["actions_executed"]
        self._action_latency = self.latency["action_latency_ms"]
        self._chat_calls = self.labelled["chat_calls"]
        self._chat_call_latency = self.latency["chat_call_latency_ms"]
        cls = type(self)
        self._direct = all(getattr(cls, name) is getattr(AgentMetrics, name)
                           for name in _FAST_HOOKS)
        """Whether the hot hooks below count directly, without the ``on_*`` calls and what
        only other observers need (parents, run names, events' chat context)."""
        if any(getattr(cls, name) is not getattr(AgentMetrics, name) for name in _CORE_HOOKS):
            self.hooks_never_raise = False  # a subclass's own hook may raise
        self._tally = MetricsProbe(self, _CHAT_EVENTS, _hook_failed)
        """What the direct hooks count with (the core's probe: both paths count alike); it
        keeps when the next push to Flink is due."""
        if self.flink is not None:  # the first push: ``flush_every`` runs or the interval on
            self._tally.push_runs = self.flush_every
            self._tally.push_due = self._clock() + self.flush_interval_s
        if self._direct and self.hooks_never_raise:  # the core reports to it directly
            self.probe: MetricsProbe | None = self._tally

    # -- the core's hooks (direct on the hot path: the same counts as the callbacks) ----
    # Each catches and logs what it raises (``hooks_never_raise``: the core calls them
    # without a ``SafeObserver`` wrapper; a ``try`` costs nothing when nothing raises).
    def run_started(self, key: Any, seq: int) -> None:
        try:
            if not self._direct:
                super().run_started(key, seq)
                return
            keys = self._keys
            if keys:  # a key's track (calls, chats) is made when its first is seen
                keys.pop(key, None)
            self._run_start[key] = self._clock()
            self._counts["runs_started"] += 1
            if self.flink is not None:
                self._maybe_flush()
        except Exception:  # noqa: BLE001 - metrics never fail the agent
            _hook_failed("run_started")

    def run_completed(self, key: Any, seq: int) -> None:
        try:
            if not self._direct:
                super().run_completed(key, seq)
                return
            self._tally.run_completed(key, seq, self._run_start.pop(key, None))
        except Exception:  # noqa: BLE001 - metrics never fail the agent
            _hook_failed("run_completed")

    def _retire(self, t: list[dict[str, Any]], now: float) -> None:
        """Abandon the calls still open on the track of a run that completed at ``now``."""
        for call_id in list(t[1]):
            self._abandon_open(t, call_id, now)

    def _run_track(self, key: Any) -> list[dict[str, Any]]:
        t = self._keys.get(key)
        if t is None:
            t = self._keys[key] = new_track()
        return t

    def event_dispatched(self, key: Any, event: Any, parent: str | None) -> None:
        try:
            if not self._direct:
                super().event_dispatched(key, event, parent)
                return
            if hasattr(event, "type"):
                self._tally.event_dispatched(key, event, parent=parent)
            else:  # not an agent event: counted as type ``?``
                add_label(self._events_by_type, "?")  # (their sum: ``events_processed``)
        except Exception:  # noqa: BLE001
            _hook_failed("event_dispatched")

    def action_started(self, key: Any, execution_id: str, action: str, reentered: bool) -> None:
        try:
            if not self._direct:
                super().action_started(key, execution_id, action, reentered)
                return
            t = self._keys.get(key) or self._run_track(key)
            t[2][execution_id] = self._clock()
            if reentered:
                self._inc("actions_reentered", 1, action)
        except Exception:  # noqa: BLE001
            _hook_failed("action_started")

    def action_finished(self, key: Any, execution_id: str, action: str,
                        error: BaseException | None) -> None:
        try:
            if not self._direct:
                super().action_finished(key, execution_id, action, error)
                return
            t = self._keys.get(key) or self._run_track(key)
            self._action_ended(t, execution_id, action, error, t[2].pop(execution_id, None),
                               self._clock())
        except Exception:  # noqa: BLE001
            _hook_failed("action_finished")

    def _action_ended(self, t: list[dict[str, Any]] | None, execution_id: str, action: str,
                      error: BaseException | None, start: float | None, now: float) -> None:
        """Count an action execution that completed at ``now``; its open calls are abandoned.

        Args:
            t: its key's track (``new_track``), if it has one.
            execution_id: the execution.
            action: its action.
            error: what it raised, if it failed.
            start: the clock when it started (``None``: not seen here).
            now: the clock when it completed.
        """
        if t is not None and t[1]:
            prefix = execution_id + "/c"
            for call_id in [c for c in t[1] if c.startswith(prefix)
                            and "/" not in c[len(prefix):]]:
                self._abandon_open(t, call_id, now)
        add_label(self._actions_executed, action)
        if error is not None:
            self._inc("actions_failed", 1, action)
        if start is not None:
            d = self._action_latency.get(action) or self._distribution(
                self._action_latency, action)
            d.update((now - start) * 1000.0)

    @property
    def clock(self) -> Callable[[], float]:
        """Monotonic seconds; setting it also sets its probe's (``MetricsProbe.clock``)."""
        return self._clock

    @clock.setter
    def clock(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        tally = getattr(self, "_tally", None)
        if tally is not None:  # set before it is made, by ``TrackingObserver.__init__``
            tally.clock = clock

    def call_started(self, key: Any, call_id: str, command: Any, replayed: bool) -> None:
        if not self._direct:
            try:
                super().call_started(key, call_id, command, replayed)
            except Exception:  # noqa: BLE001
                _hook_failed("call_started")
            return
        self._tally.call_started(key, call_id, command, replayed)

    def call_finished(self, key: Any, call_id: str, ok: bool, result: Any) -> None:
        if not self._direct:
            try:
                super().call_finished(key, call_id, ok, result)
            except Exception:  # noqa: BLE001
                _hook_failed("call_finished")
            return
        self._tally.call_finished(key, call_id, ok, result)

    def _abandon_open(self, t: list[dict[str, Any]], call_id: str, now: float) -> None:
        """Count an executed call whose action or run ended first (at ``now``) as abandoned."""
        start, kind, name = t[1].pop(call_id)
        self._counts["calls_in_flight"] -= 1
        self._count_call(kind, name, "abandoned", None, (now - start) * 1000.0)
        self._maybe_flush()

    def open_calls(self) -> int:
        """Executed durable calls whose outcome has not been recorded yet."""
        if not self._direct:
            return super().open_calls()
        return sum(len(t[1]) for t in self._keys.values())

    def output_emitted(self, key: Any, output: Any, parent: str) -> None:
        try:
            if not self._direct:
                super().output_emitted(key, output, parent)
                return
            self._counts["outputs_emitted"] += 1
        except Exception:  # noqa: BLE001
            _hook_failed("output_emitted")

    # -- reading -------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Every metric as plain data.

        Returns:
            Scalars, ``{label: value}`` maps, and ``latency_ms: {"run"|"action"|"chat"|
            "chat_call"|"tool"|"subagent": summary}`` (a summary per label; ``run`` has one
            summary).
        """
        out: dict[str, Any] = dict(self.counters)
        for name, by in self.labelled.items():
            out[name] = dict(sorted(by.items()))
        self.read_gauges()
        for name, by in self.gauges.items():
            out[name] = dict(sorted(by.items()))
        latency: dict[str, Any] = {}
        for name, dists in self.latency.items():
            short = name.removesuffix("_latency_ms")
            if _DISTRIBUTIONS[name] is None:
                latency[short] = dists[None].summary() if None in dists else {"count": 0}
            else:
                latency[short] = {label: d.summary()
                                  for label, d in sorted(dists.items(), key=lambda kv: str(kv[0]))}
        out["latency_ms"] = latency
        return out
