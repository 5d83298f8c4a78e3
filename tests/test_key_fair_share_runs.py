"""A hot key's fan-out does not starve another key's call, on the local runner, on Flink and
in a user's own program; and no run shape stalls a key against its own share of slots.

The hot key's record starts 12 calls that each wait for a file only the other key's call
writes (``support.fair_share_agents``); before, at ``max_in_flight=4`` the hot key held every
slot, the other call waited behind the backlog and each hot call waited out its gate
(``"starved"``). The shapes below make several calls of one key at once with the fewest
slots (one, or one per key): a call holding a slot while it waits for another call of its own
key to start would never complete there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from support.fair_share_agents import FanOut, Queued, shapes
from support.harness import KEY, new_core, resume, snapshot_of
from support.waiting import wait_until

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import CallLimitError
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import HostOptions, InMemoryKeyState

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[1]


def _records(gate: Path) -> list[dict[str, Any]]:
    return [{"key": "hot", "n": 12, "gate": str(gate)}, {"key": "cool", "n": 0, "gate": str(gate)}]


def _check(outputs: list[dict[str, Any]]) -> None:
    by_key = {o["key"]: o["got"] for o in outputs}
    assert by_key == {"hot": [f"hot{i}" for i in range(12)], "cool": ["cool"]}  # none starved


def test_a_hot_keys_fan_out_leaves_a_slot_to_another_keys_call(tmp_path: Path):
    res = (
        AgentsExecutionEnvironment.local(max_in_flight=4)
        .from_list(_records(tmp_path / "gate"))
        .apply(FanOut())
        .run()
    )
    assert res.errors == []
    _check(res.outputs)


@pytest.mark.parametrize("do", ["nested", "chat", "subagents", "deferred"])
@pytest.mark.parametrize("slots", [(1, None), (2, 1)])
def test_calls_of_one_key_that_wait_on_each_other_complete_with_the_fewest_slots(do, slots):
    max_in_flight, per_key = slots
    opts = HostOptions(max_in_flight=max_in_flight, max_in_flight_per_key=per_key)
    res = (
        AgentsExecutionEnvironment.local(options=opts)
        .from_list([{"key": "a", "do": do}, {"key": "b", "do": do}])
        .apply(shapes())
        .run()
    )
    assert res.errors == [], [(e.action, e.message) for e in res.errors]
    outs = {json.dumps(o["out"]) for o in res.outputs}
    assert len(res.outputs) == 2 and len(outs) == 1  # both keys, the same answer
    expected = {
        "nested": ["outer(leaf-0)", "outer(leaf-1)", "outer(leaf-2)"],
        "chat": json.dumps([f"leaf-t{i}" for i in range(3)]),
        "subagents": [[[f"leaf-{i}-a", f"leaf-{i}-b"]] for i in range(3)],
        "deferred": [{"echo": i} for i in range(3)],
    }[do]
    assert res.outputs[0]["out"] == expected


USER_PROGRAM = """
import json, os, sys, time
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import CallLimitError
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action

GATE = sys.argv[1]

def slow_tool(i):
    deadline = time.monotonic() + 30
    while not os.path.exists(GATE):
        if time.monotonic() > deadline:
            return "starved"
        time.sleep(0.005)
    return i

def quick_tool():
    open(GATE, "w").close()
    return "quick"

