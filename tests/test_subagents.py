"""Sub-agents: internal children, deferred and async external setups.

Local-runner tests for what a calling action sees, and core-level restores (``AgentCore`` on
an ``InMemoryKeyState``, deep-copied mid-run to simulate a checkpoint, resumed on a new core)
for durability. Fake remotes count the requests they receive.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

import _harness
import pytest
from _harness import KEY, call_of, new_core, poll_until, run_to_end, snapshot_of
from pydantic import ValidationError

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    AsyncSubagentSetup,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    DeferredSubagentSetup,
    Event,
    InputEvent,
    InternalSubagent,
    MessageRole,
    OutputEvent,
    PlanError,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    RunStatus,
    SubagentResult,
    action,
    qualified_name,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.integrations.chat_models._scripted import ScriptedRequest
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore, InMemoryKeyState

pytestmark = pytest.mark.timeout(60)

COUNTS: collections.Counter[str] = collections.Counter()
LOG: list[str] = []
PREPARED: list[tuple[str, str]] = []
REMOTE_RUNS: dict[str, Any] = {}
_LOCK = threading.Lock()
CHILD_GATE = threading.Event()     # gated child calls wait on it
CHILD_STARTED = threading.Event()  # set when a gated child call is entered
DEFERRED_GATE = threading.Event()  # gated deferred calls wait on it
ASYNC_GATE = threading.Event()     # remote runs asked to wait report "running" until set
AFTER_GATE = threading.Event()     # the parent's follow-up call waits on it
_GATES = (CHILD_GATE, DEFERRED_GATE, ASYNC_GATE, AFTER_GATE)
BARRIER: list[threading.Barrier] = []


@pytest.fixture(autouse=True)
def _reset():
    COUNTS.clear()
    LOG.clear()
    PREPARED.clear()
    REMOTE_RUNS.clear()
    CHILD_STARTED.clear()
    for g in _GATES:
        g.clear()
    BARRIER[:] = [threading.Barrier(3, timeout=5)]
    yield
    for g in _GATES:
        g.set()
    BARRIER[0].abort()


def _count(name: str) -> int:
    with _LOCK:
        COUNTS[name] += 1
        return COUNTS[name]


def _log(entry: str) -> None:
    with _LOCK:
        LOG.append(entry)


# --------------------------------------------------------------------------- fakes


def script(req: ScriptedRequest) -> Any:
    """The fake model: answers with the system messages it was given."""
    _count("model")
    return " | ".join(m.content for m in req.messages if m.role == MessageRole.SYSTEM)


def durable(tag: str) -> str:
    _count(tag)
    return f"done-{tag}"


def gated_child_call(tag: str) -> str:
    _count(tag)
    CHILD_STARTED.set()
    assert CHILD_GATE.wait(10), "child gate never opened"
    return f"done-{tag}"


def wait_child_started() -> bool:
    return CHILD_STARTED.wait(10)


def barrier_wait(tag: str) -> str:
    _count("barrier")
    BARRIER[0].wait()  # raises BrokenBarrierError unless three calls are in flight at once
    return tag


def slow(tag: str) -> str:
    time.sleep(0.15)
    _log(f"{tag}:done")
    return tag


def gated_after(value: Any) -> Any:
    _count("after")
    assert AFTER_GATE.wait(10), "after gate never opened"
    return value


def wait_polls(n: int) -> int:
    deadline = time.monotonic() + 10
    while COUNTS["status:running"] < n:
        assert time.monotonic() < deadline, "the remote run was not polled"
        time.sleep(0.005)
    return COUNTS["status:running"]


class Remote(DeferredSubagentSetup):
    """A deferred external sub-agent; ``input["mode"]`` picks its behaviour."""

    endpoint: str = ""

    def prepare(self, ctx: RunnerContext, input: Any, session_id: str, call_id: str):
        _count("prepare")
        with _LOCK:
            PREPARED.append((session_id, call_id))
        mode = input.get("mode") if isinstance(input, dict) else None
        if mode == "prepare_raises":
            raise ConnectionError("cannot reach the remote")
        key = f"{session_id}#{call_id}"

        def call() -> SubagentResult:
            _count("deferred")
            if mode in ("gated", "gated_reconcile"):
                assert DEFERRED_GATE.wait(10), "deferred gate never opened"
            if mode == "raise":
                raise RuntimeError("remote exploded")
            if mode == "error":
                return SubagentResult.error("remote said no")
            return SubagentResult.ok({"echo": input, "key": key, "endpoint": self.endpoint})

        def reconcile() -> SubagentResult:
            _count("reconcile")
            return SubagentResult.ok({"reconciled": key})

        return key, call, (reconcile if mode == "gated_reconcile" else None)


class Pubsub(AsyncSubagentSetup):
    """An async external sub-agent: runs complete at once unless ``input["wait"]``."""

    def call_submit_request(self, session_id: str, call_id: str, input: Any) -> None:
        _count("submit")
        with _LOCK:
            REMOTE_RUNS[call_id] = input

    def call_query_status(self, session_id: str, call_id: str) -> RunStatus:
        _count("status")
        if call_id not in REMOTE_RUNS:
            return RunStatus.not_started()
        given = REMOTE_RUNS[call_id]
        if isinstance(given, dict) and given.get("fail"):
            return RunStatus.failed("remote broke")
        if isinstance(given, dict) and given.get("wait") and not ASYNC_GATE.is_set():
            _count("status:running")
            return RunStatus.running()
        return RunStatus.completed()

    def call_fetch_result(self, session_id: str, call_id: str) -> SubagentResult:
        _count("fetch")
        return SubagentResult.ok({"async": REMOTE_RUNS[call_id]})

    def call_cancel_request(self, session_id: str, call_id: str) -> None:
        _count("cancel")


# --------------------------------------------------------------------------- children


class Stage2(Event):
    pass


class Next(Event):
    pass


class EchoChild(Agent):
    @action(InputEvent)
    @staticmethod
    def echo(event: InputEvent, ctx: RunnerContext) -> None:
        _count("echo_runs")
        stm = ctx.short_term_memory
        before = stm.to_dict()
        stm.set("count", stm.get("count", 0) + 1)
        ctx.send_event(OutputEvent(output={
            "input": event.input, "stm_before": before,
            "sensory_keys": sorted(ctx.sensory_memory.to_dict())}))


class PromptChild(Agent):
    """Asks its own chat model twice: by ``ctx.chat`` and by a ``ChatRequestEvent``."""

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        r = await ctx.chat("cm", [ChatMessage(content="by chat")])
        ctx.send_event(ChatRequestEvent(model="cm", messages=[ChatMessage(content="by event")]))
        ctx.send_event(OutputEvent(output={"via": "ctx.chat", "system": r.message.content}))

    @action(ChatResponseEvent)
    @staticmethod
    def answered(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"via": "event", "system": event.response.message.content}))


class OutputThenMoreChild(Agent):
    """Sends an output, then an event whose action sends another output."""

    @action(InputEvent)
    @staticmethod
    def first(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output="first"))
        ctx.send_event(Next())

    @action(Next)
    @staticmethod
    def second(event: Next, ctx: RunnerContext) -> None:
        _count("second_runs")
        ctx.send_event(OutputEvent(output="second"))


class BarrierChild(Agent):
    @action(InputEvent)
    @staticmethod
    async def meet(event: InputEvent, ctx: RunnerContext) -> None:
        tag = await ctx.durable_execute_async(barrier_wait, event.input["tag"])
        ctx.send_event(OutputEvent(output={"tag": tag}))


class CancelChild(Agent):
    @action(InputEvent)
    @staticmethod
    async def first(event: InputEvent, ctx: RunnerContext) -> None:
        _count("first_runs")
        await ctx.durable_execute_async(gated_child_call, "first_call")
        ctx.send_event(Next())
        ctx.send_event(OutputEvent(output="first"))

    @action(Next)
    @staticmethod
    def successor(event: Next, ctx: RunnerContext) -> None:
        _count("successor_runs")
        ctx.send_event(OutputEvent(output="successor"))


class RaisingChild(Agent):
    @action(InputEvent)
    @staticmethod
    def judge(event: InputEvent, ctx: RunnerContext) -> None:
        _count("raiser_runs")
        raise ValueError("bad review")


class FailWithSiblingChild(Agent):
    @action(InputEvent)
    @staticmethod
    def fail_now(event: InputEvent, ctx: RunnerContext) -> None:
        raise KeyError("missing field")

    @action(InputEvent)
    @staticmethod
    async def slow_sibling(event: InputEvent, ctx: RunnerContext) -> None:
        await ctx.durable_execute_async(slow, "sibling")
        ctx.send_event(Next())

    @action(Next)
    @staticmethod
    def successor(event: Next, ctx: RunnerContext) -> None:
        _count("successor_runs")


class StagesChild(Agent):
    @action(InputEvent)
    @staticmethod
    async def stage1(event: InputEvent, ctx: RunnerContext) -> None:
        _count("stage1_runs")
        await ctx.durable_execute_async(durable, "s1")
        ctx.short_term_memory.set("stage1", True)
        ctx.send_event(Stage2())

    @action(Stage2)
    @staticmethod
    async def stage2(event: Stage2, ctx: RunnerContext) -> None:
        _count("stage2_runs")
        a = await ctx.durable_execute_async(durable, "s2a")
        b = await ctx.durable_execute_async(gated_child_call, "s2b")
        ctx.send_event(OutputEvent(output={"a": a, "b": b,
                                           "stage1": ctx.short_term_memory.get("stage1")}))


# --------------------------------------------------------------------------- parent


class Parent(Agent):
    """Runs the scenario named by ``input["do"]``; outputs what it saw."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        do = event.input["do"]
        out: dict[str, Any] = await SCENARIOS[do](event.input, ctx)
        ctx.send_event(OutputEvent(output={"do": do, **out}))


