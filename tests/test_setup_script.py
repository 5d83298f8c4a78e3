"""``make setup`` (``scripts/setup.sh``) on a machine without a C/C++ compiler.

The set-up script is copied into a project directory outside the repository and run with a
``PATH`` that holds no compiler, an empty cache and a venv without llama-cpp-python: it must
stop at once, before downloading anything, and say what is missing and which paths work.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def test_no_compiler_stops_before_any_download_and_names_the_ways_on(
        tmp_path: pathlib.Path) -> None:
    project = tmp_path / "clone"
    (project / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup.sh", project / "scripts" / "setup.sh")
    # a venv of its own without llama-cpp-python (and without pip: nothing may be installed)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(project / ".venv")],
                   check=True, timeout=120)
    # the tools the script needs before its check, and no cc/gcc/c++/g++
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("dirname", "rm"):
        found = shutil.which(tool)
        assert found, tool
        (tools / tool).symlink_to(found)
    cache = tmp_path / "cache"
    env = {"PATH": str(tools), "HOME": str(tmp_path), "FLINK_AGENTS_PY_CACHE": str(cache),
           "LANG": os.environ.get("LANG", "C.UTF-8")}
    t = time.monotonic()
    proc = subprocess.run([shutil.which("bash") or "bash", str(project / "scripts" / "setup.sh")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    took = time.monotonic() - t
    assert proc.returncode != 0, proc.stdout
    err = proc.stderr
    assert "no C/C++ compiler" in err, err
    assert "llama-cpp-python" in err and str(cache / "wheels") in err, err
    # the ways on: a toolchain, the rest without the embedded model, or a wheel in the cache
    assert "apt-get install build-essential" in err, err
    assert "FLINK_AGENTS_PY_SKIP_LOCAL_MODEL=1 make setup" in err, err
    assert "--model scripted" in err, err
    # stopped before the installer, the project's install, the jars or the model
    assert "installer:" not in proc.stdout and "project:" not in proc.stdout, proc.stdout
    assert not cache.exists() or not any(cache.rglob("*")), list(cache.rglob("*"))
    assert not (project / ".venv" / "bin" / "uv").exists()
    assert took < 60, took
