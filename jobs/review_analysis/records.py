"""Input records and error rows: parsing a review line, reading a file, the error shapes.

An input line is a JSON object ``{"id": product, "review": text, "ts": epoch_s}``; the job's
record adds its 0-based ``line`` (Kafka: the offset, with its ``partition``). Files are read as
bytes (``flink_agents_py.io.read_json_lines``): a line that is not UTF-8, holds a NUL byte, is
over ``max_record_bytes`` or is not a review becomes an error row naming its line and what is
wrong; blank lines are skipped; a UTF-8 byte order mark on the first line and CRLF endings are
accepted. See docs/how-to/input-errors.md.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterable
from typing import Any

import orjson

from flink_agents_py.io import MAX_RECORD_BYTES, is_blank, read_json_lines, split_lines

__all__ = ["DATA_DIR", "DEFAULT_INPUT", "LineFilter", "agent_error", "count_records",
           "error_record", "input_error", "parse_line", "read_records", "write_jsonl"]

DATA_DIR = pathlib.Path(__file__).resolve().parents[1] / "data"
"""The shipped data, next to the package (``jobs/data``)."""
DEFAULT_INPUT = DATA_DIR / "product_reviews.jsonl"
"""The shipped reviews (see ``jobs/data/NOTICE``)."""


def parse_line(line_no: int, text: str) -> dict[str, Any]:
    """Parse one input line into ``{"line", "id", "review", "ts"}``.

    Args:
        line_no: the line's 0-based number (blank lines counted).
        text: the line, decoded.

    Returns:
        The record.

    Raises:
        ValueError: naming the line number and what is wrong with it.
    """
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise ValueError(f"line {line_no}: not JSON ({e})") from e
    if not isinstance(data, dict):
        raise ValueError(f"line {line_no}: expected a JSON object, got {type(data).__name__}")
    pid, review = data.get("id"), data.get("review")
    if not isinstance(pid, str) or not pid:
        raise ValueError(f"line {line_no}: field 'id' must be a non-empty string")
    if not isinstance(review, str):
        raise ValueError(f"line {line_no}: field 'review' must be a string")
    return {"line": line_no, "id": pid, "review": review, "ts": data.get("ts")}


class LineFilter:
    """Which non-blank lines the job reads: only ``only`` (if given), at most ``limit``.

    Called once per non-blank line, in order (``read_json_lines``' ``keep``); bad lines count
    toward the limit like good ones. The Flink runner keeps the same count in keyed state
    (``runners.flink.NumberAndParse``).

    Args:
        limit: keep at most this many lines (``None``: all).
        only: keep only these line numbers (``None``: all).
    """

    def __init__(self, limit: int | None = None, only: set[int] | None = None) -> None:
        self.limit = limit
        self.only = only
        self.kept = 0

    def __call__(self, line_no: int) -> bool:
        """Whether to read line ``line_no``."""
        if self.only is not None and line_no not in self.only:
            return False
        if self.limit is not None and self.kept >= self.limit:
            return False
        self.kept += 1
        return True


def read_records(path: pathlib.Path, limit: int | None = None, only: set[int] | None = None,
                 max_record_bytes: int | None = MAX_RECORD_BYTES,
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Read the reviews of ``path`` (see the module docstring).

    Args:
        path: a JSON-lines file.
        limit: read at most this many non-blank lines.
        only: read only these line numbers.
        max_record_bytes: longer lines are error rows (``None``: no limit).

    Returns:
        ``(records, errors)``, both in line order.

    Raises:
        OSError: when the file cannot be read.
    """
    records, errors = [], []
    for r in read_json_lines(path, parse_line, max_record_bytes=max_record_bytes,
                             keep=LineFilter(limit, only)):
        if r.error is not None:
            errors.append(input_error(r.error))
        else:
            records.append(r.record)
    return records, errors


def count_records(path: pathlib.Path, limit: int | None = None,
                  only: set[int] | None = None) -> int:
    """How many input records ``path`` holds.

    Returns:
        The number of non-blank lines that ``limit`` and ``only`` keep.

    Raises:
        OSError: when the file cannot be read.
    """
    keep = LineFilter(limit, only)
    with path.open("rb") as f:
        return sum(1 for n, raw in split_lines(f) if not is_blank(raw, n == 0) and keep(n))


def error_record(line_no: int | None, message: str, key: Any = None) -> dict[str, Any]:
    """The error output's shape for a record that could not be analysed."""
    return {"kind": "error", "line": line_no, "id": key, "error": message}


def input_error(row: dict[str, Any]) -> dict[str, Any]:
    """A bad-line row of ``flink_agents_py.io`` in the job's error shape (with ``value``)."""
    return {**error_record(row["line"], row["error"]), "value": row.get("value")}


def agent_error(record: Any, action: str, error_type: str, message: str,
                key: Any) -> dict[str, Any]:
    """The error row of a record whose action failed (e.g. its rating chat).

    Args:
        record: the record the action ran on (its ``line``, and for Kafka its ``partition``,
            name it in the row).
        action: the failed action's name.
        error_type: the exception's type name.
        message: the exception's message.
        key: the agent key (the product).

    Returns:
        ``{"kind": "error", "line", "id", "error"}``, with ``partition`` and ``offset`` for a
        Kafka record.
    """
    record = record if isinstance(record, dict) else {}
    row = error_record(record.get("line"), f"{action}: {error_type}: {message}", key)
    if "partition" in record:
        row.update(partition=record["partition"], offset=record.get("line"))
    return row


def write_jsonl(path: pathlib.Path, rows: Iterable[Any]) -> int:
    """Write ``rows`` to ``path`` as JSON lines (creating its directory).

    Returns:
        How many rows were written.

    Raises:
        OSError: when the file cannot be written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("wb") as f:
        for row in rows:
            f.write(orjson.dumps(row) + b"\n")
            n += 1
    return n