def dump(r: SubagentResult) -> dict[str, Any]:
    return r.model_dump()


async def sc_call(inp: dict, ctx: RunnerContext) -> dict:
    """Submit ``inp["name"]`` with ``inp["input"]``; await; optionally a gated call after."""
    h = await ctx.submit_subagent(inp["name"], inp.get("input"))
    r = await h
    out: dict[str, Any] = {"result": dump(r)}
    if inp.get("after"):
        out["after"] = await ctx.durable_execute_async(gated_after, "after-value")
    return out


async def sc_memory(inp: dict, ctx: RunnerContext) -> dict:
    ctx.short_term_memory.set("p", 1)
    ctx.sensory_memory.set("ps", 1)
    echo = ctx.get_resource("echo", ResourceType.AGENT)
    first = await (await echo.submit(ctx, {"n": 1}))
    second = await (await echo.submit(ctx, {"n": 2}))
    return {"first": dump(first), "second": dump(second),
            "parent_stm": ctx.short_term_memory.to_dict(),
            "parent_sensory": ctx.sensory_memory.to_dict()}


async def sc_many(inp: dict, ctx: RunnerContext) -> dict:
    h1 = await ctx.submit_subagent("barrier", {"tag": "one"})
    h2 = await ctx.submit_subagent("barrier", {"tag": "two"})
    h3 = await ctx.submit_subagent("barrier", {"tag": "three"})
    hd = await ctx.submit_subagent("remote", {"n": 4})
    ha = await ctx.submit_subagent("pubsub", {"n": 5})
    got = {"three": await h3, "remote": await hd, "one": await h1, "pubsub": await ha,
           "two": await h2, "one_again": await h1}
    return {k: dump(v) for k, v in got.items()}


