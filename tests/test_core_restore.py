"""Restore without Flink: snapshot a key's state mid-run, resume it on a new AgentCore."""

from __future__ import annotations

import copy
import json
import logging
import threading
from typing import Any

import pytest
from support.harness import (
    KEY,
    call_of,
    drive_until,
    new_core,
    records_of,
    resume,
    run_to_end,
    snapshot_of,
)
from support.restorable_agents import ARG_VERSION, COUNTS, Restorable, SendsTwins, Twin

from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    ToolCall,
    action,
    qualified_name,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore, CallRecord, InMemoryKeyState, Journal
from flink_agents_py.testing import ScriptedRequest

pytestmark = pytest.mark.timeout(60)

_GATE = threading.Event()
_COUNTS = COUNTS
_ARG_VERSION = ARG_VERSION
_LOCK = threading.Lock()


def _count(name: str) -> int:
    with _LOCK:
        _COUNTS[name] += 1
        return _COUNTS[name]


def _calls(state: InMemoryKeyState) -> dict[str, Any]:
    assert state.run is not None
    [rec] = state.run.inflight.values()
    return rec.calls


def _snapshot_mid_run(record: dict[str, Any], *queued: dict[str, Any]
                      ) -> tuple[AgentPlan, AgentCore, InMemoryKeyState]:
    """Run ``record`` until its action waits on c3 with c0-c2 recorded; return the old core.

    ``queued`` records are fed right after ``record``, so they wait in the key's queue.
    """
    plan = AgentPlan.from_agent(Restorable())
    core = new_core(plan)
    state = InMemoryKeyState()
    res = core.on_input(KEY, record, state)
    assert res.busy and res.outputs == [] and res.errors == []
    for q in queued:
        res = core.on_input(KEY, q, state)
        assert res.busy and res.outputs == [] and res.errors == []
    drive_until(core, state, lambda s: "3" in _calls(s))
    calls = _calls(state)
    assert [calls[str(i)].done for i in range(4)] == [True, True, True, False]
    assert calls["2"].ok is False
    # the suspended action's memory writes are not committed yet
    assert "runs" not in state.memory
    return plan, core, state


@pytest.mark.parametrize("how", ["deepcopy", "json"])
def test_restore_replays_recorded_calls_and_completes_once(how):
    _COUNTS.clear()
    _ARG_VERSION["v"] = 1
    plan, old, state = _snapshot_mid_run({"x": 3})
    try:
        snapshot = snapshot_of(state, how)
        before = dict(_COUNTS)
        assert before["stamp"] == before["fetch"] == before["lookup"] == 1

        new = new_core(plan)
        try:
            outputs, errors = run_to_end(new, snapshot)
            assert errors == []
            assert outputs == [{
                "x": 3, "a": "stamp-3", "b": {"fetched": 3, "version": 1},
                "err": ["LookupError", "nothing for 3"], "c": 6, "runs": 1, "seen": 3}]
            # completed durable calls were not executed again
            assert (_COUNTS["stamp"], _COUNTS["fetch"], _COUNTS["lookup"]) == (1, 1, 1)
            assert new.counters["actions_reentered"] == 1
            assert new.counters["calls_replayed"] == 3
            assert new.counters["calls_executed"] == 1  # only the in-flight c3
            # memory writes of the re-entered action are applied once
            assert snapshot.memory == {"runs": 1, "inputs": [3]}
            assert snapshot.run is None

            # the key goes on on the new core: a later input sees the committed memory
            res = new.on_input(KEY, {"x": 4}, snapshot)
            outs = res.outputs + run_to_end(new, snapshot)[0]
            assert [(o["x"], o["runs"], o["c"]) for o in outs] == [(4, 2, 8)]
            assert snapshot.memory == {"runs": 2, "inputs": [3, 4]}
        finally:
            new.close()
    finally:
        old.close()


