"""A job whose records all fail does not report success: exit status and --max-error-rate."""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess

import orjson
import pytest
from support.bad_input import PYTHON, ROOT, file_matrix

from jobs.review_analysis import DEFAULT_INPUT, main
from jobs.review_analysis.outcome import judge, parse_error_rate

CLEAN_ENV = dict(os.environ)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nothing listens


def run_cli(cwd: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**CLEAN_ENV, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-test-not-used"}
    return subprocess.run([PYTHON, "-m", "jobs.review_analysis", "--no-progress", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def unreachable_model_run(tmp_path: pathlib.Path, runner: str) -> subprocess.CompletedProcess[str]:
    lines = DEFAULT_INPUT.read_bytes().splitlines(keepends=True)[:3]
    (tmp_path / "reviews.jsonl").write_bytes(b"".join(lines))
    return run_cli(tmp_path, "--runner", runner, "--model", "openai",
                   "--base-url", f"http://127.0.0.1:{closed_port()}/v1",
                   "--input", "reviews.jsonl", "--output", "out/results.jsonl")


def test_unreachable_model_fails_the_job_and_says_why(tmp_path):
    pytest.importorskip("openai")
    proc = unreachable_model_run(tmp_path, "local")
    assert proc.returncode == 1, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("FAILED: all 3 records failed; first error: line 0: ask_rating: "), last
    assert "Connection error" in last
    assert "0 review results, 0 products, 3 errors" in proc.stderr
    errors = (tmp_path / "out" / "results.errors.jsonl").read_bytes().splitlines()
    assert len(errors) == 3  # the error rows are still written


@pytest.mark.flink
@pytest.mark.timeout(600)
def test_unreachable_model_fails_the_flink_job(tmp_path):
    pytest.importorskip("openai")
    pytest.importorskip("pyflink")
    proc = unreachable_model_run(tmp_path, "flink")
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "FAILED: all 3 records failed; first error: line 0: " in proc.stderr


@pytest.fixture
def matrix_file(tmp_path: pathlib.Path) -> pathlib.Path:
    p = tmp_path / "matrix.jsonl"
    p.write_bytes(file_matrix()[0])  # 13 records: 5 good, 8 bad (61.5% failed)
    return p


@pytest.mark.parametrize("rate, status", [(None, 0), ("0.7", 0), ("0.6", 1), ("50%", 1)])
def test_max_error_rate(matrix_file, tmp_path, capsys, rate, status):
    args = ["--runner", "local", "--model", "scripted", "--no-progress",
            "--input", str(matrix_file), "--output", str(tmp_path / "o.jsonl")]
    assert main(args + (["--max-error-rate", rate] if rate else [])) == status
    err = capsys.readouterr().err
    if status:
        assert "FAILED: 8 of 13 records failed (61.5%, over --max-error-rate" in err
        assert "first error: line 2: not JSON" in err
    else:
        assert "FAILED" not in err


def test_good_input_exits_zero(tmp_path):
    lines = DEFAULT_INPUT.read_bytes().splitlines(keepends=True)[:20]
    (tmp_path / "r.jsonl").write_bytes(b"".join(lines))
    assert main(["--runner", "local", "--model", "scripted", "--no-progress", "--max-error-rate",
                 "0", "--input", str(tmp_path / "r.jsonl"),
                 "--output", str(tmp_path / "o.jsonl")]) == 0


def test_judge_counts_records_not_error_rows():
    outputs = [{"kind": "review", "line": 1}, {"kind": "product_advice", "line": 1}]
    errors = [
        {"line": 1, "error": "advise: ValueError: no advice"},  # line 1 still has its review
        {"line": 2, "error": "line 2: not JSON"},
        {"line": 2, "error": "again"},                          # one record, two rows
    ]
    v = judge(outputs, errors)
    assert (v.records, v.failed, v.ok) == (2, 1, True)
    v = judge(outputs, errors, max_error_rate=0.4)
    assert not v.ok and v.reason.startswith("1 of 2 records failed (50.0%")
    v = judge([], [{"line": 0, "partition": 3, "error": "boom"}])
    assert v.reason == "all 1 records failed; first error: partition 3 offset 0: boom"
    assert judge([], []).ok  # no input, nothing failed


def test_parse_error_rate():
    assert parse_error_rate("0.05") == 0.05 and parse_error_rate("5%") == 0.05
    for bad in ("1.5", "-1", "x"):
        with pytest.raises(ValueError):
            parse_error_rate(bad)


def test_bad_max_error_rate_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["--max-error-rate", "2", "--output", str(tmp_path / "o.jsonl")])
    assert e.value.code == 2
    assert "--max-error-rate" in capsys.readouterr().err


def test_event_log_option_writes_the_event_log(tmp_path):
    lines = DEFAULT_INPUT.read_bytes().splitlines(keepends=True)[:2]
    (tmp_path / "r.jsonl").write_bytes(b"".join(lines))
    log = tmp_path / "logs" / "events.jsonl"  # its folder is created
    assert main(["--runner", "local", "--model", "scripted", "--no-progress",
                 "--event-log", str(log), "--input", str(tmp_path / "r.jsonl"),
                 "--output", str(tmp_path / "o.jsonl")]) == 0
    records = [orjson.loads(x) for x in log.read_bytes().splitlines()]
    kinds = {r["kind"] for r in records}
    assert {"log_opened", "run_started", "run_completed", "output"} <= kinds
    assert sum(1 for r in records if r["kind"] == "run_completed") >= 2  # one per review
