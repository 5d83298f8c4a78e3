r"""Reading records from bytes so that a bad record never costs the good ones.

Every input path of the project (a file on the local runner, a file on Flink, a Kafka topic)
hands its raw bytes to the same few functions here, so a record is judged the same way
wherever it is read:

1. ``split_lines``: a file's bytes are cut into lines at ``\n``, ``\r\n`` or a lone ``\r``
   (the terminators of Java's ``BufferedReader.readLine``, which Flink's text line format uses,
   so both runners number lines alike). Line numbers are 0-based and count blank lines.
2. ``decode_record``: the bytes of one record become text: a UTF-8 byte order mark is removed
   (on the first line of a file, on every Kafka value), then a record over ``max_record_bytes``,
   a record holding a NUL byte, or bytes that are not UTF-8 are refused with a
   ``BadRecordError`` saying what is wrong and at which byte.
3. ``parse_record``: the text is parsed (by default as one JSON value; jobs pass their own
   ``parse``); any exception it raises makes the record bad, not the job.

A bad record becomes an error row ``{"kind": "error", "line": N, "error": "line N: ...",
"value": excerpt, "file": <file>}`` (Kafka rows name ``topic``, ``partition`` and
``offset`` instead; a line of a folder Flink watches has no ``file``). No
pyflink here: ``flink_agents_py.flink`` wraps these functions in its file and Kafka sources.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import orjson

from ..api import SerializationError
from ..api.internal import cut_masked, error_text
from ..runtime.internal import loads_record

__all__ = [
    "MAX_RECORD_BYTES",
    "UTF8_BOM",
    "BadRecordError",
    "LineResult",
    "decode_record",
    "excerpt",
    "is_blank",
    "json_line",
    "parse_line_bytes",
    "read_json_lines",
    "split_lines",
]

MAX_RECORD_BYTES = 1 << 20
"""Default largest record, in bytes (1 MiB, Kafka's default largest message). Larger records
are refused before they are decoded: a model cannot take them, and parsing them costs memory."""

UTF8_BOM = b"\xef\xbb\xbf"
EXCERPT_CHARS = 200
_BLANK = b" \t\n\r\x0b\x0c"


class BadRecordError(ValueError):
    """A record that cannot be read; the message says what is wrong (callers add where)."""


class LineResult(NamedTuple):
    """One non-blank line of input, read.

    Attributes:
        line: the 0-based line number.
        record: what ``parse`` returned, or ``None`` when the line is bad.
        error: the error row when the line is bad (``{"kind": "error", "line", "error",
            "value", "file"}``), else ``None``.
    """

    line: int
    record: Any
    error: dict[str, Any] | None


def split_lines(chunks: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    r"""Cut ``\n``-terminated chunks (a binary file's iteration) into numbered lines.

    A line ends at ``\n``, ``\r\n`` or a lone ``\r``, as in Java's ``readLine``; the
    terminator is removed. A final line without a terminator is kept.

    Args:
        chunks: byte strings each ending at a ``\n`` (the last one may not), e.g. an open
            binary file.

    Yields:
        ``(line_no, raw)``, 0-based.
    """
    line_no = 0
    for chunk in chunks:
        body = chunk[:-1] if chunk.endswith(b"\n") else chunk
        if body.endswith(b"\r"):
            body = body[:-1]
        for piece in body.split(b"\r") if b"\r" in body else (body,):
            yield line_no, piece
            line_no += 1


def is_blank(raw: bytes, first: bool = False) -> bool:
    """Whether ``raw`` holds only whitespace (and, on a first line, a byte order mark)."""
    if first and raw.startswith(UTF8_BOM):
        raw = raw[len(UTF8_BOM):]
    return not raw.strip(_BLANK)


def decode_record(raw: bytes, *, strip_bom: bool = False,
                  max_record_bytes: int | None = MAX_RECORD_BYTES) -> str:
    """Decode one record's bytes as UTF-8 text, refusing what no text record holds.

    Args:
        raw: the record's bytes (without line terminator).
        strip_bom: remove a leading UTF-8 byte order mark (first line of a file, Kafka values).
        max_record_bytes: refuse records longer than this (``None``: no limit).

    Returns:
        The text.

    Raises:
        BadRecordError: when the record is over the limit, holds a NUL byte, or is not UTF-8
            (the message names the byte offset and the bad bytes).
    """
    if strip_bom and raw.startswith(UTF8_BOM):
        raw = raw[len(UTF8_BOM):]
    if max_record_bytes is not None and len(raw) > max_record_bytes:
        raise BadRecordError(f"record of {len(raw):,} bytes, over the limit of "
                             f"{max_record_bytes:,} bytes")
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise BadRecordError(f"NUL byte at byte {nul} (binary data, not text)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadRecordError(f"invalid UTF-8 at byte {e.start} "
                             f"(0x{raw[e.start:e.end].hex()}: {e.reason})") from None


def excerpt(raw: bytes | str | None, limit: int = EXCERPT_CHARS) -> str | None:
    r"""A bounded, printable excerpt of a record for error rows (bad bytes as ``\xNN``)."""
    if raw is None:
        return None
    text = raw.decode("utf-8", "backslashreplace") if isinstance(raw, bytes) else raw
    text = text.replace("\x00", "\\x00")
    if len(text) <= limit:
        return text
    size = len(raw.encode() if isinstance(raw, str) else raw)
    return f"{cut_masked(text, limit)}... ({size:,} bytes)"


def json_line(line_no: int, text: str) -> Any:
    """The default ``parse``: the line as one JSON value.

    Args:
        line_no: the line's number (1-based), for the error.
        text: the line.

    Returns:
        The JSON value.

    Raises:
        BadRecordError: when the text is not JSON.
    """
    try:
        return loads_record(text)
    except orjson.JSONDecodeError as e:
        raise BadRecordError(f"not JSON ({e})") from None
    except SerializationError as e:  # an integer JSON readers would turn into a float
        raise BadRecordError(str(e)) from None


def _problem(e: BaseException) -> str:
    text = error_text(e) or type(e).__name__
    return text if isinstance(e, ValueError) else f"{type(e).__name__}: {text}"


def parse_line_bytes(line_no: int, raw: bytes,
                     parse: Callable[[int, str], Any] = json_line, *,
                     max_record_bytes: int | None = MAX_RECORD_BYTES,
                     file: str | None = None) -> LineResult:
    """Decode and parse one line; a bad line gives an error row instead of an exception.

    Args:
        line_no: the 0-based line number (line 0 may start with a byte order mark).
        raw: the line's bytes, without terminator.
        parse: ``parse(line_no, text)`` -> record. Any exception it raises marks the line bad
            (a ``ValueError``'s message is kept, other types are named); messages that do
            not start with ``"line N: "`` get that prefix.
        max_record_bytes: see ``decode_record``.
        file: the file the line is of: the error row names it (``"file"``; its ``error``
            text stays the same wherever the file is); ``None``: not known (a folder
            watched on Flink).

    Returns:
        A ``LineResult``.
    """
    prefix = f"line {line_no}: "
    try:
        text = decode_record(raw, strip_bom=line_no == 0, max_record_bytes=max_record_bytes)
        return LineResult(line_no, parse(line_no, text), None)
    except Exception as e:  # noqa: BLE001 - a bad record is reported, never fatal
        message = _problem(e)
        if not message.startswith(prefix):
            message = prefix + message
        row = {"kind": "error", "line": line_no, "error": message, "value": excerpt(raw)}
        if file is not None:
            row["file"] = file
        return LineResult(line_no, None, row)


def read_json_lines(path: str | os.PathLike[str],
                    parse: Callable[[int, str], Any] = json_line, *,
                    max_record_bytes: int | None = MAX_RECORD_BYTES,
                    keep: Callable[[int], bool] | None = None) -> Iterator[LineResult]:
    """Read a JSON-lines (or any line-oriented) file; bad lines become error rows.

    Blank lines are skipped (they hold no record). The file is read as bytes, so invalid
    UTF-8, NUL bytes or an oversized line spoil only their own line.

    Args:
        path: the file.
        parse: ``parse(line_no, text)`` -> record (default: the line as JSON).
        max_record_bytes: see ``decode_record``.
        keep: ``keep(line_no)`` -> whether to read a non-blank line at all (called in order,
            once per non-blank line; e.g. a limit); default: every line.

    Yields:
        ``LineResult`` per non-blank line kept.

    Raises:
        OSError: when the file cannot be opened or read.
    """
    name = os.path.realpath(path)  # named in each error row (the same however it is written)
    with open(path, "rb") as f:
        for line_no, raw in split_lines(f):
            if is_blank(raw, first=line_no == 0) or (keep is not None and not keep(line_no)):
                continue
            yield parse_line_bytes(line_no, raw, parse, max_record_bytes=max_record_bytes,
                                   file=name)
