"""Bad input never costs good input: the reading rules, and the review job on the local runner.

The matrix (``tests/support/bad_input.py``): malformed JSON, empty and whitespace-only lines,
a 10 MB line, invalid UTF-8, NUL bytes, a UTF-8 BOM, CRLF endings, a missing field, a field of
the wrong type, non-object JSON values, and good lines between and after them.
"""

from __future__ import annotations

import os
import pathlib
import subprocess

import orjson
import pytest
from support.bad_input import PYTHON, ROOT, check_matrix, file_matrix, kafka_matrix, read_jsonl

from flink_agents_py.io import (
    BadRecordError,
    decode_record,
    excerpt,
    read_json_lines,
    split_lines,
)
from jobs.review_analysis import main, read_records


# -- the reading rules -------------------------------------------------------------------------
def test_lines_split_like_java_readline():
    chunks = [b"a\r\n", b"\n", b"b\rc\n", b"d\r\r\n", b"e"]
    assert list(split_lines(chunks)) == [
        (0, b"a"), (1, b""), (2, b"b"), (3, b"c"), (4, b"d"), (5, b""), (6, b"e")]


def test_decode_record_refuses_what_no_text_record_holds():
    assert decode_record(b"\xef\xbb\xbf{}", strip_bom=True) == "{}"
    assert decode_record(b"\xef\xbb\xbf{}") == "\ufeff{}"  # only where a BOM may be
    with pytest.raises(BadRecordError, match=r"invalid UTF-8 at byte 2 \(0xff"):
        decode_record(b"ab\xffc")
    with pytest.raises(BadRecordError, match="NUL byte at byte 1"):
        decode_record(b"a\x00b")
    with pytest.raises(BadRecordError, match="record of 11 bytes, over the limit of 10 bytes"):
        decode_record(b"x" * 11, max_record_bytes=10)
    assert decode_record(b"x" * 11, max_record_bytes=None) == "x" * 11


def test_excerpt_is_bounded_and_printable():
    assert excerpt(b"caf\xe9") == "caf\\xe9"
    long = excerpt(b"y" * 5000)
    assert long.startswith("y" * 200) and long.endswith("... (5,000 bytes)")


def test_a_parse_function_that_raises_anything_marks_only_its_line(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_bytes(b'{"n": 1}\n{"n": 0}\n{"n": 2}\n')
    results = list(read_json_lines(p, lambda n, text: 10 // orjson.loads(text)["n"]))
    assert [(r.line, r.record) for r in results] == [(0, 10), (1, None), (2, 5)]
    assert results[1].error["error"] == (
        "line 1: ZeroDivisionError: integer division or modulo by zero")
    assert results[1].error["file"] == str(p.resolve())  # each bad line names its file


# -- the job on the local runner ---------------------------------------------------------------
@pytest.fixture
def matrix_file(tmp_path: pathlib.Path) -> pathlib.Path:
    p = tmp_path / "matrix.jsonl"
    p.write_bytes(file_matrix()[0])
    return p


def test_read_records_keeps_every_good_line(matrix_file):
    records, errors = read_records(matrix_file)
    lines = file_matrix()[1]
    assert [r["line"] for r in records] == [n for n, c in lines.items() if c.good]
    assert records[0]["id"] == "P1"  # the BOM is gone from the first line
    assert [e["line"] for e in errors] == [n for n, c in lines.items() if c.good is False]
    # --limit counts non-blank lines, bad ones included
    records, errors = read_records(matrix_file, limit=3)
    assert [r["line"] for r in records] + [e["line"] for e in errors] == [0, 1, 2]


def test_local_runner_matrix(matrix_file, tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    assert main(["--runner", "local", "--model", "scripted", "--no-progress",
                 "--input", str(matrix_file), "--output", str(out)]) == 0
    counts = check_matrix(read_jsonl(out), read_jsonl(out.with_suffix(".errors.jsonl")))
    assert counts == {"good": 5, "bad": 8, "outputs": 5, "errors": 8}
    assert "5 review results, 3 products, 8 errors" in capsys.readouterr().err


def test_max_record_bytes_option(matrix_file, tmp_path):
    out = tmp_path / "out.jsonl"
    assert main(["--runner", "local", "--model", "scripted", "--no-progress",
                 "--max-record-bytes", str(16 * 1024 * 1024),
                 "--input", str(matrix_file), "--output", str(out)]) == 0
    big = next(n for n, c in file_matrix()[1].items() if c.name == "a 10 MB line")
    assert big in {r["line"] for r in read_jsonl(out) if r["kind"] == "review"}


def test_user_runs_the_job_on_a_bad_file_from_another_directory(tmp_path):
    """As a user would: `python -m jobs.review_analysis` from a directory outside the repo."""
    (tmp_path / "reviews.jsonl").write_bytes(file_matrix()[0])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [PYTHON, "-m", "jobs.review_analysis", "--runner", "local", "--model", "scripted",
         "--no-progress", "--input", "reviews.jsonl", "--output", "out/results.jsonl"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    out = tmp_path / "out" / "results.jsonl"
    check_matrix(read_jsonl(out), read_jsonl(tmp_path / "out" / "results.errors.jsonl"))


# -- Kafka values, without a broker ------------------------------------------------------------
def test_kafka_values_are_decoded_strictly():
    pytest.importorskip("pyflink")
    from flink_agents_py.flink._kafka import _Parse
    from jobs.review_analysis.runners.kafka import parse_review_message

    tag = object()
    parse = _Parse(parse_review_message, tag)
    good, bad = [], []
    for offset, case in enumerate(kafka_matrix()):
        for item in parse(("reviews", 0, offset, 0, None, case.raw)):
            if isinstance(item, tuple) and item[0] is tag:
                bad.append((case, item[1]))
            else:
                good.append((case, item))
    assert all(c.good for c, _ in good) and all(not c.good for c, _ in bad)
    assert [r["id"] for _, r in good] == [c.product for c in kafka_matrix() if c.good]
    for case, row in bad:
        assert case.problem in row["error"], (case.name, row["error"])
        assert (row["topic"], row["partition"]) == ("reviews", 0)
    assert len(good) == 5 and len(bad) == 10


def test_the_reading_rules_need_no_pyflink(tmp_path):
    (tmp_path / "x.jsonl").write_bytes(b'\xef\xbb\xbf{"a": 1}\r\n\xff\n')
    code = ("import sys; sys.modules['pyflink'] = None\n"
            "from flink_agents_py.io import read_json_lines\n"
            f"print([(r.line, r.record, bool(r.error))"
            f" for r in read_json_lines({str(tmp_path / 'x.jsonl')!r})])")
    proc = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[(0, {'a': 1}, False), (1, None, True)]"
