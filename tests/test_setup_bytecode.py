"""``make setup`` compiles what a job's processes import (``scripts/compile_bytecode.py``,
in the background): they start from compiled files, even where
``PYTHONDONTWRITEBYTECODE=1`` means no import writes them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pyflink")

ROOT = Path(__file__).resolve().parents[1]

WHAT_A_WORKER_LOADS = """
import importlib.util, json, os, sys, sysconfig
import pyflink.datastream, pyflink.fn_execution.beam.beam_operations, flink_agents_py.flink
mine = (sysconfig.get_paths()["purelib"], sys.argv[1])
loaded, missing = 0, []
for name, module in list(sys.modules.items()):
    file = getattr(module, "__file__", None) or ""
    if file.endswith(".py") and file.startswith(mine):
        loaded += 1
        if not os.path.exists(importlib.util.cache_from_source(file)):
            missing.append(name)
print(json.dumps({"loaded": loaded, "missing": missing}))
"""


def test_the_modules_a_python_worker_loads_come_compiled():
    log = Path(sys.prefix) / "compile-bytecode.log"
    assert log.exists(), f"no {log}: this venv was not made by `make setup` (run it)"
    deadline = time.monotonic() + 600  # setup does not wait for the compiling to end
    while "[bytecode] compiled" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert "[bytecode] compiled" in log.read_text(), log.read_text()[-2000:]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONPYCACHEPREFIX", None)
    check = subprocess.run([sys.executable, "-c", WHAT_A_WORKER_LOADS, str(ROOT)],
                           env=env, capture_output=True, text=True, timeout=600)
    assert check.returncode == 0, check.stderr[-2000:]
    seen = json.loads(check.stdout.strip().splitlines()[-1])
    assert seen["loaded"] > 500  # PyFlink, Beam, pandas...: what made each start slow
    assert seen["missing"] == [], seen["missing"][:20]
