"""Contracts of ``ctx.chat``: a lazy durable future of a whole chat on a private route.

Local-runner tests for what an action sees; core-level restores (``AgentCore`` driven on an
``InMemoryKeyState``, deep-copied mid-run to simulate a checkpoint, resumed on a new core)
for replay. The fake model is a ``ScriptedChatModel`` whose function answers by the last
user message and counts the requests it receives.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from pydantic import BaseModel
from support.harness import KEY, call_of, new_core, poll_until, records_of, resume, run_to_end
from support.probes import count, current, gate, note

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponse,
    ChatResponseError,
    ChatResponseEvent,
    Event,
    InputEvent,
    InternalSubagent,
    MessageRole,
    OutputEvent,
    ProviderError,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    TokenUsage,
    ToolCall,
    ToolRequestEvent,
    ToolResponseEvent,
    UnsupportedAwaitError,
    action,
    qualified_name,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore, InMemoryKeyState, Observer
from flink_agents_py.testing import ScriptedRequest

pytestmark = pytest.mark.timeout(60)

class Rating(BaseModel):
    score: int
    why: str


FULL = ChatResponse(
    message=ChatMessage(role=MessageRole.ASSISTANT, content='{"score": 4, "why": "full"}'),
    model="fake-model-7", response_id="resp-123",
    usage=TokenUsage(input_tokens=11, output_tokens=7), finish_reason="stop",
    metadata={"provider": "fake", "latency_ms": 5, "nested": {"a": [1, 2]}},
)


def script(req: ScriptedRequest) -> Any:
    """The fake model. The last user message picks the behaviour (``verb:arg``)."""
    text = req.last_user_text
    verb, _, arg = text.partition(":")
    results = req.tool_results
    count("model")
    n = count(f"model:{verb}:{'r2' if results else 'r1'}")
    note("model")
    if verb == "plain":
        return f"echo:{arg}"
    if verb == "system":  # answers with the system messages it was given
        return " | ".join(m.content for m in req.messages if m.role == MessageRole.SYSTEM)
    if verb == "full":
        return FULL
    if verb == "boom":
        raise ProviderError("upstream exploded", status_code=503)
    if verb == "notjson":
        return "this is not json"
    if verb == "offschema":  # JSON, but not a Rating
        return {"grade": "A"}
    if verb == "twin":
        if arg == "gated" and n == 2:
            assert gate("model").wait(10)
        return f"answer-{n}"
    if verb in ("tool", "gated", "gated2"):  # one tool round, then a rating from the result
        if not results:
            name = "double" if verb == "tool" else "gated_double"
            return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
                ToolCall(id="t1", name=name, arguments={"x": int(arg)})])
        if verb == "gated2":
            assert gate("model").wait(10)
        return {"score": int(results[0].content), "why": "tool"}
    raise AssertionError(f"unexpected request {text!r}")


def double(x: int) -> int:
    """Double x."""
    count("tool")
    note("tool")
    return x * 2


def gated_double(x: int) -> int:
    """Double x, once the gate opens."""
    count("tool")
    assert gate("tool").wait(10), "tool gate never opened"
    return x * 2


def gated_after(value: Any) -> Any:
    """The caller's follow-up call: holds the caller suspended until the gate opens."""
    count("after")
    assert gate("after").wait(10), "after gate never opened"
    return value


def with_model(agent: Agent, name: str = "m", prompt: str | None = None,
               tools: tuple[str, ...] = ("double", "gated_double")) -> Agent:
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(ScriptedChatModel, function=qualified_name(script)))
    agent.add_resource(name, ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=list(tools), prompt=prompt))
    for t in tools:
        fn = {"double": double, "gated_double": gated_double}[t]
        agent.add_resource(t, ResourceType.TOOL, fn)
    return agent


def run_local(agent: Agent, records: list[Any]):
    return AgentsExecutionEnvironment.local().from_list(records).apply(agent).run()


# --------------------------------------------------------------------------- core-level driving

class ActionLog(Observer):
    def __init__(self) -> None:
        self.started: list[str] = []

    def action_started(self, key, execution_id, action, reentered):
        self.started.append(action)


# --------------------------------------------------------------------------- 1 lazy