def test_restore_calls_reconciler_for_a_started_call_with_unknown_outcome():
    _COUNTS.clear()
    _ARG_VERSION["v"] = 1
    plan, old, state = _snapshot_mid_run({"x": 5, "reconcile": True})
    try:
        snapshot = copy.deepcopy(state)
        outputs, errors, _ = resume(plan, snapshot)
        assert errors == []
        assert [o["c"] for o in outputs] == [5000]
        assert _COUNTS["reconcile"] == 1
        assert (_COUNTS["stamp"], _COUNTS["fetch"], _COUNTS["lookup"]) == (1, 1, 1)
    finally:
        old.close()


def test_replay_goes_by_call_identity_even_when_arguments_changed(caplog):
    _COUNTS.clear()
    _ARG_VERSION["v"] = 1
    plan, old, state = _snapshot_mid_run({"x": 2})
    try:
        snapshot = copy.deepcopy(state)
        _ARG_VERSION["v"] = 2  # the code changed between the checkpoint and the restore
        with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
            outputs, errors, _ = resume(plan, snapshot)
        assert errors == []
        assert [o["b"] for o in outputs] == [{"fetched": 2, "version": 1}]  # the recorded outcome
        assert _COUNTS["fetch"] == 1
        assert any("arguments changed" in r.getMessage() for r in caplog.records)
    finally:
        _ARG_VERSION["v"] = 1
        old.close()


# --------------------------------------------------------------------------- identical siblings

_TICKETS = {"next": 0}


def ticket() -> int:
    with _LOCK:
        _TICKETS["next"] += 1
        _COUNTS["ticket"] += 1
        return _TICKETS["next"]


def gated(t: int) -> int:
    _count("gated")
    if not _GATE.wait(10):
        raise TimeoutError("gate never opened")
    return t * 10


class Siblings(SendsTwins):
    @action(Twin)
    @staticmethod
    async def on_twin(event: Twin, ctx: RunnerContext) -> None:
        first = await ctx.durable_execute_async(ticket)
        second = await ctx.durable_execute_async(gated, first)
        ctx.short_term_memory.set(f"done.t{first}", second)
        ctx.send_event(OutputEvent(output={"id": event.id, "ticket": first, "second": second}))


def test_identical_sibling_events_each_keep_their_own_calls_after_restore():
    _COUNTS.clear()
    _TICKETS["next"] = 0
    _GATE.clear()
    plan = AgentPlan.from_agent(Siblings())
    old = new_core(plan)
    try:
        state = InMemoryKeyState()
        res = old.on_input(KEY, {"n": 1}, state)
        assert res.busy and res.outputs == []

        def both_on_second_call(s: InMemoryKeyState) -> bool:
            recs = list(s.run.inflight.values())
            return len(recs) == 2 and all("1" in r.calls for r in recs)

        drive_until(old, state, both_on_second_call)
        inflight = state.run.inflight
        assert len(inflight) == 2
        recorded = {rec.event["id"]: rec.calls["0"].value for rec in inflight.values()}
        assert sorted(recorded.values()) == [1, 2]
        assert all(not rec.calls["1"].done for rec in inflight.values())
        snapshot = copy.deepcopy(state)

        _GATE.set()
        outputs, errors, new = resume(plan, snapshot)
        assert errors == []
        assert new.counters["actions_reentered"] == 2
        assert _COUNTS["ticket"] == 2  # each sibling's first call replayed from its own record
        assert len(outputs) == 2
        assert len({o["id"] for o in outputs}) == 2
        for o in outputs:
            assert recorded[o["id"]] == o["ticket"]
            assert o["second"] == o["ticket"] * 10
        assert snapshot.memory == {"done": {"t1": 10, "t2": 20}}
    finally:
        _GATE.set()
        old.close()


# --------------------------------------------------------------------------- journal


class DictJournal(Journal):
    def __init__(self) -> None:
        self.records: dict[tuple[Any, str], CallRecord] = {}

    def append(self, key: Any, call_id: str, record: CallRecord) -> None:
        self.records[(key, call_id)] = record.model_copy(deep=True)

    def lookup(self, key: Any, call_id: str) -> CallRecord | None:
        rec = self.records.get((key, call_id))
        return rec.model_copy(deep=True) if rec is not None else None


