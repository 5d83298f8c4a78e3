r"""Line-oriented files on Flink, read so that a bad line never costs the good ones.

``read_lines_file`` builds a FLIP-27 ``FileSource`` over one file and a ``NumberedLines``
operator that numbers, decodes and parses each line with the rules of
``flink_agents_py.io`` (the local runner's rules): a line that is not UTF-8, holds a NUL byte,
is over ``max_record_bytes`` or does not parse leaves through the error side output with its
line number, and the job goes on.

How the bytes survive: Flink's text line format decodes with a Java charset, and its UTF-8
decoder silently turns invalid bytes into U+FFFD. The source therefore reads ISO-8859-1, which
maps each byte to one character, and ``NumberedLines`` turns the text back into the exact
bytes (``text.encode("latin-1")``) before decoding them strictly as UTF-8. Line terminators
(``\n``, ``\r\n``, lone ``\r``) are bytes below 0x80, never inside a UTF-8 sequence, so lines
split exactly as ``flink_agents_py.io.split_lines`` splits them.

Line numbers: the source reads one file as one split, in order, but does not number lines, so
a single-key ``KeyedProcessFunction`` counts them in keyed state, checkpointed with the
source's position (numbering survives a restore).

Where a record was read: ``NumberedLines`` hands each record on as a ``Positioned`` (``line N``);
the ``records`` stream ``read_lines_file`` returns takes that off (a map, so the program sees its
records), and ``from_datastream(records)`` keys the positioned stream instead (that map is then
left out of the job unless something else reads it). So an error row of a line's record that
the agent does not run (its key selector raised, no JSON form, a failed action) names its line,
as the local runner's rows of ``from_list(read_json_lines(path))`` do; before, they said
``record`` and the line was lost.
"""

from __future__ import annotations

import math
import os
import pathlib
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from pyflink.common import Duration, Types, WatermarkStrategy
from pyflink.datastream import KeyedProcessFunction, OutputTag
from pyflink.datastream.connectors.file_system import FileSource, StreamFormat
from pyflink.datastream.state import ValueStateDescriptor

from ..io import MAX_RECORD_BYTES, is_blank, json_line, parse_line_bytes
from ._fresh import fresh_reduce, shipped
from ._keyed_input import Positioned, without_positions
from ._unread_errors import note_input_errors

__all__ = ["LINE_ERRORS", "FileInput", "NumberedLines", "read_lines_file"]

LINE_ERRORS = OutputTag("line-errors", Types.PICKLED_BYTE_ARRAY())
"""The side output of ``NumberedLines``: error rows of bad lines."""

_BYTE_PRESERVING_CHARSET = "ISO-8859-1"


class FileInput(NamedTuple):
    """What ``read_lines_file`` returns.

    Attributes:
        records: the parsed records (a ``DataStream`` of Python values).
        errors: error rows of bad lines ``{"kind": "error", "line", "error", "value",
            "file"}`` (value: an excerpt of at most 200 characters; ``file`` the file's real
            path; not there for a watched folder).
    """

    records: Any
    errors: Any


class NumberedLines(KeyedProcessFunction):
    """Numbers lines (0-based, blank lines counted), decodes and parses them.

    Blank lines are skipped. Subclasses may override ``keep`` (which non-blank lines to read)
    and ``emit`` (what a parsed record becomes); both run on the operator's single key, so
    they may use keyed state and timers (call ``super().open`` first).

    Args:
        parse: ``parse(line_no, text)`` -> record; any exception marks the line bad.
        max_record_bytes: longest line accepted, in bytes (``None``: no limit).
    """

    def __init__(self, parse: Callable[[int, str], Any] = json_line, *,
                 max_record_bytes: int | None = MAX_RECORD_BYTES) -> None:
        self.parse = parse
        self.max_record_bytes = max_record_bytes
        self.file: str | None = None  # the file read, named in error rows (``read_lines_file``)

    __reduce__ = fresh_reduce  # a worker imports this job's modules, not a finished job's

    def open(self, runtime_context: Any) -> None:
        """Open the line counter (keyed state)."""
        self._next = runtime_context.get_state(ValueStateDescriptor("next-line", Types.LONG()))

    def process_element(self, text: str, ctx: Any) -> Iterator[Any]:
        """Number, decode and parse one line; yields the record or an error row (side output)."""
        line_no = self._next.value() or 0
        self._next.update(line_no + 1)
        raw = text.encode("latin-1")
        if is_blank(raw, first=line_no == 0) or not self.keep(line_no):
            return
        result = parse_line_bytes(line_no, raw, self.parse,
                                  max_record_bytes=self.max_record_bytes,
                                  file=getattr(self, "file", None))
        if result.error is not None:
            yield LINE_ERRORS, result.error
            return
        where = f"line {line_no}"  # each record with its line, for the agent's error rows
        for item in self.emit(line_no, result.record, ctx):
            if type(item) is tuple and len(item) == 2 and isinstance(item[0], OutputTag):
                yield item  # a side output of a subclass's ``emit``
            else:
                yield Positioned(where, item)

    def keep(self, line_no: int) -> bool:
        """Whether to read non-blank line ``line_no`` (default: all); called once per line."""
        return True

    def emit(self, line_no: int, record: Any, ctx: Any) -> Iterator[Any]:
        """What a parsed record becomes downstream (default: itself)."""
        yield record


