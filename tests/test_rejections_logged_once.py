"""Records rejected before they ran log their traceback once per kind, not once each.

Found by a newcomer: a list of records without a ``"key"`` field (the first mistake most
make) logged, for every record, its WARNING line and then a five-line traceback of the
package's own key selector, ending with the whole message again: 3,000 records, 18,000
lines. A failed action logs its traceback once per (action, error type, place) already; a
rejected record now does the same per (error type, place raised), in each run: later ones
log their line (naming the record and the error) and the traceback at DEBUG, and every
error record keeps its traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(120)

USER_PROGRAM = """
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, action


class Echo(Agent):
    @action(InputEvent)
    @staticmethod
    def echo(event, ctx):
        ctx.send_event(OutputEvent(output=event.input))


def by_user(record):
    return record["user"]


records = [{"id": i, "text": "hi"} for i in range(5)]
for run in range(2):  # each run logs its first traceback of a kind
    result = AgentsExecutionEnvironment.local().from_list(records).apply(Echo()).run()
    print(len(result.errors), sum(1 for e in result.errors if e.traceback))
result = (AgentsExecutionEnvironment.local()
          .from_list(records, key_selector=by_user).apply(Echo()).run())
print(len(result.errors), sum(1 for e in result.errors if e.traceback))
"""


def test_a_run_logs_one_traceback_per_kind_of_rejection(tmp_path):
    assert ROOT not in tmp_path.resolve().parents  # a user's own folder
    (tmp_path / "mine.py").write_text(textwrap.dedent(USER_PROGRAM))
    done = subprocess.run(
        [sys.executable, "mine.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["5", "5"] * 3  # every error record keeps its traceback
    err = done.stderr
    assert err.count("rejected before it ran: UnkeyedRecordError") == 10, err
    assert err.count("rejected before it ran: KeyError") == 5, err
    # one traceback per run and kind: the package's selector twice, the user's once
    assert err.count("Traceback (most recent call last)") == 3, err
    assert err.count('return record["user"]') == 1, err  # the user's line, where it failed
    assert (
        err.count("(traceback: in the error record, at the first such rejection, and at DEBUG)")
        == 12
    ), err