class LazyAgent(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        mode = event.input["mode"]
        if mode == "never":
            ctx.chat("m", [ChatMessage(content="plain:never")])
            ctx.send_event(OutputEvent(output={"mode": mode}))
        elif mode == "skip_first":
            ctx.chat("m", [ChatMessage(content="plain:skipped")])
            used = ctx.chat("m", [ChatMessage(content="plain:used")])
            r = await used
            ctx.send_event(OutputEvent(output={"mode": mode, "content": r.message.content}))
        else:
            fut = ctx.chat("m", [ChatMessage(content="plain:twice")])
            first = await fut
            second = await fut
            ctx.send_event(OutputEvent(output={
                "mode": mode, "first": first.message.content, "equal": first == second}))


def test_chat_contract_1_a_future_never_awaited_dispatches_nothing(probes):
    res = run_local(with_model(LazyAgent()), [{"key": "a", "mode": "never"}])
    assert res.errors == []
    assert res.outputs == [{"mode": "never"}]
    assert probes["model"] == 0
    assert res.counters.get("chat_calls", 0) == 0


def test_chat_contract_1_only_the_awaited_future_runs(probes):
    res = run_local(with_model(LazyAgent()), [{"key": "a", "mode": "skip_first"}])
    assert res.errors == []
    assert res.outputs == [{"mode": "skip_first", "content": "echo:used"}]
    assert probes["model"] == 1 and probes["model:plain:r1"] == 1
    assert res.counters["chat_calls"] == 1


def test_chat_contract_1_awaiting_twice_returns_the_same_result_with_one_model_call(probes):
    res = run_local(with_model(LazyAgent()), [{"key": "a", "mode": "twice"}])
    assert res.errors == []
    assert res.outputs == [{"mode": "twice", "first": "echo:twice", "equal": True}]
    assert probes["model"] == 1


# --------------------------------------------------------------------------- 2 ChatResult


class ResultAgent(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        how = event.input["how"]
        schema: Any = {"cls": Rating, "dict": Rating.model_json_schema(), "none": None}[
            event.input.get("schema", "cls")]
        try:
            r = await ctx.chat("m", [ChatMessage(content=how)], output_schema=schema)
        except ChatResponseError as e:
            ctx.send_event(OutputEvent(output={"failed": True, "reason": e.reason,
                                               "text": str(e)}))
            return
        ctx.send_event(OutputEvent(output={
            "failed": False,
            "result_type": type(r).__name__,
            "structured_type": type(r.structured).__name__,
            "structured": r.structured.model_dump() if isinstance(r.structured, BaseModel)
            else r.structured,
            "message": r.message.model_dump(mode="json"),
            "model": r.model, "response_id": r.response_id,
            "usage": r.usage.model_dump() if r.usage else None,
            "finish_reason": r.finish_reason, "metadata": r.metadata,
        }))


def test_chat_contract_2_result_carries_everything_the_connection_returned():
    res = run_local(with_model(ResultAgent()), [
        {"key": "a", "how": "full", "schema": "cls"},
        {"key": "b", "how": "full", "schema": "dict"},
    ])
    assert res.errors == []
    by_schema = {o["structured_type"]: o for o in res.outputs}
    typed, plain = by_schema["Rating"], by_schema["dict"]
    for out in (typed, plain):
        assert out["result_type"] == "ChatResponse"
        assert out["structured"] == {"score": 4, "why": "full"}
        assert out["message"] == FULL.message.model_dump(mode="json")
        assert out["message"]["content"] == '{"score": 4, "why": "full"}'
        assert out["message"]["tool_calls"] == []
        assert out["model"] == "fake-model-7"
        assert out["response_id"] == "resp-123"
        assert out["usage"] == {"input_tokens": 11, "output_tokens": 7}
        assert out["finish_reason"] == "stop"
        assert out["metadata"] == {"provider": "fake", "latency_ms": 5, "nested": {"a": [1, 2]}}


def test_chat_contract_2_result_after_a_tool_round_is_the_final_answer(probes):
    res = run_local(with_model(ResultAgent()), [{"key": "a", "how": "tool:21"}])
    assert res.errors == []
    [out] = res.outputs
    assert out["structured_type"] == "Rating"
    assert out["structured"] == {"score": 42, "why": "tool"}
    assert out["message"]["role"] == "assistant"
    assert out["message"]["tool_calls"] == []  # the round's calls were executed, not returned
    assert (probes["model"], probes["tool"]) == (2, 1)


def test_chat_contract_2_a_failing_connection_raises_a_catchable_chat_response_error():
    res = run_local(with_model(ResultAgent()), [{"key": "a", "how": "boom"}])
    assert res.errors == []
    [out] = res.outputs
    assert out["failed"] is True
    assert "ProviderError" in out["reason"] and "upstream exploded" in out["reason"]
    assert out["reason"] in out["text"]


def test_chat_contract_2_an_answer_that_is_not_json_fails_with_the_reason():
    res = run_local(with_model(ResultAgent()), [{"key": "a", "how": "notjson", "schema": "cls"},
                                                 {"key": "b", "how": "notjson", "schema": "dict"}])
    assert res.errors == []
    assert len(res.outputs) == 2
    for out in res.outputs:
        assert out["failed"] is True
        assert "not JSON" in out["reason"]
        assert "this is not json" in out["reason"]


def test_chat_contract_2_json_that_does_not_fit_the_schema_class_fails_with_the_reason():
    # the result's `structured` must be an instance of the output_schema class; when it cannot
    # be, the chat failed: the caller gets a ChatResponseError, not a raw ValidationError
    res = run_local(with_model(ResultAgent()), [{"key": "a", "how": "offschema", "schema": "cls"}])
    assert res.errors == [], [(e.error_type, e.message[:80]) for e in res.errors]
    [out] = res.outputs
    assert out["failed"] is True
    assert "Rating" in out["reason"] or "score" in out["reason"]


def test_chat_contract_2_an_uncaught_chat_failure_fails_the_calling_action():
    class Uncaught(Agent):
        @action(InputEvent)
        @staticmethod
        async def go(event: InputEvent, ctx: RunnerContext) -> None:
            await ctx.chat("m", [ChatMessage(content="boom")])

    res = run_local(with_model(Uncaught()), [{"key": "a"}])
    assert res.outputs == []
    [err] = res.errors
    assert (err.action, err.error_type) == ("go", "ChatResponseError")
    assert "upstream exploded" in err.message


# --------------------------------------------------------------------------- 3 private route


class Note(Event):
    pass


class PrivateRoute(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        note("go:start")
        ctx.send_event(Note(attributes={"n": "before"}))
        r = await ctx.chat("m", [ChatMessage(content="tool:21")], output_schema=Rating)
        note("go:resumed")
        ctx.send_event(Note(attributes={"n": "after", "score": r.structured.score}))
        note("go:end")

    @action(Note)
    @staticmethod
    def on_note(event: Note, ctx: RunnerContext) -> None:
        note(f"note:{event.attributes['n']}")
        ctx.send_event(OutputEvent(output=event.attributes))

    @action(ChatRequestEvent, ToolRequestEvent, ToolResponseEvent, ChatResponseEvent)
    @staticmethod
    def spy(event: Event, ctx: RunnerContext) -> None:
        note(f"spy:{event.type}")


def test_chat_contract_3_chat_events_stay_private_and_caller_events_wait_for_the_caller(probes):
    res = run_local(with_model(PrivateRoute()), [{"key": "a"}])
    assert res.errors == []
    log = probes.notes()
    assert not [e for e in log if e.startswith("spy:")], log
    assert log == ["go:start", "model", "tool", "model", "go:resumed", "go:end",
                   "note:before", "note:after"]
    assert res.outputs == [{"n": "before"}, {"n": "after", "score": 42}]


# --------------------------------------------------------------------------- 4 resources, memory


class Child(Agent):
    """Owns the chat model setup ``child_m`` (the parent has none by that name); names its
    parent's ``parent_m`` without declaring it (as in Flink Agents: the parent's)."""

    @action(InputEvent)
    @staticmethod
    async def review(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.short_term_memory.set("child_note", "child-only")
        r = await ctx.chat("child_m", [ChatMessage(content="system")])
        try:
            parent_visible = (await ctx.chat("parent_m", [ChatMessage(content="system")])
                              ).message.content
        except ChatResponseError as e:
            parent_visible = e.reason
        ctx.send_event(OutputEvent(output={"answer": r.message.content,
                                           "parent_setup": parent_visible}))


class GatedChild(Agent):
    @action(InputEvent)
    @staticmethod
    async def review(event: InputEvent, ctx: RunnerContext) -> None:
        r = await ctx.chat("child_m", [ChatMessage(content="gated:5")], output_schema=Rating)
        ctx.send_event(OutputEvent(output={"score": r.structured.score}))


def make_child(cls: type[Agent]) -> Agent:
    return with_model(cls(), name="child_m", prompt="child reviews {product}")


class ResourceParent(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        own = await ctx.chat("parent_m", [ChatMessage(content="system")])
        handle = await ctx.submit_subagent("child", {"product": "shoe"})
        sub = await handle
        try:
            await ctx.chat("child_m", [ChatMessage(content="plain:x")])
            child_visible = True
        except ChatResponseError as e:
            child_visible = e.reason
        ctx.send_event(OutputEvent(output={
            "own": own.message.content, "sub": sub.model_dump(), "child_setup": child_visible,
            "memory": ctx.short_term_memory.to_dict()}))


def resource_parent(child: Agent) -> Agent:
    parent = with_model(ResourceParent(), name="parent_m", prompt="parent system")
    parent.add_resource("child", ResourceType.AGENT,
                        ResourceDescriptor(InternalSubagent, agent=child))
    return parent


def test_chat_contract_4_chat_uses_the_resources_of_its_callers_scope():
    res = run_local(resource_parent(make_child(Child)), [{"key": "a"}])
    assert res.errors == []
    [out] = res.outputs
    assert out["own"] == "parent system"
    assert out["sub"]["success"] is True
    [child_out] = out["sub"]["result"]
    assert child_out["answer"] == "child reviews shoe"  # child's setup, prompt from its input
    assert child_out["parent_setup"] == "parent system"  # a name it does not declare: its
    assert "child_m" in out["child_setup"]              # parent's; the child's is not the parent's
    assert out["memory"] == {}                          # the child's memory is its own


def test_chat_contract_4_chat_state_lives_in_the_memory_of_its_callers_scope():
    plan = AgentPlan.from_agent(resource_parent(make_child(GatedChild)))
    core = new_core(plan)
    try:
        state = InMemoryKeyState()
        core.on_input(KEY, {"n": 1}, state)
        poll_until(core, state, lambda s: bool(records_of(s, "_tool_call_action")))
        run = state.run
        [child_inv] = [i for i in run.invocations.values() if i.kind == "subagent"]
        [chat_inv] = [i for i in run.invocations.values() if i.kind == "chat"]
        child_id = next(k for k, v in run.invocations.items() if v is child_inv)
        assert chat_inv.env == child_id          # the chat runs in the child's environment
        assert chat_inv.plan_path == ["child"]
        assert "_chat" in child_inv.sensory      # its conversation is in the child's memory
        assert "_chat" not in run.sensory        # not in the parent's
        assert "_chat" not in state.memory
        gate("tool").set()
        outputs, errors = run_to_end(core, state)
        assert errors == []
        [out] = outputs
        assert out["sub"]["result"] == [{"score": 10}]
        assert state.memory == {} and state.run is None
    finally:
        gate("tool").set()
        core.close()


# --------------------------------------------------------------------------- 5, 6 replay


class ReplayAgent(Agent):
    """Awaits a chat, then a gated follow-up call; outputs what it saw."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        try:
            r = await ctx.chat("m", [ChatMessage(content=event.input["ask"])],
                               output_schema=Rating)
            seen: dict[str, Any] = {"score": r.structured.score, "why": r.structured.why,
                                    "typed": isinstance(r.structured, Rating)}
        except ChatResponseError as e:
            seen = {"error": type(e).__name__, "reason": e.reason}
        if event.input.get("after"):
            await ctx.durable_execute_async(gated_after, "x")
        ctx.send_event(OutputEvent(output=seen))


@pytest.mark.parametrize("where", ["tool_in_flight", "tool_recorded"])
def test_chat_contract_5_restore_mid_chat_replays_recorded_calls(where, probes):
    plan = AgentPlan.from_agent(with_model(ReplayAgent()))
    old = new_core(plan)
    try:
        state = InMemoryKeyState()
        if where == "tool_in_flight":
            old.on_input(KEY, {"ask": "gated:21"}, state)
            poll_until(old, state, lambda s: call_of(s, "_tool_call_action", 0) is not None
                       and probes["tool"] == 1)  # the tool is running
            assert not call_of(state, "_tool_call_action", 0).done
        else:
            gate("tool").set()
            old.on_input(KEY, {"ask": "gated2:21"}, state)

            def second_model_call_started(s: InMemoryKeyState) -> bool:
                recs = [r for r in records_of(s, "_chat_model_action")
                        if r.event["type"] == ToolResponseEvent.EVENT_TYPE]
                return bool(recs) and "0" in recs[0].calls and probes["model:gated2:r2"] == 1

            poll_until(old, state, second_model_call_started)
        assert state.run is not None and len(state.run.invocations) == 1
        snapshot = copy.deepcopy(state)
        assert probes["model:gated:r1"] + probes["model:gated2:r1"] == 1

        gate("tool").set()
        gate("model").set()
        outputs, errors, new = resume(plan, snapshot)
        assert errors == []
        assert outputs == [{"score": 42, "why": "tool", "typed": True}]
        verb = "gated" if where == "tool_in_flight" else "gated2"
        assert probes[f"model:{verb}:r1"] == 1           # recorded round 1: never repeated
        if where == "tool_in_flight":
            assert probes["tool"] == 2                    # not recorded: runs once more
            assert probes[f"model:{verb}:r2"] == 1
        else:
            assert probes["tool"] == 1                    # recorded: replayed
            assert probes[f"model:{verb}:r2"] == 2        # was in flight: asked again
        assert new.counters["chat_calls"] == 0            # re-attached, not bootstrapped again
        assert snapshot.run is None
    finally:
        gate("tool").set()
        gate("model").set()
        old.close()


def _snapshot_after_chat(plan: AgentPlan, ask: str) -> tuple[AgentCore, InMemoryKeyState]:
    old = new_core(plan)
    state = InMemoryKeyState()
    gate("tool").set()
    old.on_input(KEY, {"ask": ask, "after": True}, state)
    poll_until(old, state, lambda s: call_of(s, "go", 1) is not None)
    assert call_of(state, "go", 0).done
    assert not call_of(state, "go", 1).done
    assert state.run.invocations == {}
    return old, copy.deepcopy(state)


def test_chat_contract_5_a_recorded_response_is_returned_without_model_call_or_bootstrap(probes):
    plan = AgentPlan.from_agent(with_model(ReplayAgent()))
    old, snapshot = _snapshot_after_chat(plan, "gated:21")
    try:
        before = probes.counts()
        gate("after").set()
        log = ActionLog()
        outputs, errors, new = resume(plan, snapshot, observer=log)
        assert errors == []
        assert outputs == [{"score": 42, "why": "tool", "typed": True}]
        assert probes["model"] == before["model"] and probes["tool"] == before["tool"]
        assert new.counters["chat_calls"] == 0
        assert log.started == ["go"]  # no chat or tool action ran: nothing was bootstrapped
    finally:
        old.close()


def test_chat_contract_6_a_captured_failure_stays_a_failure_after_restore(probes):
    plan = AgentPlan.from_agent(with_model(ReplayAgent()))
    old, snapshot = _snapshot_after_chat(plan, "boom")
    try:
        rec = call_of(snapshot, "go", 0)
        assert rec.ok is False
        assert probes["model"] == 1
        gate("after").set()
        log = ActionLog()
        outputs, errors, _ = resume(plan, snapshot, observer=log)
        assert errors == []
        [out] = outputs
        assert out["error"] == "ChatResponseError"
        assert "ProviderError" in out["reason"] and "upstream exploded" in out["reason"]
        assert probes["model"] == 1  # no model call after the restore
        assert log.started == ["go"]
    finally:
        old.close()


# --------------------------------------------------------------------------- 7 gather


class GatherAgent(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        a = ctx.chat("m", [ChatMessage(content="plain:a")])
        b = ctx.chat("m", [ChatMessage(content="plain:b")])
        if not event.input.get("catch"):
            await asyncio.gather(a, b)
            return
        try:
            await asyncio.gather(a, b)
            refused = None
        except UnsupportedAwaitError as e:
            refused = str(e)
        models_at_refusal = current()["model"]
        ra = await a
        rb = await b
        ctx.send_event(OutputEvent(output={
            "refused": refused, "models_at_refusal": models_at_refusal,
            "answers": [ra.message.content, rb.message.content]}))


def test_chat_contract_7_gather_over_chat_futures_is_rejected(probes):
    res = run_local(with_model(GatherAgent()), [{"key": "a", "catch": True},
                                                 {"key": "b", "catch": False}])
    [out] = res.outputs
    assert out["refused"] is not None
    assert "one after another" in out["refused"]
    assert "ctx.durable_execute_async" in out["refused"]
    assert out["models_at_refusal"] == 0
    assert out["answers"] == ["echo:a", "echo:b"]  # awaited one after another, they work
    [err] = res.errors
    assert (err.key, err.action, err.error_type) == ("b", "go", "UnsupportedAwaitError")
    assert "one after another" in err.message and "ctx.durable_execute_async" in err.message
    assert probes["model"] == 2


# --------------------------------------------------------------------------- identical callers


class Ask(Event):
    pass


class Twins(Agent):
    @action(InputEvent)
    @staticmethod
    def start(event: InputEvent, ctx: RunnerContext) -> None:
        for _ in range(2):
            ctx.send_event(Event(type=Ask.EVENT_TYPE, attributes={"q": event.input["q"]}))

    @action(Ask)
    @staticmethod
    async def on_ask(event: Event, ctx: RunnerContext) -> None:
        r = await ctx.chat("m", [ChatMessage(content=event.attributes["q"])])
        if event.attributes["q"] == "twin:gated":
            await ctx.durable_execute_async(gated_after, r.message.content)
        ctx.send_event(OutputEvent(output={"id": event.id, "answer": r.message.content}))


def test_chat_identical_concurrent_callers_get_distinct_invocations_and_answers(probes):
    res = run_local(with_model(Twins()), [{"key": "a", "q": "twin:plain"}])
    assert res.errors == []
    assert len(res.outputs) == 2
    assert len({o["id"] for o in res.outputs}) == 2
    assert sorted(o["answer"] for o in res.outputs) == ["answer-1", "answer-2"]
    assert probes["model"] == 2
    assert res.counters["chat_calls"] == 2


def test_chat_identical_concurrent_callers_keep_their_own_answers_after_restore(probes):
    plan = AgentPlan.from_agent(with_model(Twins()))
    old = new_core(plan)
    try:
        state = InMemoryKeyState()
        old.on_input(KEY, {"q": "twin:gated"}, state)

        def one_answered_one_asking(s: InMemoryKeyState) -> bool:
            callers = records_of(s, "on_ask")
            return (len(callers) == 2 and probes["model"] == 2
                    and any("1" in c.calls for c in callers))

        poll_until(old, state, one_answered_one_asking)
        callers = {c.event["id"]: c for c in records_of(state, "on_ask")}
        answered = {i: c.calls["0"] for i, c in callers.items() if c.calls["0"].done}
        assert len(answered) == 1
        [(answered_id, rec)] = answered.items()
        [asking_id] = [i for i in callers if i != answered_id]
        assert rec.value["data"]["message"]["content"] == "answer-1"
        assert len(state.run.invocations) == 1  # the other caller's chat is open
        snapshot = copy.deepcopy(state)

        gate("model").set()
        gate("after").set()
        outputs, errors, new = resume(plan, snapshot)
        assert errors == []
        answers = {o["id"]: o["answer"] for o in outputs}
        assert set(answers) == {answered_id, asking_id}
        assert answers[answered_id] == "answer-1"  # replayed from its own record
        assert answers[asking_id] == "answer-3"    # its lost call (answer-2) was asked again
        assert probes["model:twin:r1"] == 3
        assert new.counters["chat_calls"] == 0
    finally:
        gate("model").set()
        gate("after").set()
        old.close()