class Mine(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input["fan"]:
            calls = [ctx.durable_execute_async(slow_tool, i) for i in range(20)]
            got = [await c for c in calls]
        else:
            got = [await ctx.durable_execute_async(quick_tool)]
        ctx.send_event(OutputEvent(output={"key": event.input["key"], "got": got}))

records = [{"key": "hot", "fan": True}, {"key": "other", "fan": False}]
env = AgentsExecutionEnvironment.local(max_in_flight=8)
print(json.dumps(env.from_list(records).apply(Mine()).collect()))
"""


def test_a_users_own_program_outside_the_repository(tmp_path: Path):
    (tmp_path / "mine.py").write_text(textwrap.dedent(USER_PROGRAM))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "mine.py", str(tmp_path / "gate")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outputs = json.loads(done.stdout.strip().splitlines()[-1])
    assert {o["key"]: o["got"] for o in outputs} == {"hot": list(range(20)), "other": ["quick"]}


@pytest.mark.flink
def test_on_a_minicluster_a_hot_keys_fan_out_leaves_a_slot_to_another_key(tmp_path: Path):
    from pyflink.common import Types

    from flink_agents_py.flink import create_stream_environment

    env = create_stream_environment(parallelism=1)
    agents = AgentsExecutionEnvironment.flink(env, max_in_flight=4)
    records = env.from_collection(_records(tmp_path / "gate"), Types.PICKLED_BYTE_ARRAY())
    out = agents.from_datastream(records).apply(FanOut()).to_datastream()
    with out.execute_and_collect("fair-share") as results:
        _check(list(results))


def test_calls_queued_for_a_slot_at_a_snapshot_run_after_a_restore(probes, monkeypatch):
    # one slot per key: at the snapshot call 0 runs and calls 1-5 wait for its slot; they are
    # in-flight calls of the run's state like call 0, so the restored run starts them all
    # (none recorded a result) and outputs what an uninterrupted run would
    plan = AgentPlan.from_agent(Queued())
    core = new_core(plan, max_in_flight=2, max_in_flight_per_key=1)
    state = InMemoryKeyState()
    try:
        res = core.on_input(KEY, {"go": 1}, state)
        assert res.errors == [] and res.outputs == []
        wait_until("call 0 runs", lambda: probes["call0"] == 1)
        assert core.executor.in_flight == 1 and core.executor.waiting == 5
        snapshot = snapshot_of(state, "json")
        assert snapshot.run is not None and snapshot.run.calls_started == 6
    finally:
        core.close()  # the crash: call 0 abandoned at its gate, calls 1-5 never started
    assert [probes[f"call{i}"] for i in range(6)] == [1, 0, 0, 0, 0, 0]
    probes.open("slot")
    monkeypatch.setattr(CallLimitError, "LIMIT", 6)  # started ones are not counted again
    outputs, errors, _ = resume(plan, snapshot, max_in_flight=2, max_in_flight_per_key=1)
    assert errors == [] and outputs == [[0, 1, 2, 3, 4, 5]]
    assert [probes[f"call{i}"] for i in range(6)] == [2, 1, 1, 1, 1, 1]


def test_a_run_starting_more_calls_than_the_limit_fails_and_its_key_goes_on(
    tmp_path: Path, monkeypatch
):
    # a record whose run starts 12 calls past a limit of 10: its action fails with the key
    # and the limit named, on the error output; the key's next record and another key run
    monkeypatch.setattr(CallLimitError, "LIMIT", 10)
    gate = tmp_path / "gate"
    gate.write_text("open")
    records = [
        {"key": "hot", "n": 12, "gate": str(gate)},
        {"key": "hot", "n": 0, "gate": str(gate)},
        {"key": "other", "n": 10, "gate": str(gate)},
    ]
    res = AgentsExecutionEnvironment.local().from_list(records).apply(FanOut()).run()
    [error] = res.errors
    assert (error.key, error.error_type) == ("hot", "CallLimitError")
    assert "for key 'hot'" in error.message and "more than 10 durable calls" in error.message
    assert sorted(res.outputs, key=str) == sorted(
        [{"key": "hot", "got": ["cool"]}, {"key": "other", "got": [f"hot{i}" for i in range(10)]}],
        key=str,
    )


def test_the_call_limit_counts_the_calls_of_a_runs_sub_agents(monkeypatch):
    # the parent starts 3 sub-agent calls, each child 2 calls: 9 in the run tree. Past the
    # limit the third child's second call fails its action: its sub-agent call fails, naming
    # the limit, and the calls past it never start
    monkeypatch.setattr(CallLimitError, "LIMIT", 8)
    env = AgentsExecutionEnvironment.local()
    res = env.from_list([{"key": "a", "do": "subagents"}]).apply(shapes()).run()
    [out] = res.outputs
    assert out["out"][:2] == [[["leaf-0-a", "leaf-0-b"]], [["leaf-1-a", "leaf-1-b"]]]
    assert "CallLimitError" in out["out"][2] and "more than 8 durable calls" in out["out"][2]
    monkeypatch.setattr(CallLimitError, "LIMIT", 9)
    res = env.from_list([{"key": "a", "do": "subagents"}]).apply(shapes()).run()
    assert res.errors == [] and res.outputs[0]["out"][2] == [["leaf-2-a", "leaf-2-b"]]