def test_journal_supplies_outcomes_recorded_after_the_checkpoint():
    _COUNTS.clear()
    _ARG_VERSION["v"] = 1
    journal = DictJournal()
    plan = AgentPlan.from_agent(Restorable())
    old = new_core(plan, journal=journal)
    try:
        state = InMemoryKeyState()
        old.on_input(KEY, {"x": 9}, state)
        calls = _calls(state)
        assert calls["0"].done and not calls["1"].done  # c1 (fetch) in flight
        checkpoint = copy.deepcopy(state)  # taken while c1 runs

        # the old operator goes on: c1 and c2 complete and are journaled, then it dies
        drive_until(old, state, lambda s: "3" in _calls(s))
        assert (_COUNTS["fetch"], _COUNTS["lookup"]) == (1, 1)

        outputs, errors, _ = resume(plan, checkpoint, journal=journal)
        assert errors == []
        assert [(o["b"], o["err"], o["c"]) for o in outputs] == [
            ({"fetched": 9, "version": 1}, ["LookupError", "nothing for 9"], 18)]
        # c1 was in flight at the checkpoint and c2 had not started: both come from the journal
        assert _COUNTS["lookup"] == 1
        assert _COUNTS["fetch"] == 1
    finally:
        old.close()


def test_restore_with_queued_inputs_runs_them_in_order_after_the_restored_run():
    _COUNTS.clear()
    _ARG_VERSION["v"] = 1
    plan, old, state = _snapshot_mid_run({"x": 1}, {"x": 2})
    try:
        assert state.run is not None and state.run.seq == 0
        snapshot = copy.deepcopy(state)
        assert snapshot.queued() == 1
        outputs, errors, _ = resume(plan, snapshot)
        assert errors == []
        assert [(o["x"], o["runs"]) for o in outputs] == [(1, 1), (2, 2)]
        assert snapshot.memory == {"runs": 2, "inputs": [1, 2]}
        assert _COUNTS["fetch"] == 2  # once per input, none repeated
    finally:
        old.close()


# --------------------------------------------------------------------------- chat mid tool round


def tool_quick(a: int) -> int:
    """Quick tool."""
    _count("tool_quick")
    return a + 1


def tool_gated(a: int) -> int:
    """Gated tool."""
    _count("tool_gated")
    if not _GATE.wait(10):
        raise TimeoutError("gate never opened")
    return a * 100


def restore_script(req: ScriptedRequest) -> Any:
    _count("model")
    if not req.tool_results:
        return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
            ToolCall(id="q", name="tool_quick", arguments={"a": 1}),
            ToolCall(id="g", name="tool_gated", arguments={"a": 2}),
        ])
    return {m.tool_call_id: m.content for m in req.tool_results}


class ChatAgent(Agent):
    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(ChatRequestEvent(model="model", messages=[ChatMessage(content="go")]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={
            "error": event.error,
            "content": event.response.message.content if event.response else None}))


def test_chat_suspended_in_a_tool_round_resumes_after_restore():
    _COUNTS.clear()
    _GATE.clear()
    agent = ChatAgent()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(ScriptedChatModel,
                                          function=qualified_name(restore_script)))
    agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=["tool_quick", "tool_gated"]))
    agent.add_resource("tool_quick", ResourceType.TOOL, tool_quick)
    agent.add_resource("tool_gated", ResourceType.TOOL, tool_gated)
    plan = AgentPlan.from_agent(agent)
    old = new_core(plan)
    try:
        state = InMemoryKeyState()
        old.on_input(KEY, {"n": 1}, state)

        def quick_recorded(s: InMemoryKeyState) -> bool:
            quick = call_of(s, "_tool_call_action", 0)
            return quick is not None and quick.done

        drive_until(old, state, quick_recorded)
        [tool_rec] = records_of(state, "_tool_call_action")
        assert not tool_rec.calls["1"].done
        snapshot = copy.deepcopy(state)
        assert (_COUNTS["model"], _COUNTS["tool_quick"]) == (1, 1)

        _GATE.set()
        outputs, errors, _ = resume(plan, snapshot)
        assert errors == []
        assert outputs == [{"error": None, "content": json.dumps({"q": "2", "g": "200"},
                                                                  separators=(",", ":"))}]
        assert _COUNTS["tool_quick"] == 1  # recorded before the snapshot: replayed
        assert _COUNTS["model"] == 2  # first answer was committed; only the final one is new
    finally:
        _GATE.set()
        old.close()


