"""The events an action sent before it failed: dropped, on both runners alike.

An action's sent events and memory writes take effect when it completes, all at once; an
action that raises leaves none of them behind (its error becomes an error row), whether it
is a plain function, a generator (``yield from ctx.execute_async``) or a coroutine, on the
local runner and on the Flink operator (one ``AgentCore``; a Flink job is run here too).
That is the rule that keeps a restored run consistent: a failed action's outputs are never
half sent, and never sent twice when a restore runs it again. An action written as an async
generator function (``async def`` with a ``yield``) ran no line of its body, with no error
saying so (its outputs and failure lost without a word); it is refused when the agent is
compiled.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.failing_actions import KINDS, RECORDS, SendsThenFails

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, PlanError, action

pytestmark = pytest.mark.timeout(300)

EXPECTED_OUTPUTS = sorted(
    [("sent", f"{kind}-2", 4) for kind in KINDS] + [("relayed", f"{kind}-2", 4) for kind in KINDS]
)
EXPECTED_ERRORS = sorted(
    (f"{kind}-1", kind, "RuntimeError", "failed after sending 2") for kind in KINDS
)


def _outputs(outputs: list[dict[str, Any]]) -> list[tuple[str, str, int]]:
    return sorted(
        ("sent" if "sent" in o else "relayed", o["key"], o.get("sent", o.get("relayed")))
        for o in outputs
    )


def _errors(errors: list[Any]) -> list[tuple[str, str, str, str]]:
    rows = [e if isinstance(e, dict) else e.model_dump() for e in errors]
    return sorted((r["key"], r["action"], r["error_type"], r["message"]) for r in rows)


def test_a_failed_actions_events_are_dropped_on_the_local_runner():
    job = AgentsExecutionEnvironment.local().from_list(RECORDS).apply(SendsThenFails())
    res = job.run()
    assert _outputs(res.outputs) == EXPECTED_OUTPUTS
    assert _errors(res.errors) == EXPECTED_ERRORS
    memory = {k["key"]: k["memory"] for k in job.snapshot()["keys"]}
    assert {k: memory.get(k, {}).get("written") for k in memory} == {
        **{f"{kind}-1": None for kind in KINDS},
        **{f"{kind}-2": 4 for kind in KINDS},
    }


@pytest.mark.flink
def test_a_failed_actions_events_are_dropped_on_flink_as_on_the_local_runner():
    from pyflink.common import Types

    from flink_agents_py.flink import create_stream_environment

    env = create_stream_environment(parallelism=1, restart_attempts=0)
    pickled = Types.PICKLED_BYTE_ARRAY()
    ds = env.from_collection(RECORDS, type_info=pickled)
    applied = AgentsExecutionEnvironment.flink(env).from_datastream(ds).apply(SendsThenFails())
    both = (
        applied.to_datastream()
        .map(lambda o: ("out", o), output_type=pickled)
        .union(applied.errors_datastream().map(lambda e: ("err", e), output_type=pickled))
    )
    with both.execute_and_collect("failed-action-events") as rows:
        rows = list(rows)
    assert _outputs([v for kind, v in rows if kind == "out"]) == EXPECTED_OUTPUTS
    assert _errors([v for kind, v in rows if kind == "err"]) == EXPECTED_ERRORS


def test_an_async_generator_action_is_refused_when_compiled():
    class AsyncGen(Agent):
        @action(InputEvent)
        @staticmethod
        async def act(event: InputEvent, ctx: Any) -> Any:
            ctx.send_event(OutputEvent(output=event.input))
            yield None

    with pytest.raises(PlanError, match="action 'act' is an async generator function"):
        AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(AsyncGen())


def test_a_generator_actions_annotation_is_not_taken_for_a_discarded_result(recwarn):
    AgentsExecutionEnvironment.local().from_list([]).apply(SendsThenFails())
    assert [str(w.message) for w in recwarn if "declares it returns" in str(w.message)] == []


USER_AGENT = """
from flink_agents_py.api import Agent, InputEvent, OutputEvent, action


def double(n):
    return n * 2


class Shop(Agent):
    @action(InputEvent)
    @staticmethod
    def place(event, ctx):
        total = yield from ctx.execute_async(double, event.input["n"])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "total": total}))
        if event.input["n"] < 0:
            raise ValueError("negative order")


class Streamed(Agent):
    @action(InputEvent)
    @staticmethod
    async def place(event, ctx):
        ctx.send_event(OutputEvent(output=event.input))
        yield None
"""

USER_MAIN = """
import json

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import PlanError
from shop import Shop, Streamed

records = [{"key": "a", "n": 2}, {"key": "b", "n": -1}]
res = AgentsExecutionEnvironment.local().from_list(records).apply(Shop()).run()
print(json.dumps({"outputs": res.outputs, "errors": [(e.key, e.message) for e in res.errors]}))
try:
    AgentsExecutionEnvironment.local().from_list(records).apply(Streamed())
except PlanError as e:
    print(json.dumps({"refused": str(e)}))
"""


def test_a_users_own_module_run_from_its_folder(tmp_path):
    import json
    import os
    import pathlib
    import subprocess
    import sys

    (tmp_path / "shop.py").write_text(USER_AGENT)
    (tmp_path / "main.py").write_text(USER_MAIN)
    env = {**os.environ, "PYTHONPATH": str(pathlib.Path(__file__).resolve().parents[1])}
    proc = subprocess.run(
        [sys.executable, "main.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    ran, refused = (json.loads(line) for line in proc.stdout.splitlines()[-2:])
    assert ran == {"outputs": [{"key": "a", "total": 4}], "errors": [["b", "negative order"]]}
    assert "action 'place' is an async generator function" in refused["refused"]
