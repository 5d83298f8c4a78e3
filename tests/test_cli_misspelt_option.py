"""A misspelt option of the command line names the option meant.

Found by a newcomer: ``flink-agents-py trace out/events.jsonl --limt 3`` said only
``unrecognized arguments: --limt 3`` (argparse on Python < 3.14 suggests nothing).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(120)


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flink_agents_py", *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "meant"),
    [
        (["trace", "events.jsonl", "--limt", "3"], "--limt: did you mean --limit?"),
        (["trace", "events.jsonl", "--faild"], "--faild: did you mean --failed?"),
        (["trace", "events.jsonl", "--kye=a"], "--kye: did you mean --key?"),
        (["new", "proj", "--froce"], "--froce: did you mean --force?"),
    ],
)
def test_a_misspelt_option_names_the_option_meant(tmp_path, args, meant):
    (tmp_path / "events.jsonl").write_text("")
    done = _cli(tmp_path, *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "unrecognized arguments" in done.stderr and meant in done.stderr, done.stderr
    assert not (tmp_path / "proj").exists()  # refused before anything was written


def test_an_option_like_no_other_is_refused_without_a_guess(tmp_path):
    (tmp_path / "events.jsonl").write_text("")
    done = _cli(tmp_path, "trace", "events.jsonl", "--zzz")
    assert done.returncode == 2
    assert "unrecognized arguments: --zzz" in done.stderr and "did you mean" not in done.stderr
