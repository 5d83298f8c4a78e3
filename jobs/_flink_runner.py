"""The review-analysis job on Flink: FileSource -> numbered, parsed lines -> agent operator.

Line numbers: a FLIP-27 ``FileSource`` reads lines in order (one file is one split) but does
not number them, so a single-key ``KeyedProcessFunction`` counts them in keyed state; the
count is checkpointed together with the source's offset, so numbering survives a restore.
Malformed lines leave through a side output with their number.
"""

from __future__ import annotations

import pathlib
from typing import Any

from pyflink.common import Types, WatermarkStrategy
from pyflink.datastream import KeyedProcessFunction, OutputTag
from pyflink.datastream.connectors.file_system import FileSource, StreamFormat
from pyflink.datastream.state import ValueStateDescriptor

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent
from flink_agents_py.flink import create_stream_environment

from .review_analysis import error_record, parse_line

__all__ = ["run_flink", "NumberAndParse", "PARSE_ERRORS"]

PARSE_ERRORS = OutputTag("parse-errors", Types.PICKLED_BYTE_ARRAY())


class NumberAndParse(KeyedProcessFunction):
    """Numbers lines (0-based) and parses them; keeps only ``only`` lines / the first ``limit``.

    Args:
        limit: keep at most this many non-blank lines (``None``: all).
        only: keep only these line numbers (``None``: all).
    """

    def __init__(self, limit: int | None = None, only: set[int] | None = None) -> None:
        self.limit = limit
        self.only = only

    def open(self, runtime_context: Any) -> None:
        self._next = runtime_context.get_state(ValueStateDescriptor("next-line", Types.LONG()))
        self._kept = runtime_context.get_state(ValueStateDescriptor("kept-lines", Types.LONG()))

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
            yield parse_line(line_no, text)
        except ValueError as e:
            yield PARSE_ERRORS, error_record(line_no, str(e))


def _tag(kind: str) -> Any:
    return lambda v: (kind, v)


def run_flink(input_path: pathlib.Path, lines: list[tuple[int, str]], agent: Agent, *,
              parallelism: int = 1, limit: int | None = None, only: set[int] | None = None,
              checkpoint_interval_ms: int | None = 10_000) -> tuple[list[Any], list[Any]]:
    """Run the job on a local MiniCluster; returns ``(outputs, errors)``.

    ``lines`` is unused here (the FileSource reads ``input_path``); it is accepted so both
    runners share one call shape.
    """
    del lines
    env = create_stream_environment(parallelism=parallelism,
                                    checkpoint_interval_ms=checkpoint_interval_ms)
    source = FileSource.for_record_stream_format(
        StreamFormat.text_line_format(), str(input_path.resolve())).build()
    text = env.from_source(source, WatermarkStrategy.no_watermarks(), "reviews").set_parallelism(1)
    parsed = (text.key_by(lambda _: 0, key_type=Types.INT())
              .process(NumberAndParse(limit, only), output_type=Types.PICKLED_BYTE_ARRAY())
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
