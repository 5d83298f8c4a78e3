"""The review-analysis job on Flink: FileSource -> numbered, parsed lines -> agent operator.

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
from typing import Any

from pyflink.common import Types
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent
from flink_agents_py.flink import NumberedLines, create_stream_environment, read_lines_file
from flink_agents_py.io import MAX_RECORD_BYTES

from ._product_advisor import END_OF_INPUT
from .review_analysis import error_record, input_error, parse_line

__all__ = ["run_flink", "NumberAndParse"]

END_TIMESTAMP = 2**63 - 2
"""Event-time timer that fires at the final watermark of bounded input."""


class NumberAndParse(NumberedLines):
    """``NumberedLines`` of reviews (``parse_line``), keeping only ``only`` lines / the first
    ``limit`` non-blank ones (bad lines count), with optional end-of-input markers.

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
        super().open(runtime_context)
        self._kept = runtime_context.get_state(ValueStateDescriptor("kept-lines", Types.LONG()))
        self._last = runtime_context.get_map_state(
            MapStateDescriptor("last-line-by-product", Types.STRING(), Types.LONG()))

    def keep(self, line_no: int) -> bool:
        if self.only is not None and line_no not in self.only:
            return False
        kept = self._kept.value() or 0
        if self.limit is not None and kept >= self.limit:
            return False
        self._kept.update(kept + 1)
        return True

    def emit(self, line_no: int, record: Any, ctx: Any) -> Any:
        if self.end_markers:
            self._last.put(record["id"], line_no)
            ctx.timer_service().register_event_time_timer(END_TIMESTAMP)
        yield record

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        """End of bounded input: one ``end_of_input`` marker per product seen."""
        last = sorted(((line, pid) for pid, line in self._last.items()))
        self._last.clear()
        for line, pid in last:
            yield {"kind": END_OF_INPUT, "id": pid, "line": line}


def _tag(kind: str) -> Any:
    return lambda v: (kind, v)


def run_flink(input_path: pathlib.Path, total: int | None, agent: Agent, *,
              parallelism: int = 1, limit: int | None = None, only: set[int] | None = None,
              checkpoint_interval_ms: int | None = 10_000,
              end_markers: bool = False, max_record_bytes: int | None = MAX_RECORD_BYTES,
              event_log: str | None = None,
              progress: bool = False) -> tuple[list[Any], list[Any]]:
    """Run the job on a local MiniCluster; returns ``(outputs, errors)``.

    ``total``: how many input records the job will read (non-blank lines kept), when known
    (for progress). ``end_markers``: see ``NumberAndParse``. ``event_log``: a path for the
    event log (each subtask writes its own file, see ``observability.FileSink``).
    ``progress``: a progress bar on stderr (when it is a terminal; see
    ``FlinkExecutionEnvironment``).
    """
    env = create_stream_environment(parallelism=parallelism,
                                    checkpoint_interval_ms=checkpoint_interval_ms)
    parsed, bad_lines = read_lines_file(
        env, input_path, name="reviews",
        operator=NumberAndParse(limit, only, end_markers, max_record_bytes))
    agents = AgentsExecutionEnvironment.flink(env, event_log=event_log, progress=progress)
    applied = agents.from_datastream(parsed, key_selector=lambda r: r["id"]).apply(agent)
    agent_errors = applied.errors_datastream().map(
        lambda e: error_record((e.get("input") or {}).get("line"),
                               f"{e['action']}: {e['error_type']}: {e['message']}", e.get("key")),
        output_type=Types.PICKLED_BYTE_ARRAY())
    everything = applied.to_datastream().map(_tag("out"), output_type=Types.PICKLED_BYTE_ARRAY()).union(
        bad_lines.map(input_error, output_type=Types.PICKLED_BYTE_ARRAY())
        .map(_tag("err"), output_type=Types.PICKLED_BYTE_ARRAY()),
        agent_errors.map(_tag("err"), output_type=Types.PICKLED_BYTE_ARRAY()))
    outputs: list[Any] = []
    errors: list[Any] = []
    with agents.progress(total=total, job_name="review-analysis") as bar, \
            everything.execute_and_collect("review-analysis") as results:
        for kind, value in results:
            (outputs if kind == "out" else errors).append(value)
        bar.finish(outputs=len(outputs), errors=len(errors))
    return outputs, errors
