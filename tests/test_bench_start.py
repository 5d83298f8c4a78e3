"""The start-up row of the benchmarks: ``python -m bench --quick --only start``.

Two one-record Flink jobs (ours and a bare PyFlink job), each in a process of its own.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("pyflink")

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.flink
@pytest.mark.timeout(900)
def test_start_row_compares_one_record_jobs_with_target(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", "start", "--out", str(out),
         "--latest-md", ""],
        cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=850)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Start-up: a one-record Flink job" in proc.stdout
    assert "<= 1.1x" in proc.stdout  # the target is printed with the row
    data = json.loads(out.read_text())
    assert set(data) == {"meta", "start"}
    bare, ours = data["start"]["rows"]
    assert (bare["kind"], ours["kind"]) == ("bare", "agent")
    for row in (bare, ours):
        assert row["runs"] == 1 and row["failed"] == 0, data["start"]["runs"]
        # the phases happen in order, inside the process's wall time
        phases = [row[k] for k in ("imported_s", "env_s", "graph_s", "first_out_s",
                                   "job_end_s", "wall_s")]
        assert all(p > 0 for p in phases), row
        assert phases == sorted(phases), row
    # each job collected exactly its one record (checked by the benchmark: a wrong output
    # is a failed run)
    for kind in ("bare", "agent"):
        [run] = data["start"]["runs"][kind]
        assert run["outputs"] == [0], run
    # the bare job is PyFlink alone: it never imported flink_agents_py
    assert data["start"]["runs"]["bare"][0]["imported_ours"] is False
    assert data["start"]["runs"]["agent"][0]["imported_ours"] is True
    assert data["start"]["ratio"] == pytest.approx(ours["wall_s"] / bare["wall_s"])
    assert ours["target"] == "<= 1.1x" and ours["met"] in ("yes", "NO")
