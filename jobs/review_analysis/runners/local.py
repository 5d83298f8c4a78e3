"""The job on the local runner: parsed records in, output and error rows out, in-process."""

from __future__ import annotations

from typing import Any

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent

from ..advice import end_of_input_markers, is_end_marker
from ..records import agent_error

__all__ = ["run_local"]


def run_local(records: list[dict[str, Any]], agent: Agent, *, progress: bool = False,
              end_markers: bool = False,
              event_log: str | None = None) -> tuple[list[Any], list[Any]]:
    """Run the agent over parsed ``records`` on the local runner, keyed by product.

    Args:
        records: the parsed reviews (``records.read_records``).
        agent: the review agent.
        progress: a progress bar on stderr (it counts reviews, not end markers).
        end_markers: after the records, one ``end_of_input`` marker per product (the final
            advice).
        event_log: a path to write the event log to (JSON lines).

    Returns:
        ``(outputs, errors)``: the output rows, and an error row per failed action.
    """
    inputs = list(records)
    if end_markers:
        inputs += end_of_input_markers(records)
    job = AgentsExecutionEnvironment.local(progress=progress, event_log=event_log).from_list(
        inputs, key_selector=lambda r: r["id"],
        counted=lambda r: not is_end_marker(r)).apply(agent)
    result = job.run()
    errors = [agent_error(e.input, e.action, e.error_type, e.message, e.key)
              for e in result.errors]
    return result.outputs, errors
