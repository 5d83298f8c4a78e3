"""``FlinkExecutionEnvironment``: agents applied to keyed PyFlink ``DataStream``s."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyflink.common import Types

from ..api import Agent
from ..local import default_key_selector
from ..plan import AgentPlan
from ..runtime import Failpoint, Journal, Observer
from ._operator import ERROR_TAG, AgentOperator

__all__ = ["FlinkExecutionEnvironment", "FlinkAgentBuilder"]


class FlinkAgentBuilder:
    """An input stream waiting for an agent: ``apply`` it, then take ``to_datastream()``."""

    def __init__(self, env: FlinkExecutionEnvironment, ds: Any,
                 key_selector: Callable[[Any], Any]) -> None:
        self._env = env
        self._ds = ds
        self._key_selector = key_selector
        self._result: Any = None

    def apply(self, agent: Agent | AgentPlan, *, name: str | None = None) -> FlinkAgentBuilder:
        """Key the input and run ``agent`` on it in an ``AgentOperator``.

        Raises:
            PlanError: when the agent does not compile.
        """
        plan = agent if isinstance(agent, AgentPlan) else AgentPlan.from_agent(agent)
        op = AgentOperator(plan, max_in_flight=self._env.max_in_flight,
                           max_poll_interval_ms=self._env.max_poll_interval_ms,
                           journal=self._env.journal, failpoint=self._env.failpoint,
                           metrics=self._env.metrics, event_log=self._env.event_log,
                           observer=self._env.observer)
        label = name or (type(agent).__name__ if isinstance(agent, Agent) else "agent")
        self._result = (
            self._ds.key_by(self._key_selector)
            .process(op, output_type=Types.PICKLED_BYTE_ARRAY())
            .name(label).uid(f"agent-{label}")
        )
        return self

    def _applied(self) -> Any:
        if self._result is None:
            raise RuntimeError("call .apply(agent) first")
        return self._result

    def to_datastream(self) -> Any:
        """The agent's outputs (``OutputEvent.output`` values, as Python objects)."""
        return self._applied()

    def errors_datastream(self) -> Any:
        """Failed actions and rejected records, as dicts with ``key`` (the side output)."""
        return self._applied().get_side_output(ERROR_TAG)


class FlinkExecutionEnvironment:
    """Hosts agents in a PyFlink job.

    Args:
        env: a ``StreamExecutionEnvironment``, best made by ``create_stream_environment``
            (which sets the interpreter, the execution mode and the bundle).
        max_in_flight: the most I/O calls running at once per operator instance.
        max_poll_interval_ms: the longest wait between checks of a key waiting for I/O, in ms.
        journal: a write-ahead journal of durable call outcomes (``SqliteJournal``...), closing
            the window between the last checkpoint and a failure.
        failpoint: a test hook for crash injection (see ``runtime.Failpoint``).
        metrics: register the agent metrics (``observability.AgentMetrics``) in each operator
            subtask's metric group ``flink_agents``, for any Flink metric reporter.
        event_log: write the event log: an ``observability.EventLog``, a path or an
            ``EventLogSink`` (picklable). Each subtask writes its own file: ``{subtask}`` in
            the path, or ``-<subtask>`` before its suffix (``events.jsonl`` ->
            ``events-0.jsonl``); a restarted attempt appends to it.
        observer: an extra ``runtime.Observer`` for every subtask (picklable).
    """

    def __init__(self, env: Any, *, max_in_flight: int = 32, max_poll_interval_ms: int = 20,
                 journal: Journal | None = None, failpoint: Failpoint | None = None,
                 metrics: bool = True, event_log: Any = None,
                 observer: Observer | None = None) -> None:
        from ..observability import EventLog

        self.env = env
        self.journal = journal
        self.failpoint = failpoint
        self.metrics = metrics
        self.event_log = EventLog.of(event_log)  # a path is made absolute here, on the client
        self.observer = observer
        self.max_in_flight = max_in_flight
        self.max_poll_interval_ms = max_poll_interval_ms

    def from_datastream(self, ds: Any, key_selector: Callable[[Any], Any] | None = None
                        ) -> FlinkAgentBuilder:
        """Take ``ds`` as input, keyed by ``key_selector`` (default: ``record["key"]``)."""
        return FlinkAgentBuilder(self, ds, key_selector or default_key_selector)

    def execute(self, job_name: str = "flink-agents-py") -> Any:
        """Run the job (blocking); returns Flink's ``JobExecutionResult``."""
        return self.env.execute(job_name)
