"""Sub-agents: internal children, deferred and async external setups.

Local-runner tests for what a calling action sees, and core-level restores (``AgentCore`` on
an ``InMemoryKeyState``, deep-copied mid-run to simulate a checkpoint, resumed on a new core)
for durability. Fake remotes count the requests they receive.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from support import harness
from support.harness import KEY, call_of, new_core, poll_until, run_to_end, snapshot_of
from support.probes import gate
from support.subagent_agents import (
    PLAN,
    EchoChild,
    Parent,
    Pubsub,
    Remote,
    barrier,
    internal,
)

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    PlanError,
    ResourceDescriptor,
    ResourceType,
    SubagentResult,
    qualified_name,
)
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore, InMemoryKeyState

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _abort_barrier():
    yield
    barrier().abort()  # never leave an executor thread waiting at it


def run_local(*records: dict[str, Any]):
    return AgentsExecutionEnvironment.local().from_list(list(records)).apply(PLAN).run()


def one(record: dict[str, Any]) -> dict[str, Any]:
    res = run_local({"key": "a", **record})
    assert res.errors == [], [(e.action, e.error_type, e.message) for e in res.errors]
    [out] = res.outputs
    return out


# --------------------------------------------------------------------------- core-level driving


def snapshot_when(record: dict[str, Any], done
                  ) -> tuple[AgentCore, InMemoryKeyState, InMemoryKeyState]:
    """Run ``record`` on a core until ``done(state)``; return the core, state and a copy."""
    core = new_core(PLAN)
    state = InMemoryKeyState()
    res = core.on_input(KEY, record, state)
    assert res.errors == [] and res.outputs == []
    poll_until(core, state, done)
    return core, state, snapshot_of(state)


def resume(snapshot: InMemoryKeyState) -> tuple[list[Any], AgentCore]:
    outputs, errors, new = harness.resume(PLAN, snapshot)
    assert errors == [], [(e.action, e.error_type, e.message) for e in errors]
    assert snapshot.run is None
    return outputs, new


# --------------------------------------------------------------------------- internal sub-agents


def test_internal_child_prompt_placeholders_come_from_input_fields(probes):
    out = one({"do": "call", "name": "prompted",
               "input": {"product": "shoe", "audience": "runners", "extra": "ignored"}})
    r = out["result"]
    assert r["success"] is True, r
    text = "Review shoe for runners ({missing})."  # unfilled stays literal, extra is ignored
    assert r["result"] == [{"via": "ctx.chat", "system": text}, {"via": "event", "system": text}]
    assert probes["model"] == 2


def test_internal_child_result_is_a_list_even_with_one_output():
    out = one({"do": "call", "name": "echo", "input": {"n": 1}})
    r = out["result"]
    assert r == SubagentResult.ok([
        {"input": {"n": 1}, "stm_before": {}, "sensory_keys": []}]).model_dump()


def test_internal_child_result_holds_outputs_of_actions_triggered_after_an_output(probes):
    # the events an action sends are delivered, in order, when it completes: an OutputEvent
    # sent first must not close the call before the later events' actions ran
    out = one({"do": "call", "name": "output_then_more", "input": {}})
    assert out["result"] == SubagentResult.ok(["first", "second"]).model_dump()
    assert probes["second_runs"] == 1


def test_internal_child_memory_is_isolated_per_call(probes):
    core = new_core(PLAN)
    try:
        state = InMemoryKeyState()
        res = core.on_input(KEY, {"do": "memory"}, state)
        outputs, errors = run_to_end(core, state)
        outputs = res.outputs + outputs
    finally:
        core.close()
    assert errors == []
    [out] = outputs
    for which, n in (("first", 1), ("second", 2)):
        [child] = out[which]["result"]
        assert child["input"] == {"n": n}
        assert child["stm_before"] == {}            # a fresh short-term memory per call
        assert child["sensory_keys"] == []  # the parent's sensory memory is not shared
    assert out["parent_stm"] == {"p": 1}
    assert out["parent_sensory"] == {"ps": 1}
    assert state.memory == {"p": 1}  # the children's writes never reached the parent's memory
    assert probes["echo_runs"] == 2


def test_several_handles_open_at_once_awaited_in_any_order(probes):
    out = one({"do": "many"})
    assert probes["barrier"] == 3  # the three internal calls met at the barrier: all in flight
    assert out["one"] == SubagentResult.ok([{"tag": "one"}]).model_dump()
    assert out["two"]["result"] == [{"tag": "two"}]
    assert out["three"]["result"] == [{"tag": "three"}]
    assert out["one_again"] == out["one"]
    assert out["remote"]["success"] and out["remote"]["result"]["echo"] == {"n": 4}
    assert out["remote"]["result"]["endpoint"] == "http://remote"
    assert out["pubsub"] == SubagentResult.ok({"async": {"n": 5}}).model_dump()
    assert (probes["deferred"], probes["submit"], probes["fetch"]) == (1, 1, 1)


# --------------------------------------------------------------------------- cancellation


def test_cancel_internal_stops_successor_dispatch(probes):
    out = one({"do": "cancel_internal"})
    r = out["result"]
    assert r["success"] is False
    assert "cancelled" in r["error_message"] and "canceller" in r["error_message"]
    assert r["cancelled"] is True
    assert out["again"] == r
    assert probes["first_runs"] == 1 and probes["first_call"] == 1
    assert probes["successor_runs"] == 0


def test_cancel_internal_before_it_started_never_runs_the_child(probes):
    out = one({"do": "cancel_internal_before_start"})
    r = out["result"]
    assert r["success"] is False and r["cancelled"] is True, r
    assert probes["first_runs"] == 0


def test_cancel_deferred_not_yet_awaited_never_runs_its_call(probes):
    out = one({"do": "cancel_deferred"})
    r = out["result"]
    assert r["success"] is False and r["cancelled"] is True
    assert "cancelled" in r["error_message"] and "remote" in r["error_message"]
    assert probes["deferred"] == 0


def test_cancel_async_sends_one_cancel_request(probes):
    out = one({"do": "cancel_async"})
    r = out["result"]
    assert r["success"] is False and r["cancelled"] is True
    assert "cancelled" in r["error_message"] and "pubsub" in r["error_message"]
    assert out["again"] == r
    assert probes["submit"] == 1
    assert probes["cancel"] == 1
    assert probes["fetch"] == 0


# --------------------------------------------------------------------------- failures


def test_failing_child_action_gives_a_failed_result_and_the_parent_goes_on():
    out = one({"do": "call", "name": "raiser", "input": {"x": 1}})
    r = out["result"]
    assert r["success"] is False
    assert "raiser" in r["error_message"]
    assert "ValueError" in r["error_message"] and "bad review" in r["error_message"]


def test_failure_with_a_sibling_in_flight_waits_for_it_and_dispatches_no_successor(probes):
    out = one({"do": "fail_with_sibling"})
    r = out["result"]
    assert r["success"] is False
    assert "failer" in r["error_message"] and "missing field" in r["error_message"]
    # the result came after the sibling retired
    assert probes.notes() == ["sibling:done", "parent:result"]
    assert probes["successor_runs"] == 0


def test_failed_async_remote_run_gives_a_failed_result():
    out = one({"do": "call", "name": "pubsub", "input": {"fail": True}})
    r = out["result"]
    assert r["success"] is False and "remote broke" in r["error_message"]
    assert "pubsub" in r["error_message"]


def test_deferred_call_returning_an_error_result_is_a_failed_result():
    out = one({"do": "call", "name": "remote", "input": {"mode": "error"}})
    assert out["result"] == SubagentResult.error("remote said no").model_dump()


def test_unknown_and_non_agent_names_give_failed_results_naming_them(probes):
    out = one({"do": "refused"})
    assert out["unknown"]["success"] is False and "'nope'" in out["unknown"]["error_message"]
    assert out["not_agent"]["success"] is False and "'double'" in out["not_agent"]["error_message"]
    assert probes["double"] == 0


@pytest.mark.parametrize("mode", ["raise", "prepare_raises"])
def test_exception_escaping_a_deferred_call_fails_the_calling_action(mode):
    res = run_local({"key": "a", "do": "call", "name": "remote", "input": {"mode": mode}})
    assert res.outputs == []
    [err] = res.errors
    assert err.action == "go"
    if mode == "raise":
        assert (err.error_type, err.message) == ("RuntimeError", "remote exploded")
    else:
        assert (err.error_type, err.message) == ("ConnectionError", "cannot reach the remote")


def test_async_submits_once_and_polling_does_not_block_other_keys(probes):
    res = run_local({"key": "a", "do": "call", "name": "pubsub", "input": {"wait": True}},
                    {"key": "b", "do": "wait_other_key"})
    assert res.errors == []
    assert [o["do"] for o in res.outputs] == ["wait_other_key", "call"]
    assert res.outputs[0]["polls_seen"] is True
    assert res.outputs[1]["result"] == SubagentResult.ok({"async": {"wait": True}}).model_dump()
    assert probes["submit"] == 1 and probes["fetch"] == 1
    assert probes["status:running"] >= 2


# --------------------------------------------------------------------------- plan checks


def test_external_setup_instance_stands_for_its_descriptor():
    """An instance is taken as Apache Flink Agents takes one (it was a PlanError here)."""
    p = Parent()
    p.add_resource("remote", ResourceType.AGENT, Remote(endpoint="http://x"))
    p.add_resource("pubsub", ResourceType.AGENT, Pubsub())
    agents = AgentPlan.from_agent(p).resources[ResourceType.AGENT]
    remote, pubsub = agents["remote"].descriptor, agents["pubsub"].descriptor
    assert remote.clazz in (Remote, f"{Remote.__module__}.Remote", qualified_name(Remote))
    assert remote.arguments["endpoint"] == "http://x"
    assert pubsub.clazz in (Pubsub, f"{Pubsub.__module__}.Pubsub", qualified_name(Pubsub))


@pytest.mark.parametrize("schema", ["", "   ", "\n\t"])
def test_blank_input_schema_is_rejected(schema):
    p = Parent()
    p.add_resource("remote", ResourceType.AGENT, ResourceDescriptor(Remote, input_schema=schema))
    p.add_resource("echo", ResourceType.AGENT, internal(EchoChild, input_schema=schema))
    with pytest.raises(PlanError) as ei:
        AgentPlan.from_agent(p)
    problems = ei.value.problems
    assert len(problems) == 2
    assert all("input_schema" in m and "blank" in m for m in problems)
    with pytest.raises(ValidationError, match="input_schema"):
        Remote(input_schema=schema)


# --------------------------------------------------------------------------- durability


def test_deferred_prepare_gets_the_same_ids_after_restore_and_reconciles(probes):
    old, state, snapshot = snapshot_when(
        {"do": "call", "name": "remote", "input": {"mode": "gated_reconcile"}},
        lambda s: probes["deferred"] == 1)
    try:
        assert not call_of(snapshot, "go", 0).done
        gate("deferred").set()
        outputs, _ = resume(snapshot)
        prepared = probes.store("prepared", list)
        assert len(prepared) == 2
        assert prepared[0] == prepared[1]
        session_id, call_id = prepared[0]
        assert session_id == '"k1"/r0' and call_id == "r0/go/c0"
        [out] = outputs
        assert out["result"]["result"] == {"reconciled": f"{session_id}#{call_id}"}
        assert probes["reconcile"] == 1 and probes["deferred"] == 1
    finally:
        gate("deferred").set()
        old.close()


def test_deferred_without_reconciler_runs_again_with_the_same_key_after_restore(probes):
    old, state, snapshot = snapshot_when(
        {"do": "call", "name": "remote", "input": {"mode": "gated"}},
        lambda s: probes["deferred"] == 1)
    try:
        gate("deferred").set()
        outputs, _ = resume(snapshot)
        prepared = probes.store("prepared", list)
        assert prepared[0] == prepared[1]
        [out] = outputs
        assert out["result"]["result"]["key"] == "#".join(prepared[0])
        assert probes["deferred"] == 2  # started, outcome recorded nowhere: at-least-once
    finally:
        gate("deferred").set()
        old.close()


def test_async_crash_after_submit_does_not_submit_again_and_polling_resumes(probes):
    old, state, snapshot = snapshot_when(
        {"do": "call", "name": "pubsub", "input": {"wait": True}},
        lambda s: probes["status:running"] >= 1)
    try:
        assert call_of(snapshot, "go", 1).done      # the submit is recorded
        assert not call_of(snapshot, "go", 0).done  # the result is not
        polls_before = probes["status"]
        gate("async").set()
        outputs, new = resume(snapshot)
        [out] = outputs
        assert out["result"] == SubagentResult.ok({"async": {"wait": True}}).model_dump()
        assert probes["submit"] == 1
        assert probes["status"] > polls_before
        assert new.counters["calls_replayed"] >= 1
    finally:
        gate("async").set()
        old.close()


def test_internal_child_completed_before_the_checkpoint_is_not_run_again(probes):
    old, state, snapshot = snapshot_when(
        {"do": "after_completion"}, lambda s: call_of(s, "go", 1) is not None)
    try:
        assert call_of(snapshot, "go", 0).done  # the child completed while the parent waited
        assert snapshot.run.invocations == {}
        assert probes["echo_runs"] == 1
        gate("after").set()
        outputs, new = resume(snapshot)
        [out] = outputs
        assert out["result"]["result"] == [
            {"input": {"n": 7}, "stm_before": {}, "sensory_keys": []}]
        assert probes["echo_runs"] == 1
        assert new.counters["subagent_calls"] == 0
    finally:
        gate("after").set()
        old.close()


@pytest.mark.parametrize(("name", "given", "expected"), [
    ("echo", {"n": 3}, [{"input": {"n": 3}, "stm_before": {}, "sensory_keys": []}]),
    ("remote", {"mode": "ok"}, None),
    ("pubsub", {"n": 3}, {"async": {"n": 3}}),
], ids=["internal", "deferred", "async"])
def test_after_await_nothing_is_run_again(name, given, expected, probes):
    old, state, snapshot = snapshot_when(
        {"do": "call", "name": name, "input": given, "after": True},
        lambda s: probes["after"] == 1)
    try:
        before = {k: v for k, v in probes.counts().items() if k != "after"}
        gate("after").set()
        outputs, new = resume(snapshot)
        [out] = outputs
        assert out["after"] == "after-value"  # the follow-up call keeps its own identity
        r = out["result"]
        assert r["success"] is True
        if name == "remote":
            assert r["result"]["key"] == '"k1"/r0#r0/go/c0'
        else:
            assert r["result"] == expected
        assert {k: v for k, v in probes.counts().items() if k != "after"} == before
        assert new.counters["subagent_calls"] == 0
        assert new.counters["calls_executed"] == 1  # only the unrecorded "after" call
        assert probes["after"] == 2
    finally:
        gate("after").set()
        old.close()


def test_internal_child_restored_mid_way_completes_without_rerunning_completed_actions(probes):
    old, state, snapshot = snapshot_when(
        {"do": "call", "name": "stages", "input": {}},
        lambda s: probes["s2b"] == 1)
    try:
        [inv] = snapshot.run.invocations.values()
        assert inv.memory == {"stage1": True}
        assert [r.action for r in snapshot.run.inflight.values()] == ["go", "stage2"]
        gate("child").set()
        outputs, new = resume(snapshot)
        [out] = outputs
        assert out["result"] == SubagentResult.ok([
            {"a": "done-s2a", "b": "done-s2b", "stage1": True}]).model_dump()
        assert probes["stage1_runs"] == 1 and probes["s1"] == 1  # completed: not run again
        assert probes["stage2_runs"] == 2                        # in flight: re-entered
        assert probes["s2a"] == 1                                # its recorded call replayed
        assert probes["s2b"] == 2                                # its unrecorded call re-run
        assert new.counters["actions_reentered"] == 2
        assert new.counters["subagent_calls"] == 0
    finally:
        gate("child").set()
        old.close()


def test_captured_child_failure_stays_a_failure_after_restore(probes):
    old, state, snapshot = snapshot_when(
        {"do": "call", "name": "raiser", "input": {"x": 1}, "after": True},
        lambda s: probes["after"] == 1)
    try:
        rec = call_of(snapshot, "go", 0)
        assert rec.done and rec.ok  # a failed SubagentResult is the call's recorded outcome
        gate("after").set()
        outputs, new = resume(snapshot)
        [out] = outputs
        r = out["result"]
        assert r["success"] is False
        assert "raiser" in r["error_message"] and "bad review" in r["error_message"]
        assert probes["raiser_runs"] == 1
        assert new.counters["subagent_calls"] == 0
    finally:
        gate("after").set()
        old.close()