async def sc_cancel_internal(inp: dict, ctx: RunnerContext) -> dict:
    h = await ctx.submit_subagent("canceller", {"x": 1})
    await ctx.durable_execute_async(wait_child_started)
    await h.cancel()
    CHILD_GATE.set()  # let the child's in-flight action retire
    r = await h
    return {"result": dump(r), "again": dump(await h)}


async def sc_cancel_internal_before_start(inp: dict, ctx: RunnerContext) -> dict:
    h = await ctx.submit_subagent("canceller", {"x": 1})
    await h.cancel()
    CHILD_GATE.set()
    return {"result": dump(await h)}


async def sc_cancel_deferred(inp: dict, ctx: RunnerContext) -> dict:
    h = await ctx.submit_subagent("remote", {"mode": "ok"})
    await h.cancel()
    return {"result": dump(await h)}


async def sc_cancel_async(inp: dict, ctx: RunnerContext) -> dict:
    h = await ctx.submit_subagent("pubsub", {"wait": True})
    await h.cancel()
    r = await h
    await h.cancel()  # a finished call is unaffected
    return {"result": dump(r), "again": dump(await h)}


async def sc_fail_with_sibling(inp: dict, ctx: RunnerContext) -> dict:
    h = await ctx.submit_subagent("failer", {"x": 1})
    r = await h
    _log("parent:result")
    return {"result": dump(r)}


