"""The ReAct page (docs/how-to/react-agent.md) opens with an example that runs offline.

Its first Python block is saved by a user into a directory outside the repository and run
with the venv's interpreter, with no model server and no repository on ``PYTHONPATH``; what
it prints must be the lines its ``# ...`` comments show.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "how-to" / "react-agent.md"
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)


def test_the_react_pages_first_example_runs_offline_and_prints_what_it_shows(tmp_path):
    first = re.findall(r"^```python\n(.*?)^```$", PAGE.read_text(), re.S | re.M)[0]
    assert "Ollama" not in first and "OllamaChatModel" not in first
    assert "model_from_function" in first
    expected = [ln[2:] for ln in first.splitlines() if ln.startswith("# ")]
    assert len(expected) == 2
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "react_offline.py").write_text(first)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "OLLAMA_HOST")}
    proc = subprocess.run([str(PYTHON), "react_offline.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == expected
