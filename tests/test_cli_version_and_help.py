"""``flink-agents-py --version`` prints the version; no command prints the commands.

Found by a newcomer: ``flink-agents-py --version`` (the first thing one types to check what
is installed) said ``error: the following arguments are required: command``, and so did
``flink-agents-py`` alone, naming neither ``trace`` nor ``new``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import flink_agents_py

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(120)


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert ROOT not in tmp_path.resolve().parents  # run as a user runs it, from elsewhere
    return subprocess.run(
        [sys.executable, "-m", "flink_agents_py", *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_version_prints_the_package_version(tmp_path):
    done = _cli(tmp_path, "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"flink-agents-py {flink_agents_py.__version__}"


def test_no_command_prints_the_commands_and_fails(tmp_path):
    done = _cli(tmp_path)
    assert done.returncode == 2
    assert "required: command" not in done.stderr
    assert "print runs of an event log as trees" in done.stderr  # trace, said what it does
    assert "write a starter agent project into a folder" in done.stderr  # new


def test_a_misspelt_top_level_option_names_the_one_meant(tmp_path):
    done = _cli(tmp_path, "--verison")
    assert done.returncode == 2
    assert "--verison: did you mean --version?" in done.stderr