async def sc_refused(inp: dict, ctx: RunnerContext) -> dict:
    unknown = await (await ctx.submit_subagent("nope", 1))
    not_agent = await (await ctx.submit_subagent("double", 1))
    return {"unknown": dump(unknown), "not_agent": dump(not_agent)}


async def sc_after_completion(inp: dict, ctx: RunnerContext) -> dict:
    """Submit an internal child, then wait on another call while the child completes."""
    h = await ctx.submit_subagent("echo", {"n": 7})
    await ctx.durable_execute_async(gated_after, "after")
    return {"result": dump(await h)}


async def sc_wait_other_key(inp: dict, ctx: RunnerContext) -> dict:
    """Runs on another key while key "a" polls its remote run: proves polling is off-thread."""
    polls = await ctx.durable_execute_async(wait_polls, 2)
    _log("b:polled")
    ASYNC_GATE.set()
    return {"polls_seen": polls >= 2}


SCENARIOS = {
    "call": sc_call, "memory": sc_memory, "many": sc_many,
    "cancel_internal": sc_cancel_internal,
    "cancel_internal_before_start": sc_cancel_internal_before_start,
    "cancel_deferred": sc_cancel_deferred, "cancel_async": sc_cancel_async,
    "fail_with_sibling": sc_fail_with_sibling, "refused": sc_refused,
    "after_completion": sc_after_completion, "wait_other_key": sc_wait_other_key,
}


def internal(child: Agent | type[Agent], **kw: Any) -> ResourceDescriptor:
    return ResourceDescriptor(InternalSubagent, agent=child, **kw)


def prompt_child() -> Agent:
    child = PromptChild()
    child.add_resource("cc", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(ScriptedChatModel, function=qualified_name(script)))
    child.add_resource("cm", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="cc", prompt="Review {product} for {audience} ({missing})."))
    return child


def make_parent() -> Agent:
    p = Parent()
    p.add_resource("echo", ResourceType.AGENT, internal(EchoChild, description="echoes"))
    p.add_resource("prompted", ResourceType.AGENT, internal(prompt_child()))
    p.add_resource("barrier", ResourceType.AGENT, internal(BarrierChild))
    p.add_resource("output_then_more", ResourceType.AGENT, internal(OutputThenMoreChild))
    p.add_resource("canceller", ResourceType.AGENT, internal(CancelChild))
    p.add_resource("raiser", ResourceType.AGENT, internal(RaisingChild))
    p.add_resource("failer", ResourceType.AGENT, internal(FailWithSiblingChild))
    p.add_resource("stages", ResourceType.AGENT, internal(StagesChild))
    p.add_resource("remote", ResourceType.AGENT, ResourceDescriptor(
        Remote, endpoint="http://remote", description="a remote reviewer",
        input_schema='{"type": "object"}'))
    p.add_resource("pubsub", ResourceType.AGENT, ResourceDescriptor(
        Pubsub, status_poll_interval_millis=5))
    p.add_resource("double", ResourceType.TOOL, durable)
    return p


PLAN = AgentPlan.from_agent(make_parent())


def run_local(*records: dict[str, Any]):
    return AgentsExecutionEnvironment.local().from_list(list(records)).apply(PLAN).run()


def one(record: dict[str, Any]) -> dict[str, Any]:
    res = run_local({"key": "a", **record})
    assert res.errors == [], [(e.action, e.error_type, e.message) for e in res.errors]
    [out] = res.outputs
    return out


# --------------------------------------------------------------------------- core-level driving


def snapshot_when(record: dict[str, Any], done) -> tuple[AgentCore, InMemoryKeyState, InMemoryKeyState]:
    """Run ``record`` on a core until ``done(state)``; return the core, state and a copy."""
    core = new_core(PLAN)
    state = InMemoryKeyState()
    res = core.on_input(KEY, record, state)
    assert res.errors == [] and res.outputs == []
    poll_until(core, state, done)
    return core, state, snapshot_of(state)


def resume(snapshot: InMemoryKeyState) -> tuple[list[Any], AgentCore]:
    outputs, errors, new = _harness.resume(PLAN, snapshot)
    assert errors == [], [(e.action, e.error_type, e.message) for e in errors]
    assert snapshot.run is None
    return outputs, new


# --------------------------------------------------------------------------- internal sub-agents


