"""``e2e_idioms_example.py`` run as a user runs it: from a copy outside the repository.

The program and its agents (``agents/e2e_idioms_agents.py``) are written the way Flink
Agents' e2e tests write theirs, with ``flink_agents_py.compat`` imports only; the interpreter
finds the package under test (not a checkout's other copy) through ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import flink_agents_py

HERE = Path(__file__).resolve().parent
PACKAGE_ROOT = str(Path(flink_agents_py.__file__).resolve().parents[1])


def test_e2e_idioms_program_prints_its_agents_outputs(tmp_path):
    work = tmp_path / "program"
    shutil.copytree(HERE, work, ignore=shutil.ignore_patterns("test_*.py", "__pycache__"))
    run = subprocess.run([sys.executable, "e2e_idioms_example.py"], cwd=work,
                         capture_output=True, text=True, timeout=180,
                         env={**os.environ, "PYTHONPATH": PACKAGE_ROOT})
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    reviews = [(line.split()[1], json.loads(line.split(" ", 2)[2]))
               for line in lines if line.startswith("REVIEW ")]
    assert reviews == [
        ("1", {"id": 1, "review": "great (audited=True) [marked]", "review_score": 5.0,
               "memory_info": {"total_reviews": 1, "items": ["item_1"]}}),
        ("2", {"id": 2, "review": "broken (audited=True) [marked]", "review_score": 1.0,
               "memory_info": {"total_reviews": 1, "items": ["item_2"]}}),
        ("1", {"id": 1, "review": "still great (audited=True) [marked]", "review_score": 4.0,
               "memory_info": {"total_reviews": 2, "items": ["item_1"]}})]
    assert [line for line in lines if line.startswith("TASK ")] == [
        "TASK t1 'calculate the sum of 1 and 2.\\nPlease call the appropriate tool to do "
        "this task: calculate the sum of 1 and 2.\\n3'",
        "TASK t2 'say hello'"]


@pytest.mark.flink
def test_e2e_idioms_flink_program_keys_by_a_pyflink_key_selector(tmp_path):
    # from_datastream(key_selector=MyKeySelector()), a PyFlink KeySelector as every Flink
    # Agents e2e test passes one, was called as a function: every record went to the error
    # stream ("'ReviewIdSelector' object is not callable") and the job printed nothing
    work = tmp_path / "program"
    shutil.copytree(HERE, work, ignore=shutil.ignore_patterns("test_*.py", "__pycache__"))
    run = subprocess.run([sys.executable, "e2e_idioms_flink.py"], cwd=work,
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": PACKAGE_ROOT})
    assert run.returncode == 0, run.stderr[-3000:]
    printed = sorted(json.loads(line.split(" ", 1)[1]).get("review")
                     for line in run.stdout.splitlines() if line.startswith("REVIEW "))
    assert printed == ["broken (audited=True) [marked]", "great (audited=True) [marked]",
                       "still great (audited=True) [marked]"]


def test_a_key_selector_is_a_function_or_a_pyflink_key_selector():
    datastream = pytest.importorskip("pyflink.datastream")
    from flink_agents_py.api import UsageError
    from flink_agents_py.flink._builder import _key_function

    class ById(datastream.KeySelector):
        def get_key(self, value):
            return value["id"]

    assert _key_function(ById())({"id": 7}) == 7
    assert _key_function(None) is None
    with pytest.raises(UsageError, match="KeySelector, got a str"):
        _key_function("id")
