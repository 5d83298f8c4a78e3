"""A key selector that raises: its error row says it was the key selector, where, and on what.

A selector written for other records (``r["customer"]`` on a record without it, ``r.customer``
on a dict) gave a row saying only ``KeyError: 'customer'``, which names neither the selector
nor the record. Each case runs as a user's module from a directory outside the repository;
the good records still come out.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

JOB = """
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action


class Echo(Agent):
    @action(InputEvent)
    @staticmethod
    def go(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=event.input["n"]))


def by_attribute(record):
    return record.customer


records = [{"customer": "ana", "n": 1}, {"name": "x", "n": 2}, {"customer": "bo", "n": 3}]
for selector in (lambda r: r["customer"], by_attribute):
    result = AgentsExecutionEnvironment.local().from_list(
        records, key_selector=selector).apply(Echo()).run()
    print("outputs", sorted(result.outputs))
    for error in result.errors:
        print("error", error.action, error.error_type, error.message)
"""


def test_a_raising_key_selector_is_named_with_its_line_and_the_record_fields(tmp_path):
    (tmp_path / "job.py").write_text(JOB)
    proc = subprocess.run([str(PYTHON), "job.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr
    job = str(tmp_path / "job.py")
    lines = JOB.splitlines()
    lam = 1 + next(i for i, line in enumerate(lines) if "lambda r:" in line)
    attr = 1 + next(i for i, line in enumerate(lines) if "return record.customer" in line)
    assert proc.stdout.splitlines() == [
        "outputs [1, 3]",
        "error <key_selector> KeyError the key selector raised on the dict record (its "
        f"fields: name, n), at {job}:{lam} in <lambda>: 'customer'",
        "outputs []",
        *["error <key_selector> AttributeError the key selector raised on the dict record "
          f"(its fields: {fields}), at {job}:{attr} in by_attribute: 'dict' object has no "
          "attribute 'customer'" for fields in ("customer, n", "name, n", "customer, n")],
    ], proc.stdout
    # the WARNING line of the rejection says it too
    assert "record 1 rejected before it ran: KeyError: the key selector raised on the dict " \
        "record (its fields: name, n)" in proc.stderr, proc.stderr