def test_internal_child_prompt_placeholders_come_from_input_fields():
    out = one({"do": "call", "name": "prompted",
               "input": {"product": "shoe", "audience": "runners", "extra": "ignored"}})
    r = out["result"]
    assert r["success"] is True, r
    text = "Review shoe for runners ({missing})."  # unfilled stays literal, extra is ignored
    assert r["result"] == [{"via": "ctx.chat", "system": text}, {"via": "event", "system": text}]
    assert COUNTS["model"] == 2


def test_internal_child_result_is_a_list_even_with_one_output():
    out = one({"do": "call", "name": "echo", "input": {"n": 1}})
    r = out["result"]
    assert r == SubagentResult.ok([
        {"input": {"n": 1}, "stm_before": {}, "sensory_keys": ["_subagent"]}]).model_dump()


def test_internal_child_result_holds_outputs_of_actions_triggered_after_an_output():
    # the events an action sends are delivered, in order, when it completes: an OutputEvent
    # sent first must not close the call before the later events' actions ran
    out = one({"do": "call", "name": "output_then_more", "input": {}})
    assert out["result"] == SubagentResult.ok(["first", "second"]).model_dump()
    assert COUNTS["second_runs"] == 1


def test_internal_child_memory_is_isolated_per_call():
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
        assert child["sensory_keys"] == ["_subagent"]  # the parent's sensory memory is not shared
    assert out["parent_stm"] == {"p": 1}
    assert out["parent_sensory"] == {"ps": 1}
    assert state.memory == {"p": 1}  # the children's writes never reached the parent's memory
    assert COUNTS["echo_runs"] == 2


def test_several_handles_open_at_once_awaited_in_any_order():
    out = one({"do": "many"})
    assert COUNTS["barrier"] == 3  # the three internal calls met at the barrier: all in flight
    assert out["one"] == SubagentResult.ok([{"tag": "one"}]).model_dump()
    assert out["two"]["result"] == [{"tag": "two"}]
    assert out["three"]["result"] == [{"tag": "three"}]
    assert out["one_again"] == out["one"]
    assert out["remote"]["success"] and out["remote"]["result"]["echo"] == {"n": 4}
    assert out["remote"]["result"]["endpoint"] == "http://remote"
    assert out["pubsub"] == SubagentResult.ok({"async": {"n": 5}}).model_dump()
    assert (COUNTS["deferred"], COUNTS["submit"], COUNTS["fetch"]) == (1, 1, 1)


# --------------------------------------------------------------------------- cancellation


def test_cancel_internal_stops_successor_dispatch():
    out = one({"do": "cancel_internal"})
    r = out["result"]
    assert r["success"] is False
    assert "cancelled" in r["error_message"] and "canceller" in r["error_message"]
    assert r["cancelled"] is True
    assert out["again"] == r
    assert COUNTS["first_runs"] == 1 and COUNTS["first_call"] == 1
    assert COUNTS["successor_runs"] == 0


def test_cancel_internal_before_it_started_never_runs_the_child():
    out = one({"do": "cancel_internal_before_start"})
    r = out["result"]
    assert r["success"] is False and r["cancelled"] is True, r
    assert COUNTS["first_runs"] == 0


def test_cancel_deferred_not_yet_awaited_never_runs_its_call():
    out = one({"do": "cancel_deferred"})
    r = out["result"]
    assert r["success"] is False and r["cancelled"] is True
    assert "cancelled" in r["error_message"] and "remote" in r["error_message"]
    assert COUNTS["deferred"] == 0


def test_cancel_async_sends_one_cancel_request():
    out = one({"do": "cancel_async"})
    r = out["result"]
    assert r["success"] is False and r["cancelled"] is True
    assert "cancelled" in r["error_message"] and "pubsub" in r["error_message"]
    assert out["again"] == r
    assert COUNTS["submit"] == 1
    assert COUNTS["cancel"] == 1
    assert COUNTS["fetch"] == 0


# --------------------------------------------------------------------------- failures


def test_failing_child_action_gives_a_failed_result_and_the_parent_goes_on():
    out = one({"do": "call", "name": "raiser", "input": {"x": 1}})
    r = out["result"]
    assert r["success"] is False
    assert "raiser" in r["error_message"]
    assert "ValueError" in r["error_message"] and "bad review" in r["error_message"]


def test_failure_with_a_sibling_in_flight_waits_for_it_and_dispatches_no_successor():
    out = one({"do": "fail_with_sibling"})
    r = out["result"]
    assert r["success"] is False
    assert "failer" in r["error_message"] and "missing field" in r["error_message"]
    assert LOG == ["sibling:done", "parent:result"]  # the result came after the sibling retired
    assert COUNTS["successor_runs"] == 0


