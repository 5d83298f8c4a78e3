"""Start-up (issue 31): what a Flink job's client and its Python workers load before the
first record, and that what they put off still works the same when it is used."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

def run_fresh(code: str, cwd: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_flink_jobs_client_does_not_load_the_local_runner(tmp_path):
    # what a Flink job's script imports (the docs' and the start-up benchmark's way)
    pytest.importorskip("pyflink")
    out = run_fresh("""
        import json, sys
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.flink import create_stream_environment
        from flink_agents_py.api import Agent, InputEvent, OutputEvent, action
        before = sorted(m for m in sys.modules if m.startswith("flink_agents_py.local"))
        env = AgentsExecutionEnvironment.local()  # still there when asked for
        print(json.dumps({"before": before, "local": type(env).__name__}))
    """, tmp_path)
    assert out == {"before": [], "local": "LocalExecutionEnvironment"}
