"""An async sub-agent's ``timeout_s`` counts from its first poll, across a restore.

The poll's deadline was ``time.monotonic() + timeout_s`` taken as the poll started, in
memory: a restore started the poll again, and the timeout with it, so a job restored every
few minutes (or a remote run that outlives many restores) never timed out. Now the deadline
is recorded in the run's keyed state when the poll first starts, and a poll started again
after a restore keeps it.
"""

from __future__ import annotations

import threading
import time

import pytest
from support.harness import KEY, new_core, poll_until, resume, run_to_end, snapshot_of
from support.probes import count, gate

from flink_agents_py.api import (
    Agent,
    AsyncSubagentSetup,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunStatus,
    SubagentResult,
    action,
)
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState

pytestmark = pytest.mark.timeout(60)

TIMEOUT_S = 2.0


class Stuck(AsyncSubagentSetup):
    """A remote run that never ends."""

    def call_submit_request(self, session_id, call_id, input):
        count("submitted")

    def call_query_status(self, session_id, call_id):
        count("polled")
        return RunStatus.running()

    def call_fetch_result(self, session_id, call_id):
        return SubagentResult.ok("never")

    def call_cancel_request(self, session_id, call_id):
        count("cancelled")


class Caller(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event, ctx):
        result = await (await ctx.submit_subagent("remote", event.input))
        ctx.send_event(OutputEvent(output={"ok": result.success,
                                           "error": result.error_message}))


def _plan() -> AgentPlan:
    agent = Caller()
    agent.add_resource("remote", ResourceType.AGENT, ResourceDescriptor(
        Stuck, description="A remote.", input_schema='{"type":"string"}',
        status_poll_interval_millis=20, timeout_s=TIMEOUT_S))
    return AgentPlan.from_agent(agent)


def _poll_deadline(state: InMemoryKeyState) -> int | None:
    run = state.run
    polls = [w for cid, w in run.waits.items() if cid.startswith("#poll/")] if run else []
    return polls[0].deadline_ms if polls else None


@pytest.mark.parametrize("how", ["deepcopy", "json"])
def test_a_poll_restarted_by_a_restore_keeps_its_first_deadline(probes, how):
    plan = _plan()
    core = new_core(plan)
    state = InMemoryKeyState()
    try:
        res = core.on_input(KEY, "q", state)
        assert res.errors == []
        poll_until(core, state, lambda s: _poll_deadline(s) is not None and probes["polled"])
        saved = snapshot_of(state, how)  # the checkpoint: the poll was running
    finally:
        core.close()  # the crash: the poll in memory is gone
    deadline_ms = _poll_deadline(saved)
    assert deadline_ms is not None
    while time.time_ns() // 1_000_000 < deadline_ms:  # the job was down past the deadline
        time.sleep(0.01)
    t0 = time.monotonic()
    outputs, errors, _ = resume(plan, saved)
    took = time.monotonic() - t0
    assert errors == []
    [out] = outputs
    assert out["ok"] is False and "the remote run timed out" in out["error"]
    assert "counted from its first poll, across restores" in out["error"]
    assert took < TIMEOUT_S / 2, f"the restore started the timeout anew ({took:.1f} s)"
    assert probes["submitted"] == 1  # the remote run was not submitted again


def test_the_fault_free_run_times_out_the_same(probes):
    core = new_core(_plan())
    state = InMemoryKeyState()
    try:
        core.on_input(KEY, "q", state)
        outputs, errors = run_to_end(core, state)
    finally:
        core.close()
    assert errors == [] and [o["ok"] for o in outputs] == [False]
    assert "the remote run timed out" in outputs[0]["error"] and probes["cancelled"] == 1
    assert state.run is None  # the run ended: its poll's deadline went with it


class UntilOpened(AsyncSubagentSetup):
    """A remote run that ends once the test's gate ``remote`` opens."""

    def call_submit_request(self, session_id, call_id, input):
        pass

    def call_query_status(self, session_id, call_id):
        return RunStatus.completed() if gate("remote").is_set() else RunStatus.running()

    def call_fetch_result(self, session_id, call_id):
        return SubagentResult.ok("done")


def test_a_poll_between_its_probes_leaves_its_slot_to_other_calls(probes):
    # the remote run ends only once another call ran: before, the poll kept the one I/O
    # slot between its probes, the other call never started and the poll timed out
    from flink_agents_py.runtime import IOExecutor
    from flink_agents_py.runtime.core._subgraph import poll_result

    setup = UntilOpened(description="A remote.", input_schema='{"type":"string"}',
                        status_poll_interval_millis=20, timeout_s=5)
    executor = IOExecutor(max_in_flight=1)
    outcomes: dict[str, object] = {}
    done = threading.Event()

    def on_done(name: str):
        def record(ok: bool, value: object) -> None:
            outcomes[name] = value
            if len(outcomes) == 2:
                done.set()
        return record

    try:
        executor.submit(poll_result, (setup, "s", "c", "remote"), {}, on_done("poll"))
        executor.submit(lambda: gate("remote").set(), (), {}, on_done("other"))
        assert done.wait(20)
    finally:
        executor.stop()
    result = outcomes["poll"]
    assert isinstance(result, SubagentResult) and result.success, result


class Done(AsyncSubagentSetup):
    """A remote run that has ended by its first probe."""

    def call_submit_request(self, session_id, call_id, input):
        pass

    def call_query_status(self, session_id, call_id):
        return RunStatus.completed()

    def call_fetch_result(self, session_id, call_id):
        return SubagentResult.ok("done")


def test_a_poll_with_a_timeout_is_replay_safe_at_every_crash_point():
    from flink_agents_py.testing import check_replay_safety

    agent = Caller()
    agent.add_resource("remote", ResourceType.AGENT, ResourceDescriptor(
        Done, description="A remote.", input_schema='{"type":"object"}',
        status_poll_interval_millis=20, timeout_s=30))
    report = check_replay_safety(agent, [{"key": k, "q": 1} for k in "abc"])
    report.assert_ok()
    assert report.outputs == 3 and report.points_total >= 6