def test_failed_async_remote_run_gives_a_failed_result():
    out = one({"do": "call", "name": "pubsub", "input": {"fail": True}})
    r = out["result"]
    assert r["success"] is False and "remote broke" in r["error_message"]
    assert "pubsub" in r["error_message"]


def test_deferred_call_returning_an_error_result_is_a_failed_result():
    out = one({"do": "call", "name": "remote", "input": {"mode": "error"}})
    assert out["result"] == SubagentResult.error("remote said no").model_dump()


def test_unknown_and_non_agent_names_give_failed_results_naming_them():
    out = one({"do": "refused"})
    assert out["unknown"]["success"] is False and "'nope'" in out["unknown"]["error_message"]
    assert out["not_agent"]["success"] is False and "'double'" in out["not_agent"]["error_message"]
    assert COUNTS["double"] == 0


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


def test_async_submits_once_and_polling_does_not_block_other_keys():
    res = run_local({"key": "a", "do": "call", "name": "pubsub", "input": {"wait": True}},
                    {"key": "b", "do": "wait_other_key"})
    assert res.errors == []
    assert [o["do"] for o in res.outputs] == ["wait_other_key", "call"]
    assert res.outputs[0]["polls_seen"] is True
    assert res.outputs[1]["result"] == SubagentResult.ok({"async": {"wait": True}}).model_dump()
    assert COUNTS["submit"] == 1 and COUNTS["fetch"] == 1
    assert COUNTS["status:running"] >= 2


# --------------------------------------------------------------------------- plan checks


def test_external_setup_instance_is_refused_with_how_to_register():
    p = Parent()
    p.add_resource("remote", ResourceType.AGENT, Remote(endpoint="http://x"))
    p.add_resource("pubsub", ResourceType.AGENT, Pubsub())
    with pytest.raises(PlanError) as ei:
        AgentPlan.from_agent(p)
    problems = ei.value.problems
    assert len(problems) == 2
    assert "'remote'" in problems[0] and "by descriptor" in problems[0]
    assert f"ResourceDescriptor(clazz='{Remote.__module__}.Remote'" in problems[0]
    assert f"ResourceDescriptor(clazz='{Pubsub.__module__}.Pubsub'" in problems[1]


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


def test_deferred_prepare_gets_the_same_ids_after_restore_and_reconciles():
    old, state, snapshot = snapshot_when(
        {"do": "call", "name": "remote", "input": {"mode": "gated_reconcile"}},
        lambda s: COUNTS["deferred"] == 1)
    try:
        assert not call_of(snapshot, "go", 0).done
        DEFERRED_GATE.set()
        outputs, _ = resume(snapshot)
        assert len(PREPARED) == 2
        assert PREPARED[0] == PREPARED[1]
        session_id, call_id = PREPARED[0]
        assert session_id == '"k1"/r0' and call_id == "r0/go/c0"
        [out] = outputs
        assert out["result"]["result"] == {"reconciled": f"{session_id}#{call_id}"}
        assert COUNTS["reconcile"] == 1 and COUNTS["deferred"] == 1
    finally:
        DEFERRED_GATE.set()
        old.close()


def test_deferred_without_reconciler_runs_again_with_the_same_key_after_restore():
    old, state, snapshot = snapshot_when(
        {"do": "call", "name": "remote", "input": {"mode": "gated"}},
        lambda s: COUNTS["deferred"] == 1)
    try:
        DEFERRED_GATE.set()
        outputs, _ = resume(snapshot)
        assert PREPARED[0] == PREPARED[1]
        [out] = outputs
        assert out["result"]["result"]["key"] == "#".join(PREPARED[0])
        assert COUNTS["deferred"] == 2  # started, outcome recorded nowhere: at-least-once
    finally:
        DEFERRED_GATE.set()
        old.close()


def test_async_crash_after_submit_does_not_submit_again_and_polling_resumes():
    old, state, snapshot = snapshot_when(
        {"do": "call", "name": "pubsub", "input": {"wait": True}},
        lambda s: COUNTS["status:running"] >= 1)
    try:
        assert call_of(snapshot, "go", 1).done      # the submit is recorded
        assert not call_of(snapshot, "go", 0).done  # the result is not
        polls_before = COUNTS["status"]
        ASYNC_GATE.set()
        outputs, new = resume(snapshot)
        [out] = outputs
        assert out["result"] == SubagentResult.ok({"async": {"wait": True}}).model_dump()
        assert COUNTS["submit"] == 1
        assert COUNTS["status"] > polls_before
        assert new.counters["calls_replayed"] >= 1
    finally:
        ASYNC_GATE.set()
        old.close()