# --------------------------------------------------------------------------- state format


def _restored_from(stored: str | dict[str, Any]) -> InMemoryKeyState:
    """Key state a host rebuilt from what it stored: the run through ``from_stored``."""
    from flink_agents_py.runtime import RunState

    state = InMemoryKeyState()
    state.run = RunState.from_stored(stored)
    return state


@pytest.mark.parametrize("written", ["current", "before_versions"])
def test_a_run_restored_from_its_stored_text_completes_once(written):
    from flink_agents_py.runtime import STATE_FORMAT_VERSION

    _COUNTS.clear()
    _ARG_VERSION["v"] = 1
    plan, old, state = _snapshot_mid_run({"x": 7})
    try:
        assert state.run is not None
        stored = state.run.to_stored()
        assert json.loads(stored)["v"] == STATE_FORMAT_VERSION == 1
        if written == "before_versions":  # what a host wrote before formats had a version
            data = json.loads(stored)
            del data["v"]
            stored = json.dumps(data)
        restored = _restored_from(stored)
        restored.memory = copy.deepcopy(state.memory)
        outputs, errors, new = resume(plan, restored)
        assert errors == []
        assert [(o["x"], o["a"], o["c"]) for o in outputs] == [(7, "stamp-7", 14)]
        assert (_COUNTS["stamp"], _COUNTS["fetch"], _COUNTS["lookup"]) == (1, 1, 1)
        assert new.counters["calls_replayed"] == 3 and new.counters["calls_executed"] == 1
    finally:
        old.close()


def test_a_run_of_a_later_format_version_is_refused_naming_the_versions():
    from flink_agents_py.api import AgentsError
    from flink_agents_py.runtime import RunState, StateFormatError

    stored = json.loads(RunState(seq=0, input={"x": 1}).to_stored())
    stored["v"] = 99
    with pytest.raises(StateFormatError) as info:
        RunState.from_stored(json.dumps(stored))
    assert isinstance(info.value, AgentsError)
    assert (info.value.found, info.value.supported) == (99, (1,))
    assert "format version 99" in str(info.value) and "reads versions 1" in str(info.value)
    with pytest.raises(StateFormatError, match=r"\$\.seq"):  # data that does not fit: where
        RunState.from_stored('{"seq": "zero"}')


# --------------------------------------------------------------------------- typed commands

_USER_MODULE = '''
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.runtime import Observer


def double(x):
    return 2 * x


def stamp(x):
    return f"s{x}"


class Calls(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        a = await ctx.durable_execute_async(double, event.input["x"])
        b = ctx.durable_execute(stamp, a)
        refused = await (await ctx.submit_subagent("nope", {}))
        ctx.send_event(OutputEvent(output=[a, b, refused.success]))


class Seen(Observer):
    def __init__(self):
        self.calls = []

    def call_started(self, key, call_id, command, replayed):
        self.calls.append([type(command).__name__, command.kind.value, command.target,
                           str(command), call_id, replayed])


if __name__ == "__main__":
    import json
    seen = Seen()
    out = AgentsExecutionEnvironment.local(observer=seen).from_list(
        [{"key": "a", "x": 4}]).apply(Calls()).collect()
    print(json.dumps({"out": out, "calls": seen.calls}))
'''


def test_an_observer_gets_each_durable_calls_typed_command_in_a_user_script(tmp_path):
    import subprocess
    import sys

    (tmp_path / "useragent.py").write_text(_USER_MODULE)
    proc = subprocess.run([sys.executable, "useragent.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["out"] == [[8, "s8", False]]
    assert got["calls"] == [
        ["RunFunction", "function", "__main__:double", "__main__:double", "r0/go/c0", False],
        ["InlineCall", "function", "__main__:stamp", "__main__:stamp", "r0/go/c1", False],
        ["Settle", "subagent_refused", "nope", "refused:nope", "r0/go/c2", False],
    ]
