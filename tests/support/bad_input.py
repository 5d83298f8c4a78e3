"""The bad-input matrix of the review job: one input holding every kind of bad record.

``file_matrix()`` gives the bytes of one JSON-lines file and what each line must become;
``kafka_matrix()`` the values of Kafka records; ``check_matrix`` checks a job's rows against
it. Shared by ``test_bad_input*.py`` and ``test_job_exit.py``.
"""

from __future__ import annotations

import pathlib
import sys
from dataclasses import dataclass
from typing import Any

import orjson

ROOT = pathlib.Path(__file__).resolve().parents[2]
"""The repository."""
PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv").is_dir() else sys.executable
"""The interpreter a user runs the jobs with."""

BIG_BYTES = 10 * 1024 * 1024  # "a 10 MB line"


@dataclass(frozen=True)
class Case:
    """One record of the matrix.

    Attributes:
        name: the matrix row.
        raw: the record's bytes (files: without the ``\n`` that ends the line; Kafka:
            ``None`` is a tombstone).
        good: whether it must be rated (else: an error row), ``None`` for a skipped blank line.
        problem: a part of the error message for a bad record.
        product: the product id of a good record.
    """

    name: str
    raw: bytes | None
    good: bool | None
    problem: str = ""
    product: str = ""


def _review(pid: str, text: str) -> bytes:
    return b'{"id": "%s", "review": "%s", "ts": 1}' % (pid.encode(), text.encode())


def _big() -> bytes:
    head = b'{"id": "PBIG", "review": "'
    tail = b'", "ts": 1}'
    return head + b"love " * ((BIG_BYTES - len(head) - len(tail)) // 5) + tail


CASES = [
    Case("UTF-8 BOM on the first line", b"\xef\xbb\xbf" + _review("P1", "love it, great fit"),
         True, product="P1"),
    Case("CRLF ending", _review("P2", "broke after a day, bad") + b"\r", True, product="P2"),
    Case("malformed JSON", b'{"id": "P3", "review": ', False, "not JSON"),
    Case("empty line", b"", None),
    Case("whitespace-only line", b"  \t ", None),
    Case("CRLF ending (2)", _review("P1", "comfortable and soft") + b"\r", True, product="P1"),
    Case("a 10 MB line", _big(), False, "over the limit of 1,048,576 bytes"),
    Case("invalid UTF-8", b'{"id": "P4", "review": "caf\xe9 \xff\xfe"}', False,
         "invalid UTF-8 at byte 27"),
    Case("NUL bytes", b'{"id": "P5", "review": "nul\x00\x00here"}', False, "NUL byte at byte 27"),
    Case("missing field", b'{"id": "P6", "text": "no review field"}', False,
         "field 'review' must be a string"),
    Case("field of the wrong type", b'{"id": "P7", "review": 5}', False,
         "field 'review' must be a string"),
    Case("non-object JSON value", b'[1, 2, 3]', False, "expected a JSON object, got list"),
    Case("non-object JSON value (string)", b'"just a string"', False,
         "expected a JSON object, got str"),
    Case("good line after the bad ones", _review("P3", "terrible, returned it"), True,
         product="P3"),
    Case("last line, no newline", _review("P2", "it is a shoe"), True, product="P2"),
]


def file_matrix() -> tuple[bytes, dict[int, Case]]:
    """The file's bytes and the case of each line number (0-based)."""
    lines = {}
    data = b""
    for i, case in enumerate(CASES):
        lines[i] = case
        data += case.raw + (b"" if i == len(CASES) - 1 else b"\n")
    return data, lines


def kafka_matrix() -> list[Case]:
    """Kafka values: the file cases that are records (an empty value is a bad record there),
    and a tombstone (a record without a value)."""
    out = [Case("tombstone (no value)", None, False, "the record has no value")]
    for case in CASES:
        if case.good is None and case.raw == b"":
            out.append(Case("empty value", b"", False, "not JSON"))
        elif case.good is not None:
            raw = case.raw + b"\n" if case.raw.endswith(b"\r") else case.raw  # CRLF in a value
            out.append(Case(case.name, raw, case.good, case.problem, case.product))
    return out


def read_jsonl(path: pathlib.Path) -> list[Any]:
    """The JSON values of the non-blank lines of ``path``."""
    return [orjson.loads(x) for x in path.read_bytes().splitlines() if x.strip()]


def check_matrix(outputs: list[dict[str, Any]], errors: list[dict[str, Any]]) -> dict[str, int]:
    """Every good line rated once, every bad line one error row naming it; returns counts."""
    _, lines = file_matrix()
    good = {n: c for n, c in lines.items() if c.good}
    bad = {n: c for n, c in lines.items() if c.good is False}
    reviews = [o for o in outputs if o["kind"] == "review"]
    assert sorted(r["line"] for r in reviews) == sorted(good)
    assert {r["line"]: r["id"] for r in reviews} == {n: c.product for n, c in good.items()}
    assert sorted(e["line"] for e in errors) == sorted(bad)
    for e in errors:
        case = bad[e["line"]]
        assert e["kind"] == "error"
        assert e["error"].startswith(f"line {e['line']}: "), e["error"]
        assert case.problem in e["error"], (case.name, e["error"])
        assert e["value"] is not None and len(e["value"]) < 300  # an excerpt, not the record
    return {"good": len(good), "bad": len(bad), "outputs": len(reviews), "errors": len(errors)}
