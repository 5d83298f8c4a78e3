"""A bounded Flink job whose answer to a key's second record comes while the first waits.

Run as a user runs it: their own module in a directory outside the repository, started
with the venv's Python. The answer to the second record arrives early (the first record's
run waits; the second is queued behind it) and is held for it. The first run, answered, books
the payment (a durable call) while all input ends. Before, the end of input gave
it up ("the end of input came before its wait opened") and the second run's wait timed out,
though the answer had arrived and the local runner, given the same input, delivered it.
"""

from __future__ import annotations

import os
import subprocess
import textwrap

import orjson
import pytest

pytestmark = pytest.mark.flink

pytest.importorskip("pyflink")

from support.bad_input import PYTHON, ROOT  # noqa: E402

CLEAN_ENV = dict(os.environ)  # before any in-process Flink job of this session

AGENT = '''
import time

from flink_agents_py.api import (Agent, InputEvent, OutputEvent, RunnerContext,
                                 WaitTimeoutError, action)


def book(order: int, paid: str) -> str:
    """Book the payment: slow enough that all input ends meanwhile."""
    time.sleep(1.0)
    return paid


class Orders(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        order = event.input["order"]
        try:
            paid = await ctx.wait_for(f"paid-{order}", timeout_s=3600)
        except WaitTimeoutError as e:
            paid = "timed out: " + str(e)
        paid = await ctx.durable_execute_async(book, order, paid)  # the run is working
        ctx.send_event(OutputEvent(output={"key": ctx.key, "order": order, "paid": paid}))
'''

MAIN = """
import json
import sys

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.flink import create_stream_environment
from orders import Orders

RUNNER = sys.argv[1]
records = [{"key": "c", "order": 1}, {"key": "c", "order": 2}]
# order 2's payment first: it comes while order 1's run waits, order 2 queued behind it
events = [{"key": "c", "correlation_id": "paid-2", "payload": "p2"},
          {"key": "c", "correlation_id": "paid-1", "payload": "p1"}]
if RUNNER == "local":
    result = (AgentsExecutionEnvironment.local().from_list(records).connect(events)
              .apply(Orders()).run())
    rows = result.outputs + [{"error": e.message} for e in result.errors]
else:
    env = create_stream_environment()
    agents = AgentsExecutionEnvironment.flink(env)
    job = agents.from_datastream(env.from_collection(records)).connect(
        env.from_collection(events)).apply(Orders())
    with job.to_datastream().union(job.errors_datastream()).execute_and_collect("o") as out:
        rows = [r if "order" in r else {"error": r["message"]} for r in out]
print("ROWS " + json.dumps(sorted(rows, key=json.dumps)))
"""


def _rows(d, runner: str) -> list[dict]:
    proc = subprocess.run(
        [PYTHON, "main.py", runner],
        cwd=d,
        capture_output=True,
        text=True,
        env={**CLEAN_ENV, "PYTHONPATH": str(ROOT)},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    [line] = [x for x in proc.stdout.splitlines() if x.startswith("ROWS ")]
    return orjson.loads(line[5:])


@pytest.mark.timeout(600)
def test_an_answer_held_for_a_queued_record_is_delivered_on_flink_as_locally(tmp_path):
    (tmp_path / "orders.py").write_text(textwrap.dedent(AGENT))
    (tmp_path / "main.py").write_text(textwrap.dedent(MAIN))
    expected = [{"key": "c", "order": 1, "paid": "p1"}, {"key": "c", "order": 2, "paid": "p2"}]
    assert _rows(tmp_path, "local") == expected
    assert _rows(tmp_path, "flink") == expected
