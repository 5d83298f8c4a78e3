"""What a host (local runner, Flink operator) sets up: metrics, event log, user observer."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any

from ..runtime import Observer
from ._apache_event_log import ApacheEventLog, ApacheEventLogObserver, new_job_id
from ._event_log import EventLog, EventLogObserver, EventLogSink
from ._metrics import FLUSH_EVERY, FLUSH_INTERVAL_S, AgentMetrics

__all__ = ["HostObservability", "FanOut"]

log = logging.getLogger("flink_agents_py.observability")

EventLogOption = EventLog | str | os.PathLike[str] | EventLogSink | None


class FanOut(Observer):
    """Forwards every hook to several observers in order.

    What one raises is logged and the others still run (so the core calls it directly:
    ``hooks_never_raise``).
    """

    hooks_never_raise = True

    def __init__(self, *observers: Observer) -> None:
        self.observers = [o for o in observers if o is not None]
        for name in dir(Observer):
            if not name.startswith("_") and callable(getattr(Observer, name)):
                setattr(self, name, self._fan_out(name))

    def _fan_out(self, name: str) -> Any:
        hooks = [getattr(o, name) for o in self.observers]

        def fan_out(*args: Any, **kwargs: Any) -> None:
            for hook in hooks:
                try:
                    hook(*args, **kwargs)
                except Exception:  # noqa: BLE001
                    log.exception("observer %s hook %s failed",
                                  type(getattr(hook, "__self__", hook)).__name__, name)

        return fan_out


class HostObservability:
    """The observers of one core: ``metrics``, ``event_log`` and a user ``observer``.

    Args:
        metrics: keep ``AgentMetrics``.
        event_log: an ``EventLog``, a path, a sink, or ``None``.
        observer: a user ``Observer`` (called last).
        host: ``"local"`` or ``"flink"`` (written in the log header).
        subtask: the Flink subtask index (``None`` locally).
        attempt: the Flink attempt number.
        flink_group: a PyFlink metric group to mirror metrics to.
        actions: action names (pre-registered Flink metrics).
        flush_every: push metrics to ``flink_group`` after this many completed runs...
        flush_interval_s: ... or this many seconds since the last push (see ``AgentMetrics``).
        agent: the agent's name, written in the event log's header.
        apache_event_log: Apache Flink Agents' file event log (``ApacheEventLog``), or
            ``None``; its file is named by ``job`` and ``subtask``.
        job: the job's id (Flink's ``JobID``; ``""``: a new one, as locally) and the task's
            name (``""``: the agent's).
        lineage: the job's token, shared by its attempts (written in the event log's header).

    The observer is the single one itself when there is one (no fan-out in the call path).
    """

    def __init__(self, *, metrics: bool = True, event_log: EventLogOption = None,
                 observer: Observer | None = None, host: str = "local",
                 subtask: int | None = None, attempt: int | None = None,
                 flink_group: Any = None, actions: Iterable[str] = (),
                 flush_every: int = FLUSH_EVERY,
                 flush_interval_s: float = FLUSH_INTERVAL_S, agent: str = "",
                 apache_event_log: ApacheEventLog | None = None,
                 job: tuple[str, str] = ("", ""), lineage: str = "") -> None:
        self.metrics = AgentMetrics(
            flink_group=flink_group, actions=actions, flush_every=flush_every,
            flush_interval_s=flush_interval_s) if metrics else None
        spec = EventLog.of(event_log)
        self.event_log: EventLogObserver | None = (
            spec.open(host=host, subtask=subtask, attempt=attempt, agent=agent,
                      lineage=lineage)
            if spec is not None else None)
        self.apache_log: ApacheEventLogObserver | None = (
            apache_event_log.open(job_id=job[0] or new_job_id(), task_name=job[1] or agent,
                                  subtask=subtask or 0, agent=agent)
            if apache_event_log is not None else None)
        parts = [o for o in (self.metrics, self.event_log, self.apache_log, observer)
                 if o is not None]
        self.observer: Observer | None = (
            None if not parts else parts[0] if len(parts) == 1 else FanOut(*parts))

    def snapshot(self) -> dict[str, Any]:
        """The metrics snapshot (``{}`` without metrics)."""
        return self.metrics.snapshot() if self.metrics is not None else {}

    @property
    def flush_interval_ms(self) -> int:
        """How long metrics may wait to be pushed, in ms (0 without a metric group)."""
        m = self.metrics
        return int(m.flush_interval_s * 1000) if m is not None and m.flink is not None else 0

    @property
    def unflushed(self) -> bool:
        """Whether counted metrics wait to be pushed to Flink.

        A host with no further callback coming (an idle key) registers a timer
        ``flush_interval_ms`` ahead and calls :meth:`flush` from it.
        """
        return self.metrics is not None and self.metrics.unflushed

    def watch(self, resources: Any) -> None:
        """Report the live gauges of an operator's resources with the metrics.

        Args:
            resources: the core's ``ResourceEnvironment`` (flow-control limits and agent
                budgets left of the chat model setups it builds: ``runtime._gauges``).
        """
        if self.metrics is not None:
            from ..runtime.internal import live_gauges

            self.metrics.gauge_source = lambda: live_gauges(resources)

    def read_gauges(self) -> None:
        """Read the live gauges now (a host calls it before the resources close)."""
        if self.metrics is not None:
            self.metrics.read_gauges()

    def flush(self) -> None:
        """Push the metrics counted since the last push to the Flink metric group now.

        A host may call it from a timer, so that an idle operator's last updates are not held
        back until its next record.
        """
        if self.metrics is not None:
            self.metrics.flush()

    def close(self) -> None:
        """Push the last metrics, then flush and close the event log."""
        if self.metrics is not None:
            try:
                self.metrics.flush()
            except Exception:  # noqa: BLE001 - closing must go on (the event log)
                log.exception("pushing the last metrics to Flink failed")
        event_log, apache_log, self.event_log, self.apache_log = \
            self.event_log, self.apache_log, None, None
        try:  # one log failing to close (a full disk) still closes the other; then raises
            if event_log is not None:
                event_log.close()
        finally:
            if apache_log is not None:
                apache_log.close()
