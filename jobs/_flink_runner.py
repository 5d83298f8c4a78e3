"""The review-analysis job on Flink: FileSource -> numbered, parsed lines -> agent operator.

Line numbers: a FLIP-27 ``FileSource`` reads lines in order (one file is one split) but does
not number them, so a single-key ``KeyedProcessFunction`` counts them in keyed state; the
count is checkpointed together with the source's offset, so numbering survives a restore.
Malformed lines leave through a side output with their number.

End of input: with ``end_markers``, ``NumberAndParse`` remembers each product's last line and,
when the bounded source ends (the final watermark fires its event-time timer), emits one
``{"kind": "end_of_input", "id", "line"}`` marker per product, which reaches the agent after
that product's reviews (same key, same channel) so it can write its final product advice.
"""

from __future__ import annotations

import pathlib
from typing import Any

from pyflink.common import Types, WatermarkStrategy
from pyflink.datastream import KeyedProcessFunction, OutputTag
from pyflink.datastream.connectors.file_system import FileSource, StreamFormat
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent
from flink_agents_py.flink import create_stream_environment

from ._product_advisor import END_OF_INPUT
from .review_analysis import error_record, parse_line

__all__ = ["run_flink", "NumberAndParse", "PARSE_ERRORS"]

PARSE_ERRORS = OutputTag("parse-errors", Types.PICKLED_BYTE_ARRAY())
END_TIMESTAMP = 2**63 - 2
"""Event-time timer that fires at the final watermark of bounded input."""


class NumberAndParse(KeyedProcessFunction):
    """Numbers lines (0-based) and parses them; keeps only ``only`` lines / the first ``limit``.

    Args:
        limit: keep at most this many non-blank lines (``None``: all).
        only: keep only these line numbers (``None``: all).
        end_markers: at the end of bounded input, emit one ``end_of_input`` marker per
            product, with the product's last line, in the order of those lines.
    """

    def __init__(self, limit: int | None = None, only: set[int] | None = None,
                 end_markers: bool = False) -> None:
        self.limit = limit
        self.only = only
        self.end_markers = end_markers

    def open(self, runtime_context: Any) -> None:
        self._next = runtime_context.get_state(ValueStateDescriptor("next-line", Types.LONG()))
        self._kept = runtime_context.get_state(ValueStateDescriptor("kept-lines", Types.LONG()))
        self._last = runtime_context.get_map_state(
            MapStateDescriptor("last-line-by-product", Types.STRING(), Types.LONG()))

    def process_element(self, text: str, ctx: Any) -> Any:
        line_no = self._next.value() or 0
        self._next.update(line_no + 1)
        if not text.strip() or (self.only is not None and line_no not in self.only):
            return
        kept = self._kept.value() or 0
        if self.limit is not None and kept >= self.limit:
            return
        self._kept.update(kept + 1)
        try:
            record = parse_line(line_no, text)
        except ValueError as e:
            yield PARSE_ERRORS, error_record(line_no, str(e))
            return
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


def run_flink(input_path: pathlib.Path, lines: list[tuple[int, str]], agent: Agent, *,
              parallelism: int = 1, limit: int | None = None, only: set[int] | None = None,
              checkpoint_interval_ms: int | None = 10_000,
              end_markers: bool = False) -> tuple[list[Any], list[Any]]:
    """Run the job on a local MiniCluster; returns ``(outputs, errors)``.

    ``lines`` is unused here (the FileSource reads ``input_path``); it is accepted so both
    runners share one call shape. ``end_markers``: see ``NumberAndParse``.
    """
    del lines
    env = create_stream_environment(parallelism=parallelism,
                                    checkpoint_interval_ms=checkpoint_interval_ms)
    source = FileSource.for_record_stream_format(
        StreamFormat.text_line_format(), str(input_path.resolve())).build()
    text = env.from_source(source, WatermarkStrategy.no_watermarks(), "reviews").set_parallelism(1)
    parsed = (text.key_by(lambda _: 0, key_type=Types.INT())
              .process(NumberAndParse(limit, only, end_markers), output_type=Types.PICKLED_BYTE_ARRAY())
              .name("number-and-parse").uid("number-and-parse").set_parallelism(1))
    applied = (AgentsExecutionEnvironment.flink(env)
               .from_datastream(parsed, key_selector=lambda r: r["id"]).apply(agent))
    agent_errors = applied.errors_datastream().map(
        lambda e: error_record((e.get("input") or {}).get("line"),
                               f"{e['action']}: {e['error_type']}: {e['message']}", e.get("key")),
        output_type=Types.PICKLED_BYTE_ARRAY())
    everything = applied.to_datastream().map(_tag("out"), output_type=Types.PICKLED_BYTE_ARRAY()).union(
        parsed.get_side_output(PARSE_ERRORS).map(_tag("err"), output_type=Types.PICKLED_BYTE_ARRAY()),
        agent_errors.map(_tag("err"), output_type=Types.PICKLED_BYTE_ARRAY()))
    outputs: list[Any] = []
    errors: list[Any] = []
    with everything.execute_and_collect("review-analysis") as results:
        for kind, value in results:
            (outputs if kind == "out" else errors).append(value)
    return outputs, errors
