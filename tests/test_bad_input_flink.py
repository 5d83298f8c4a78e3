"""Bad input never costs good input on the Flink runner: one MiniCluster job over the matrix.

The job runs as a user runs it (``python -m jobs.review_analysis`` from a directory outside
the repository); its rows must equal the local runner's, row for row.
"""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest

pytestmark = pytest.mark.flink

pytest.importorskip("pyflink")

from support.bad_input import PYTHON, ROOT, check_matrix, file_matrix, read_jsonl  # noqa: E402

from jobs.review_analysis import main  # noqa: E402

CLEAN_ENV = dict(os.environ)  # before any in-process Flink job of this session


@pytest.fixture(scope="module")
def flink_run(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("bad-flink")
    (d / "reviews.jsonl").write_bytes(file_matrix()[0])
    proc = subprocess.run(
        [PYTHON, "-m", "jobs.review_analysis", "--runner", "flink", "--model", "scripted",
         "--no-progress", "--input", "reviews.jsonl", "--output", "out/flink.jsonl",
         "--event-log", "out/events.jsonl"],
        cwd=d, env={**CLEAN_ENV, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"dir": d, "stderr": proc.stderr}


@pytest.mark.timeout(600)
def test_flink_runner_matrix(flink_run):
    out = flink_run["dir"] / "out" / "flink.jsonl"
    counts = check_matrix(read_jsonl(out), read_jsonl(out.with_suffix(".errors.jsonl")))
    print(f"\n[bad input] flink runner: {counts}", file=sys.stderr)
    assert counts == {"good": 5, "bad": 8, "outputs": 5, "errors": 8}
    assert "5 review results, 3 products, 8 errors" in flink_run["stderr"]


def test_flink_event_log_option(flink_run):
    """``--event-log PATH`` on Flink: one file per subtask (``events-0.jsonl``)."""
    log = flink_run["dir"] / "out" / "events-0.jsonl"
    records = [orjson.loads(x) for x in log.read_bytes().splitlines()]
    completed = [r for r in records if r["kind"] == "run_completed"]
    assert len(completed) >= 5  # a run per good review (and the end-of-input markers)
    assert records[0]["kind"] == "log_opened" and records[0]["host"] == "flink"


@pytest.mark.timeout(600)
def test_flink_rows_equal_the_local_runners(flink_run, tmp_path):
    local = tmp_path / "local.jsonl"
    assert main(["--runner", "local", "--model", "scripted", "--no-progress",
                 "--input", str(flink_run["dir"] / "reviews.jsonl"), "--output", str(local)]) == 0
    flink = flink_run["dir"] / "out" / "flink.jsonl"
    assert flink.read_bytes() == local.read_bytes()
    assert (flink.with_suffix(".errors.jsonl").read_bytes()
            == local.with_suffix(".errors.jsonl").read_bytes())
