"""Smoke test of the benchmark suite: ``python -m bench --quick --only p1`` at a tiny scale."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(60)

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_bench_p1_quick_writes_json(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "results.json"
    env = {**os.environ, "BENCH_SCALE": "0.05"}
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", "p1", "--out", str(out),
         "--latest-md", ""],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=50,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "P1 local runner" in proc.stdout
    data = json.loads(out.read_text())
    assert data["meta"]["quick"] is True and data["meta"]["scale"] == 0.05
    assert set(data) == {"meta", "p1"}
    [row] = data["p1"]["rows"]
    for key in ("records", "keys", "agent_rps", "baseline_rps", "ratio",
                "agent_us_per_record", "baseline_us_per_record"):
        assert key in row, key
    assert row["records"] == 500
    assert row["agent_rps"] > 0 and row["baseline_rps"] > 0
