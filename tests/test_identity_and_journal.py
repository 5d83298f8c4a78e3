"""Identity of durable calls across restores and dispatch modes; journal; bounded state."""

from __future__ import annotations

import copy
import threading
import time

import pytest
from _harness import new_core

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
    SerializationError,
    ToolCall,
    action,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore, CallRecord, InMemoryKeyState, SqliteJournal

pytestmark = pytest.mark.timeout(60)

CALLS: list[str] = []
RELEASE = threading.Event()


def slow_tool(name: str, delay_s: float) -> str:
    CALLS.append(name)
    if name == "late":
        RELEASE.wait(10)
    time.sleep(delay_s)
    return f"result-{name}"


def three_calls(request):  # scripted model: ask three tools once, then answer with their text
    results = request.tool_results
    if not results:
        return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
            ToolCall(id="x", name="tool_late", arguments={"name": "late", "delay_s": 0.0}),
            ToolCall(id="y", name="tool_mid", arguments={"name": "mid", "delay_s": 0.05}),
            ToolCall(id="z", name="tool_fast", arguments={"name": "fast", "delay_s": 0.0}),
        ])
    return " ".join(f"{m.tool_call_id}={m.content}" for m in results)


def tool_late(name: str, delay_s: float) -> str:
    """Late tool."""
    return slow_tool(name, delay_s)


def tool_mid(name: str, delay_s: float) -> str:
    """Mid tool."""
    return slow_tool(name, delay_s)


def tool_fast(name: str, delay_s: float) -> str:
    """Fast tool."""
    return slow_tool(name, delay_s)


def make_agent(dispatch: str) -> Agent:
    class ToolAgent(Agent):
        @action(InputEvent)
        @staticmethod
        def ask(event, ctx: RunnerContext) -> None:
            ctx.send_event(ChatRequestEvent(model="m", messages=[ChatMessage(content="go")]))

        @action(ChatResponseEvent)
        @staticmethod
        def done(event, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output=event.response.message.content))

    agent = ToolAgent()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(ScriptedChatModel, function=f"{__name__}:three_calls"))
    agent.add_resource("m", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=["tool_late", "tool_mid", "tool_fast"],
        tool_dispatch=dispatch))
    for fn in (tool_late, tool_mid, tool_fast):
        agent.add_resource(fn.__name__, ResourceType.TOOL, fn)
    return agent


def drive(core: AgentCore, key, state, stop=lambda: False, timeout_s=10.0):
    outputs = []
    res = core.on_input(key, "go", state) if state.run is None and not state.queued() else core.advance(key, state)
    outputs += res.outputs
    deadline = time.monotonic() + timeout_s
    while res.busy and not stop() and time.monotonic() < deadline:
        core.wait_for(key, 0.05)
        res = core.advance(key, state)
        outputs += res.outputs
    return outputs


def _tool_records(state) -> dict[str, CallRecord]:
    return {o: c for a in state.run.inflight.values() if a.action == "_tool_call_action"
            for o, c in a.calls.items() if c.done}


@pytest.mark.parametrize(("before", "after"), [("concurrent", "serial"), ("serial", "concurrent")])
def test_switching_dispatch_mode_between_checkpoint_and_restore_finds_recorded_outcomes(before, after):
    """A snapshot holds some finished tool calls (out of order under concurrent dispatch).

    Restored under the other dispatch mode, only the unfinished calls run again, and each
    result lands on its own call id.
    """
    CALLS.clear()
    RELEASE.clear()
    if before == "serial":
        RELEASE.set()  # serial runs 'late' first: let it finish so the snapshot holds it
    want = 2 if before == "concurrent" else 1
    core = new_core(AgentPlan.from_agent(make_agent(before)))
    state = InMemoryKeyState()
    try:
        drive(core, "k", state, stop=lambda: state.run is not None and len(_tool_records(state)) >= want)
        snapshot = copy.deepcopy(state)
    finally:
        RELEASE.set()
        core.close()
    recorded = _tool_records(snapshot)
    assert len(recorded) >= want
    if before == "concurrent":
        assert "0" not in recorded, "'late' (first in the request) was held back, yet recorded"
    CALLS.clear()
    restored = new_core(AgentPlan.from_agent(make_agent(after)))
    try:
        outputs = drive(restored, "k", snapshot)
    finally:
        restored.close()
    assert outputs == ['x="result-late" y="result-mid" z="result-fast"']
    names = {"0": "late", "1": "mid", "2": "fast"}
    assert sorted(CALLS) == sorted(n for o, n in names.items() if o not in recorded)


def test_run_state_is_dropped_when_the_run_completes():
    class Once(Agent):
        @action(InputEvent)
        @staticmethod
        async def on_input(event, ctx):
            v = await ctx.durable_execute_async(lambda x: x + 1, event.input)
            ctx.send_event(OutputEvent(output=v))

    core = new_core(AgentPlan.from_agent(Once()))
    state = InMemoryKeyState()
    try:
        for i in range(20):
            state.push_input(i)
        res = core.advance("k", state)
        outs = list(res.outputs)
        while res.busy:
            core.wait_for("k", 1.0)
            res = core.advance("k", state)
            outs += res.outputs
    finally:
        core.close()
    assert outs == list(range(1, 21))
    assert state.run is None and state.queued() == 0
    assert "k" not in core.live_keys()


def test_durable_call_argument_without_json_form_names_call_and_type():
    class Bad(Agent):
        @action(InputEvent)
        @staticmethod
        def on_input(event, ctx):
            ctx.durable_execute(len, {1, 2})

    core = AgentCore(AgentPlan.from_agent(Bad()))
    res = core.on_input("k", 1, InMemoryKeyState())
    (err,) = res.errors
    assert err.error_type == "SerializationError"
    assert "r0/on_input/c0" in err.message and "set" in err.message and "builtins:len" in err.message


def test_sqlite_journal_round_trip_and_pruning(tmp_path):
    j = SqliteJournal(str(tmp_path / "j.db"), retention_s=10)
    rec = CallRecord(digest="d", done=True, value={"a": 1})
    j.append({"k": 1}, "r0/act/c0", rec)
    j.append({"k": 1}, "r1/act/c0", rec)
    j.append("other", "r0/act/c0", CallRecord(digest="e", done=True, ok=False,
                                              error_type="builtins:ValueError", error_message="x"))
    assert j.lookup({"k": 1}, "r0/act/c0") == rec
    assert j.lookup("other", "r0/act/c0").error_message == "x"
    assert j.lookup({"k": 1}, "r9/act/c0") is None
    j.run_completed({"k": 1}, "r0", now_s=1000.0)
    j.run_completed("nobody", "r0", now_s=1005.0)  # within retention: r0 of {"k":1} kept
    assert j.lookup({"k": 1}, "r0/act/c0") == rec
    j.run_completed("nobody", "r0", now_s=1011.0)  # past retention: pruned; r1 still open
    assert j.lookup({"k": 1}, "r0/act/c0") is None
    assert j.lookup({"k": 1}, "r1/act/c0") == rec
    assert j.count() == 2


def test_serialization_error_is_a_durable_execution_error():
    from flink_agents_py.api import DurableExecutionError

    assert issubclass(SerializationError, DurableExecutionError)
