"""The local runner: ``AgentCore`` hosted in-process, for fast tests and small bounded jobs."""

from __future__ import annotations

import queue
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..api import Agent
from ..plan import AgentPlan
from ..runtime import AgentCore, ErrorRecord, InMemoryKeyState, Journal, Observer, StepResult

__all__ = ["LocalExecutionEnvironment", "LocalAgentJob", "LocalRunResult", "default_key_selector"]


def default_key_selector(record: Any) -> Any:
    """The record's ``"key"`` field when it is a dict with one, else ``None`` (one key)."""
    return record.get("key") if isinstance(record, dict) else None


@dataclass
class LocalRunResult:
    """What a local run produced.

    Attributes:
        outputs: ``OutputEvent.output`` values in emission order (per key, in input order).
        errors: failed actions and rejected records, with their keys.
        counters: runtime counters (runs, actions, durable calls executed and replayed).
        metrics: the metrics snapshot (``AgentMetrics.snapshot()``; ``{}`` with
            ``metrics=False``): counts by action, model, tool and sub-agent, tokens,
            replayed versus executed calls, and latency summaries in ``latency_ms``.
    """

    outputs: list[Any] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)


class LocalAgentJob:
    """An agent applied to a bounded list of records; run it with ``collect`` or ``run``."""

    def __init__(self, env: LocalExecutionEnvironment, records: Iterable[Any],
                 key_selector: Callable[[Any], Any]) -> None:
        self._env = env
        self._records = records
        self._key_selector = key_selector
        self._plan: AgentPlan | None = None
        self.result: LocalRunResult | None = None

    def apply(self, agent: Agent | AgentPlan) -> LocalAgentJob:
        """Use ``agent`` (compiled now; ``PlanError`` is raised here). Returns ``self``."""
        self._plan = agent if isinstance(agent, AgentPlan) else AgentPlan.from_agent(agent)
        return self

    def collect(self) -> list[Any]:
        """Run to completion and return the outputs (errors are in ``self.result.errors``)."""
        return self.run().outputs

    def run(self) -> LocalRunResult:
        """Run every record to completion.

        Runs of different keys overlap while they wait for I/O; runs of one key go one at a
        time, in input order.

        Raises:
            RuntimeError: when no agent was applied, or keys wait for I/O that never comes
                (a runtime defect; the message names the keys).
        """
        if self._plan is None:
            raise RuntimeError("call .apply(agent) before running")
        from ..observability import HostObservability

        wake: queue.SimpleQueue[Any] = queue.SimpleQueue()
        obs = HostObservability(metrics=self._env.metrics, event_log=self._env.event_log,
                                observer=self._env.observer, host="local")
        core = AgentCore(self._plan, max_in_flight=self._env.max_in_flight, notify=wake.put,
                         journal=self._env.journal, observer=obs.observer)
        states: dict[Any, InMemoryKeyState] = {}
        busy: set[Any] = set()
        result = LocalRunResult()
        total = len(self._records) if hasattr(self._records, "__len__") else None  # type: ignore[arg-type]
        bar = self._progress_bar(total)

        def take(key: Any, res: StepResult) -> None:
            result.outputs.extend(res.outputs)
            result.errors.extend(res.errors)
            (busy.add if res.busy else busy.discard)(key)
            if bar is not None:  # update() keeps tqdm's rate and its refresh interval
                bar.set_postfix(outputs=len(result.outputs), in_flight=core.executor.in_flight,
                                refresh=False)
                bar.update(core.counters["runs_completed"] - bar.n)

        def drain_wakeups(block: bool) -> None:
            try:
                key = wake.get(timeout=1.0) if block else wake.get_nowait()
            except queue.Empty:
                if block and core.executor.pending == 0 and not any(
                    core.has_deliveries(k) for k in busy
                ):
                    raise RuntimeError(f"keys {sorted(map(repr, busy))[:5]} wait for I/O "
                                       "that is not running") from None
                return
            take(key, core.advance(key, states[key]))

        core.open()
        try:
            for index, record in enumerate(self._records):
                try:
                    key = self._key_selector(record)
                    hash(key)
                except Exception as e:  # noqa: BLE001 - a bad record is reported, not fatal
                    result.errors.append(ErrorRecord(
                        key=None, seq=-1, action="<key_selector>", execution_id=f"record {index}",
                        error_type=type(e).__name__, message=str(e), input=record))
                    continue
                state = states.setdefault(key, InMemoryKeyState())
                take(key, core.on_input(key, record, state))
                while not wake.empty():
                    drain_wakeups(block=False)
            while busy:
                drain_wakeups(block=True)
        finally:
            core.close()
            obs.close()
            if bar is not None:
                bar.close()
        result.counters = dict(core.counters)
        result.metrics = obs.snapshot()
        self.result = result
        return result

    def _progress_bar(self, total: int | None) -> Any:
        if not self._env.progress:
            return None
        from tqdm import tqdm

        return tqdm(total=total, unit="rec", desc="agent", file=sys.stderr, mininterval=0.5,
                    dynamic_ncols=True)


class LocalExecutionEnvironment:
    """Runs agents in-process over bounded input.

    Args:
        max_in_flight: the most I/O calls (model, tool) running at once across keys.
        progress: show a progress bar (records done, rate, outputs, in-flight calls) on stderr.
        journal: an optional write-ahead journal of durable call outcomes.
        metrics: keep metrics (``LocalRunResult.metrics``).
        event_log: write the event log: an ``observability.EventLog``, a path (JSON lines,
            appended to) or an ``EventLogSink``.
        observer: an extra ``runtime.Observer`` of the core.
    """

    def __init__(self, max_in_flight: int = 32, progress: bool = False,
                 journal: Journal | None = None, *, metrics: bool = True,
                 event_log: Any = None, observer: Observer | None = None) -> None:
        self.max_in_flight = max_in_flight
        self.progress = progress
        self.journal = journal
        self.metrics = metrics
        self.event_log = event_log
        self.observer = observer

    def from_list(self, records: Iterable[Any],
                  key_selector: Callable[[Any], Any] | None = None) -> LocalAgentJob:
        """Start a job over ``records``, keyed by ``key_selector`` (default: ``record["key"]``)."""
        return LocalAgentJob(self, records, key_selector or default_key_selector)