def test_internal_child_completed_before_the_checkpoint_is_not_run_again():
    old, state, snapshot = snapshot_when(
        {"do": "after_completion"}, lambda s: call_of(s, "go", 1) is not None)
    try:
        assert call_of(snapshot, "go", 0).done  # the child completed while the parent waited
        assert snapshot.run.invocations == {}
        assert COUNTS["echo_runs"] == 1
        AFTER_GATE.set()
        outputs, new = resume(snapshot)
        [out] = outputs
        assert out["result"]["result"] == [
            {"input": {"n": 7}, "stm_before": {}, "sensory_keys": ["_subagent"]}]
        assert COUNTS["echo_runs"] == 1
        assert new.counters["subagent_calls"] == 0
    finally:
        AFTER_GATE.set()
        old.close()


@pytest.mark.parametrize(("name", "given", "expected"), [
    ("echo", {"n": 3}, [{"input": {"n": 3}, "stm_before": {}, "sensory_keys": ["_subagent"]}]),
    ("remote", {"mode": "ok"}, None),
    ("pubsub", {"n": 3}, {"async": {"n": 3}}),
], ids=["internal", "deferred", "async"])
def test_after_await_nothing_is_run_again(name, given, expected):
    old, state, snapshot = snapshot_when(
        {"do": "call", "name": name, "input": given, "after": True},
        lambda s: COUNTS["after"] == 1)
    try:
        before = {k: v for k, v in COUNTS.items() if k != "after"}
        AFTER_GATE.set()
        outputs, new = resume(snapshot)
        [out] = outputs
        assert out["after"] == "after-value"  # the follow-up call keeps its own identity
        r = out["result"]
        assert r["success"] is True
        if name == "remote":
            assert r["result"]["key"] == '"k1"/r0#r0/go/c0'
        else:
            assert r["result"] == expected
        assert {k: v for k, v in COUNTS.items() if k != "after"} == before
        assert new.counters["subagent_calls"] == 0
        assert new.counters["calls_executed"] == 1  # only the unrecorded "after" call
        assert COUNTS["after"] == 2
    finally:
        AFTER_GATE.set()
        old.close()


def test_internal_child_restored_mid_way_completes_without_rerunning_completed_actions():
    old, state, snapshot = snapshot_when(
        {"do": "call", "name": "stages", "input": {}},
        lambda s: COUNTS["s2b"] == 1)
    try:
        [inv] = snapshot.run.invocations.values()
        assert inv.memory == {"stage1": True}
        assert [r.action for r in snapshot.run.inflight.values()] == ["go", "stage2"]
        CHILD_GATE.set()
        outputs, new = resume(snapshot)
        [out] = outputs
        assert out["result"] == SubagentResult.ok([
            {"a": "done-s2a", "b": "done-s2b", "stage1": True}]).model_dump()
        assert COUNTS["stage1_runs"] == 1 and COUNTS["s1"] == 1  # completed: not run again
        assert COUNTS["stage2_runs"] == 2                        # in flight: re-entered
        assert COUNTS["s2a"] == 1                                # its recorded call replayed
        assert COUNTS["s2b"] == 2                                # its unrecorded call re-run
        assert new.counters["actions_reentered"] == 2
        assert new.counters["subagent_calls"] == 0
    finally:
        CHILD_GATE.set()
        old.close()


def test_captured_child_failure_stays_a_failure_after_restore():
    old, state, snapshot = snapshot_when(
        {"do": "call", "name": "raiser", "input": {"x": 1}, "after": True},
        lambda s: COUNTS["after"] == 1)
    try:
        rec = call_of(snapshot, "go", 0)
        assert rec.done and rec.ok  # a failed SubagentResult is the call's recorded outcome
        AFTER_GATE.set()
        outputs, new = resume(snapshot)
        [out] = outputs
        r = out["result"]
        assert r["success"] is False
        assert "raiser" in r["error_message"] and "bad review" in r["error_message"]
        assert COUNTS["raiser_runs"] == 1
        assert new.counters["subagent_calls"] == 0
    finally:
        AFTER_GATE.set()
        old.close()
