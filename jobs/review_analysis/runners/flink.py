"""The job on Flink: FileSource -> numbered, parsed lines -> agent operator -> collected rows.

Reading: ``flink_agents_py.flink.read_lines_file`` (a FLIP-27 ``FileSource`` and a
single-key numbering operator, ``NumberedLines``, whose count is keyed state checkpointed with
the source's position). Lines reach Python as their exact bytes, so a line that is not UTF-8,
holds a NUL byte, is too long or is not a review leaves through the error side output with its
number, as on the local runner, and the job goes on.

End of input: with ``end_markers``, ``NumberAndParse`` remembers each product's last line and,
when the bounded source ends (the final watermark fires its event-time timer), emits one
``{"kind": "end_of_input", "id", "line"}`` marker per product, which reaches the agent after
that product's reviews (same key, same channel) so it can write its final product advice.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Iterator
from typing import Any

from pyflink.common import Types
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent
from flink_agents_py.flink import NumberedLines, create_stream_environment, read_lines_file
from flink_agents_py.io import MAX_RECORD_BYTES

from ..advice import END_OF_INPUT
from ..records import agent_error, input_error, parse_line

__all__ = ["END_TIMESTAMP", "NumberAndParse", "flink_agent_error", "run_flink", "tagged"]

END_TIMESTAMP = 2**63 - 2
"""Event-time timer that fires at the final watermark of bounded input."""


class NumberAndParse(NumberedLines):
    """``NumberedLines`` of reviews (``records.parse_line``), with a filter and end markers.

    Keeps only ``only`` lines / the first ``limit`` non-blank ones (bad lines count), as
    ``records.LineFilter`` does on the local runner, in keyed state.

    Args:
        limit: keep at most this many non-blank lines (``None``: all).
        only: keep only these line numbers (``None``: all).
        end_markers: at the end of bounded input, emit one ``end_of_input`` marker per
            product, with the product's last line, in the order of those lines.
        max_record_bytes: longer lines are error rows.
    """

    def __init__(self, limit: int | None = None, only: set[int] | None = None,
                 end_markers: bool = False,
                 max_record_bytes: int | None = MAX_RECORD_BYTES) -> None:
        super().__init__(parse_line, max_record_bytes=max_record_bytes)
        self.limit = limit
        self.only = only
        self.end_markers = end_markers

    def open(self, runtime_context: Any) -> None:
        """Register the kept-lines count and each product's last line (keyed state)."""
        super().open(runtime_context)
        self._kept = runtime_context.get_state(ValueStateDescriptor("kept-lines", Types.LONG()))
        self._last = runtime_context.get_map_state(
            MapStateDescriptor("last-line-by-product", Types.STRING(), Types.LONG()))

    def keep(self, line_no: int) -> bool:
        """Whether to read line ``line_no`` (counted in keyed state)."""
        if self.only is not None and line_no not in self.only:
            return False
        kept = self._kept.value() or 0
        if self.limit is not None and kept >= self.limit:
            return False
        self._kept.update(kept + 1)
        return True

    def emit(self, line_no: int, record: Any, ctx: Any) -> Iterator[Any]:
        """Pass the record on; remember its product's last line (``end_markers``)."""
        if self.end_markers:
            self._last.put(record["id"], line_no)
            ctx.timer_service().register_event_time_timer(END_TIMESTAMP)
        yield record

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Any]:
        """End of bounded input: one ``end_of_input`` marker per product seen."""
        last = sorted((line, pid) for pid, line in self._last.items())
        self._last.clear()
        for line, pid in last:
            yield {"kind": END_OF_INPUT, "id": pid, "line": line}


def tagged(kind: str) -> Callable[[Any], tuple[str, Any]]:
    """A map function pairing each value with ``kind``.

    Returns:
        ``v -> (kind, v)``: results (``"out"``) and errors (``"err"``) travel one collected
        stream.
    """
    return lambda v: (kind, v)


def flink_agent_error(e: dict[str, Any]) -> dict[str, Any]:
    """An error row of the operator's error stream in the job's error shape."""
    return agent_error(e.get("input"), e["action"], e["error_type"], e["message"], e.get("key"))


def run_flink(input_path: pathlib.Path, agent: Agent, *, total: int | None = None,
              parallelism: int = 1, limit: int | None = None, only: set[int] | None = None,
              checkpoint_interval_ms: int | None = 10_000, end_markers: bool = False,
              max_record_bytes: int | None = MAX_RECORD_BYTES, event_log: str | None = None,
              progress: bool = False) -> tuple[list[Any], list[Any]]:
    """Run the job over a file on a local MiniCluster (or the cluster, under ``flink run``).

    Args:
        input_path: the JSON-lines reviews.
        agent: the review agent.
        total: how many records the job will read, when known (for progress).
        parallelism: Flink parallelism.
        limit: read at most this many non-blank lines.
        only: read only these line numbers.
        checkpoint_interval_ms: the checkpoint interval (``None``: no checkpoints).
        end_markers: see ``NumberAndParse``.
        max_record_bytes: longer lines are error rows.
        event_log: a path for the event log (each subtask writes its own file).
        progress: a progress bar on stderr, when it is a terminal.

    Returns:
        ``(outputs, errors)``, in arrival order.
    """
    env = create_stream_environment(parallelism=parallelism,
                                    checkpoint_interval_ms=checkpoint_interval_ms)
    parsed, bad_lines = read_lines_file(
        env, input_path, name="reviews",
        operator=NumberAndParse(limit, only, end_markers, max_record_bytes))
    agents = AgentsExecutionEnvironment.flink(env, event_log=event_log, progress=progress)
    applied = agents.from_datastream(parsed, key_selector=lambda r: r["id"]).apply(agent)
    rows = Types.PICKLED_BYTE_ARRAY()
    agent_errors = applied.errors_datastream().map(flink_agent_error, output_type=rows)
    everything = applied.to_datastream().map(tagged("out"), output_type=rows).union(
        bad_lines.map(input_error, output_type=rows).map(tagged("err"), output_type=rows),
        agent_errors.map(tagged("err"), output_type=rows))
    outputs: list[Any] = []
    errors: list[Any] = []
    with agents.progress(total=total, job_name="review-analysis") as bar, \
            everything.execute_and_collect("review-analysis") as results:
        for kind, value in results:
            (outputs if kind == "out" else errors).append(value)
        bar.finish(outputs=len(outputs), errors=len(errors))
    return outputs, errors