def _one_key(_line: str) -> int:
    """The file reader's single key (the line counter is keyed state)."""
    return 0


def read_lines_file(env: Any, path: str | os.PathLike[str], *,
                    parse: Callable[[int, str], Any] = json_line,
                    max_record_bytes: int | None = MAX_RECORD_BYTES,
                    operator: NumberedLines | None = None,
                    name: str = "lines",
                    monitor_interval_s: float | None = None) -> FileInput:
    """Read a line-oriented file (JSON lines by default) into records and error rows.

    Args:
        env: the ``StreamExecutionEnvironment``.
        path: the file; with ``monitor_interval_s``, a file or a folder.
        parse: ``parse(line_no, text)`` -> record (default: the line as JSON).
        max_record_bytes: longest line accepted, in bytes.
        operator: a ``NumberedLines`` (subclass) to use instead of
            ``NumberedLines(parse, max_record_bytes=...)``.
        name: the source's name; the numbering operator's name and uid are
            ``<name>-number-and-parse``.
        monitor_interval_s: when given (seconds, > 0), the input never ends: the path is
            looked at again at this interval and each new file in it is read once (a job
            that can be stopped with a savepoint and upgraded); the source's uid is then
            ``<name>-source``. Line numbers count on across the files, in the order read.

    Returns:
        ``FileInput(records, errors)``.

    Raises:
        ValueError: ``monitor_interval_s`` is not a positive number of seconds.
    """
    if monitor_interval_s is not None and (
            isinstance(monitor_interval_s, bool) or not isinstance(monitor_interval_s, (int, float))
            or not 0 < monitor_interval_s < math.inf):
        raise ValueError(f"read_lines_file({name=!r}): monitor_interval_s must be a positive "
                         f"number of seconds, not {monitor_interval_s!r}")
    builder = FileSource.for_record_stream_format(
        StreamFormat.text_line_format(_BYTE_PRESERVING_CHARSET), str(pathlib.Path(path).resolve()))
    if monitor_interval_s is not None:
        builder.monitor_continuously(Duration.of_millis(max(1, round(monitor_interval_s * 1000))))
    text = env.from_source(builder.build(), WatermarkStrategy.no_watermarks(), name)
    if monitor_interval_s is not None:  # (a bounded one keeps the id its savepoints have)
        text = text.uid(f"{name}-source")
    text = text.set_parallelism(1)
    op = operator or NumberedLines(parse, max_record_bytes=max_record_bytes)
    if monitor_interval_s is None:  # one file (a watched folder's lines name none)
        op.file = os.path.realpath(path)  # as ``read_json_lines`` names it
    label = f"{name}-number-and-parse"
    positioned = (text.key_by(shipped(_one_key), key_type=Types.INT())
                  .process(op, output_type=Types.PICKLED_BYTE_ARRAY())
                  .name(label).uid(label).set_parallelism(1))
    errors = positioned.get_side_output(LINE_ERRORS)
    note_input_errors(env, errors)  # read back and logged when the program never takes it
    # the records without their lines; ``from_datastream(records)`` keys ``positioned`` instead
    return FileInput(without_positions(positioned, f"{name}-records"), errors)
