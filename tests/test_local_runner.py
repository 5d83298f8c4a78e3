"""The local runner end to end: ordering, memory, errors, durable calls, chat and tools."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from typing import Any

import pytest
from support.probes import count, gate, note, store

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelConnection,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponse,
    ChatResponseEvent,
    Event,
    InputEvent,
    MessageRole,
    OutputEvent,
    Prompt,
    ProviderError,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    SerializationError,
    ToolCall,
    ToolResponseEvent,
    action,
    qualified_name,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel, ScriptRule
from flink_agents_py.local import LocalRunResult
from flink_agents_py.testing import ScriptedRequest

pytestmark = pytest.mark.timeout(60)


def run(agent: Agent, records: list[Any], key_selector=None, **env_options: Any) -> LocalRunResult:
    return (
        AgentsExecutionEnvironment.local(**env_options)
        .from_list(records, key_selector=key_selector)
        .apply(agent)
        .run()
    )


def by_key(outputs: list[dict[str, Any]]) -> dict[Any, list[dict[str, Any]]]:
    out: dict[Any, list[dict[str, Any]]] = {}
    for o in outputs:
        out.setdefault(o["key"], []).append(o)
    return out


# --------------------------------------------------------------------------- echo


class Echo(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "echo": event.input}))


def test_echo_outputs_for_many_keys():
    records = [{"key": f"k{i}", "v": i} for i in range(100)]
    res = run(Echo(), records)
    assert res.errors == []
    assert sorted(res.outputs, key=lambda o: o["echo"]["v"]) == [
        {"key": r["key"], "echo": r} for r in records
    ]
    assert res.counters["runs_completed"] == 100


def test_echo_with_custom_key_selector_and_non_dict_records():
    res = run(Echo(), ["apple", "avocado", "banana"], key_selector=lambda s: s[0])
    assert res.errors == []
    assert sorted((o["key"], o["echo"]) for o in res.outputs) == [
        ("a", "apple"), ("a", "avocado"), ("b", "banana")]


def test_default_key_selector_puts_keyless_records_on_one_key():
    res = run(Echo(), [1, 2, 3])
    assert [o["echo"] for o in res.outputs] == [1, 2, 3]
    assert {o["key"] for o in res.outputs} == {None}


# --------------------------------------------------------------------------- ordering and overlap

def _slow_io(key: str, i: int) -> int:
    store("io_log", list).append(("start", key, i))
    time.sleep(random.uniform(0.001, 0.02))
    store("io_log", list).append(("end", key, i))
    return i * 100


class SlowEcho(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        got = await ctx.durable_execute_async(_slow_io, ctx.key, event.input["i"])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "i": event.input["i"], "got": got}))


def test_per_key_order_preserved_while_keys_overlap_on_slow_io(probes):
    keys = [f"k{n}" for n in range(6)]
    per_key = 5
    records = [{"key": k, "i": i} for i in range(per_key) for k in keys]
    res = run(SlowEcho(), records)
    assert res.errors == []
    outs = by_key(res.outputs)
    assert set(outs) == set(keys)
    for k in keys:
        assert [(o["i"], o["got"]) for o in outs[k]] == [(i, i * 100) for i in range(per_key)]

    log = list(probes.store("io_log", list))
    # one key's runs never overlap, and go in input order
    for k in keys:
        mine = [(kind, i) for kind, key, i in log if key == k]
        expected = [(kind, i) for i in range(per_key) for kind in ("start", "end")]
        assert mine == expected, (k, mine)

    # different keys do overlap: some key's call started before another key's call ended
    pos = {entry: n for n, entry in enumerate(log)}
    overlapping = [
        (a, b)
        for (kind_a, a, ia) in log if kind_a == "start"
        for (kind_b, b, ib) in log if kind_b == "start" and b != a
        if pos[("start", a, ia)] < pos[("end", b, ib)] \
                and pos[("start", b, ib)] < pos[("start", a, ia)]
    ]
    assert overlapping, log


# --------------------------------------------------------------------------- memory


class Counter(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        stm = ctx.short_term_memory
        stm.set("stats.count", stm.get("stats.count", 0) + 1)
        stm.set("seen", [*stm.get("seen", []), event.input["v"]])
        # an action reads its own writes at once
        assert stm.get("stats.count") >= 1
        ctx.send_event(OutputEvent(output={
            "key": ctx.key, "count": stm.get("stats.count"), "seen": stm.get("seen"),
            "has_stats": "stats" in stm}))


def test_short_term_memory_persists_across_runs_and_is_isolated_per_key():
    records = [{"key": "a", "v": 1}, {"key": "b", "v": 10}, {"key": "a", "v": 2},
               {"key": "a", "v": 3}, {"key": "b", "v": 20}]
    res = run(Counter(), records)
    assert res.errors == []
    outs = by_key(res.outputs)
    assert [(o["count"], o["seen"]) for o in outs["a"]] == [(1, [1]), (2, [1, 2]), (3, [1, 2, 3])]
    assert [(o["count"], o["seen"]) for o in outs["b"]] == [(1, [10]), (2, [10, 20])]
    assert all(o["has_stats"] for o in res.outputs)


class Probe(Event):
    pass


class SensoryUser(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        before = ctx.sensory_memory.get("mark")
        ctx.sensory_memory.set("mark", event.input["v"])
        ctx.send_event(Probe())
        ctx.send_event(OutputEvent(output={"key": ctx.key, "stage": "input", "before": before}))

    @action(Probe)
    @staticmethod
    def on_probe(event: Probe, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={
            "key": ctx.key, "stage": "probe", "mark": ctx.sensory_memory.get("mark")}))


def test_sensory_memory_is_shared_within_a_run_and_cleared_between_runs():
    res = run(SensoryUser(), [{"key": "a", "v": 1}, {"key": "a", "v": 2}, {"key": "b", "v": 3}])
    assert res.errors == []
    outs = by_key(res.outputs)
    assert [(o["stage"], o.get("before"), o.get("mark")) for o in outs["a"]] == [
        ("input", None, None), ("probe", None, 1),
        ("input", None, None), ("probe", None, 2),
    ]
    assert [(o["stage"], o.get("mark")) for o in outs["b"]] == [("input", None), ("probe", 3)]


class FailsSometimes(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        previous = ctx.short_term_memory.get("last")
        ctx.short_term_memory.set("last", event.input["v"])
        ctx.sensory_memory.set("x", 1)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "v": event.input["v"],
                                           "prev": previous}))
        if event.input.get("fail"):
            raise ValueError(f"bad record {event.input['v']}")


def test_failing_action_leaves_no_memory_writes_and_sends_no_events():
    records = [{"key": "a", "v": 1}, {"key": "a", "v": 2, "fail": True}, {"key": "a", "v": 3}]
    res = run(FailsSometimes(), records)
    assert [(o["v"], o["prev"]) for o in res.outputs] == [(1, None), (3, 1)]
    assert len(res.errors) == 1
    assert res.errors[0].message == "bad record 2"


# --------------------------------------------------------------------------- errors


class Picky(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input["v"] < 0:
            raise ValueError(f"negative value {event.input['v']}")
        ctx.send_event(OutputEvent(output={"key": ctx.key, "v": event.input["v"]}))


def test_raising_action_becomes_error_record_and_others_continue():
    records = [{"key": "a", "v": 1}, {"key": "b", "v": -5}, {"key": "b", "v": 2},
               {"key": "c", "v": 3}]
    res = run(Picky(), records)
    assert sorted((o["key"], o["v"]) for o in res.outputs) == [("a", 1), ("b", 2), ("c", 3)]
    assert len(res.errors) == 1
    err = res.errors[0]
    assert (err.key, err.action, err.error_type) == ("b", "on_input", "ValueError")
    assert err.message == "negative value -5"
    assert err.input == {"key": "b", "v": -5}
    assert err.seq == 0


def test_record_without_json_form_goes_to_errors_and_job_continues():
    records = [{"key": "a", "v": 1}, {"key": "a", "v": {1, 2}}, {"key": "a", "v": 3},
               {"key": "b", "v": 4}]
    res = run(Echo(), records)
    assert [o["echo"]["v"] for o in res.outputs if o["key"] == "a"] == [1, 3]
    assert [o["echo"]["v"] for o in res.outputs if o["key"] == "b"] == [4]
    assert len(res.errors) == 1
    err = res.errors[0]
    assert err.key == "a"
    assert err.error_type == "SerializationError"
    assert "set" in err.message


def test_key_selector_that_raises_puts_record_in_errors(caplog):
    def selector(record):
        return record["key"]

    records = [{"key": "a"}, {"nokey": 1}, {"key": ["unhashable"]}, {"key": "b"}]
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        res = run(Echo(), records, key_selector=selector)
    assert sorted(o["key"] for o in res.outputs) == ["a", "b"]
    assert [e.action for e in res.errors] == ["<key_selector>", "<key_selector>"]
    assert [e.input for e in res.errors] == [{"nokey": 1}, {"key": ["unhashable"]}]
    assert [e.execution_id for e in res.errors] == ["record 1", "record 2"]  # positions
    assert res.errors[0].error_type == "KeyError"
    assert res.errors[1].error_type == "TypeError"
    assert res.errors[1].message.startswith(  # says it is the key, and what a key may be
        "the key is ['unhashable'] of type list, which cannot key state")
    assert "convert it in the key selector" in res.errors[1].message
    # where it failed: the user's selector line, in the error record and in the log
    assert 'return record["key"]' in res.errors[0].traceback
    logged = [r.getMessage() for r in caplog.records if "rejected before it ran" in r.getMessage()]
    assert len(logged) == 2 and logged[0].startswith("record 1 rejected")
    assert 'return record["key"]' in logged[0]


def test_value_selector_that_raises_puts_record_in_errors():
    records = [{"key": "a", "v": 1}, {"key": "b"}, {"key": "c", "v": 3}]
    job = (AgentsExecutionEnvironment.local()
           .from_list(records, value_selector=lambda r: {"key": r["key"], "v": r["v"]}))
    res = job.apply(Echo()).run()
    assert sorted(o["key"] for o in res.outputs) == ["a", "c"]
    [err] = res.errors
    assert (err.action, err.error_type, err.input, err.execution_id) == (
        "<key_selector>", "KeyError", {"key": "b"}, "record 1")


# --------------------------------------------------------------------------- events between actions


class Step(Event):
    i: int


def _short_sleep() -> str:
    time.sleep(0.01)
    return "slept"


class Fanout(Agent):
    @action(InputEvent)
    @staticmethod
    async def start(event: InputEvent, ctx: RunnerContext) -> None:
        for i in range(5):
            ctx.send_event(Step(i=i))
        # still running: the steps must not run before this action completes
        await ctx.durable_execute_async(_short_sleep)
        ctx.short_term_memory.set("start_done", event.input["n"])

    @action(Step)
    @staticmethod
    def on_step(event: Step, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={
            "key": ctx.key, "i": event.i, "start_done": ctx.short_term_memory.get("start_done")}))


def test_events_sent_by_an_action_are_delivered_in_order_after_it_completes():
    res = run(Fanout(), [{"key": "a", "n": 1}, {"key": "b", "n": 2}, {"key": "a", "n": 3}])
    assert res.errors == []
    outs = by_key(res.outputs)
    assert [(o["i"], o["start_done"]) for o in outs["a"]] == [(i, 1) for i in range(5)] + [
        (i, 3) for i in range(5)]
    assert [(o["i"], o["start_done"]) for o in outs["b"]] == [(i, 2) for i in range(5)]


class Ping(Event):
    payload: str = "same"


class Twins(Agent):
    @action(InputEvent)
    @staticmethod
    def start(event: InputEvent, ctx: RunnerContext) -> None:
        first = ctx.send_event(Ping())
        second = ctx.send_event(Ping())
        ctx.sensory_memory.set("sent_ids", [first.id, second.id])

    @action(Ping)
    @staticmethod
    def on_ping(event: Ping, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={
            "key": ctx.key, "id": event.id, "sent_ids": ctx.sensory_memory.get("sent_ids")}))


def test_two_identical_events_both_run_with_distinct_ids():
    res = run(Twins(), [{"key": "a"}, {"key": "b"}])
    assert res.errors == []
    for key, outs in by_key(res.outputs).items():
        ids = [o["id"] for o in outs]
        assert len(ids) == 2 and len(set(ids)) == 2 and all(ids), key
        assert ids == outs[0]["sent_ids"]


# --------------------------------------------------------------------------- durable calls

def _add(a: int, b: int) -> int:
    count("add")
    return a + b


class Boom(Exception):
    pass


def _explode(why: str) -> None:
    count("explode")
    raise Boom(why)


def _make_set() -> set[int]:
    return {1, 2}


class _Opaque:
    """A user's object with no stored form (a set has one: it is stored tagged)."""


def _make_opaque() -> _Opaque:
    return _Opaque()


def _make_message(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, content=text)


async def _async_double(x: int) -> int:
    await asyncio.sleep(0.001)
    return 2 * x


class Durable(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        out: dict[str, Any] = {"key": ctx.key}
        out["sum"] = ctx.durable_execute(_add, 2, b=3)
        try:
            ctx.durable_execute(_explode, "kaput")
        except Boom as e:
            out["raised"] = ["Boom", str(e)]
        out["set"] = sorted(ctx.durable_execute(_make_set))
        try:
            ctx.durable_execute(_make_opaque)
        except SerializationError as e:
            out["bad_result"] = str(e)
        try:
            ctx.durable_execute(_add, _Opaque(), 2)
        except SerializationError as e:
            out["bad_arg"] = str(e)
        msg = ctx.durable_execute(_make_message, "hi")
        out["message"] = [type(msg).__name__, msg.content]
        out["double"] = await ctx.durable_execute_async(_async_double, 21)
        # several async calls started before any is awaited
        futs = [ctx.durable_execute_async(_add, i, 1) for i in range(3)]
        out["many"] = [await f for f in futs]
        ctx.send_event(OutputEvent(output=out))


def test_durable_execute_returns_values_and_reraises_recorded_exceptions(probes):
    res = run(Durable(), [{"key": "a"}])
    assert res.errors == []
    [out] = res.outputs
    assert out["sum"] == 5
    assert out["raised"] == ["Boom", "kaput"]
    assert out["set"] == [1, 2]
    assert "_Opaque" in out["bad_result"]
    assert "_Opaque" in out["bad_arg"]
    assert out["message"] == ["ChatMessage", "hi"]
    assert out["double"] == 42
    assert out["many"] == [1, 2, 3]
    assert probes.counts() == {"add": 4, "explode": 1}
    assert res.counters.get("calls_replayed", 0) == 0


class AwaitsAsyncio(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        await asyncio.sleep(event.input["delay"])
        ctx.send_event(OutputEvent(output={"key": ctx.key}))


@pytest.mark.parametrize("delay", [0, 0.01], ids=["sleep0", "sleep10ms"])
def test_awaiting_asyncio_in_an_action_is_an_unsupported_await_error(delay):
    res = run(AwaitsAsyncio(), [{"key": "a", "delay": delay}])
    assert res.outputs == []
    assert len(res.errors) == 1
    err = res.errors[0]
    assert (err.key, err.action) == ("a", "on_input")
    assert err.error_type == "UnsupportedAwaitError", err
    assert "ctx.durable_execute_async" in err.message


def test_event_without_json_form_fails_the_sending_action_with_serialization_error():
    class SendsObject(Agent):
        @action(InputEvent)
        @staticmethod
        def on_input(event: InputEvent, ctx: RunnerContext) -> None:
            try:
                ctx.send_event(OutputEvent(output={"obj": object()}))
            except SerializationError as e:
                ctx.send_event(OutputEvent(output={"rejected": type(e).__name__}))

    res = run(SendsObject(), [{"key": "a"}])
    assert res.errors == []
    assert res.outputs == [{"rejected": "SerializationError"}]


# --------------------------------------------------------------------------- chat and tools



async def slow_tool(x: int) -> dict:
    """A slow tool.

    Args:
        x: a number.
    """
    await asyncio.sleep(0.02)
    for _ in range(1000):  # finishes only after fast_tool: the calls must run concurrently
        if gate("fast_done").is_set():
            break
        await asyncio.sleep(0.005)
    note("slow")
    return {"slow": x * 10}


async def fast_tool(x: int) -> dict:
    """A fast tool.

    Args:
        x: a number.
    """
    await asyncio.sleep(0.001)
    note("fast")
    gate("fast_done").set()
    return {"fast": x + 1}


def broken_tool(x: int) -> int:
    """A tool that fails."""
    raise ValueError("disk on fire")


def echo_tool(a: int) -> int:
    """Return a."""
    return a


def _tool_messages_reply(req: ScriptedRequest) -> dict[str, Any]:
    assistant = [m for m in req.messages if m.role == MessageRole.ASSISTANT][-1]
    return {
        "results": {m.tool_call_id: m.content for m in req.tool_results},
        "names": {m.tool_call_id: m.name for m in req.tool_results},
        "asked_ids": [c.id for c in assistant.tool_calls],
        "tools_offered": sorted(t.name for t in req.tools),
    }


def script_two_tools(req: ScriptedRequest) -> Any:
    if not req.tool_results:
        return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
            ToolCall(id="call_slow", name="slow_tool", arguments={"x": 2}),
            ToolCall(id="call_fast", name="fast_tool", arguments={"x": 2}),
        ])
    return _tool_messages_reply(req)


def script_broken_and_unknown(req: ScriptedRequest) -> Any:
    if not req.tool_results:
        return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
            ToolCall(id="c_broken", name="broken_tool", arguments={"x": 1}),
            ToolCall(id="c_ghost", name="ghost_tool", arguments={}),
            ToolCall(id="c_ok", name="echo_tool", arguments={"a": 7}),
        ])
    return _tool_messages_reply(req)


def script_idless(req: ScriptedRequest) -> Any:
    if not req.tool_results:
        return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
            ToolCall(id="", name="echo_tool", arguments={"a": 1}),
            ToolCall(id="", name="echo_tool", arguments={"a": 2}),
            ToolCall(id="dup", name="echo_tool", arguments={"a": 3}),
            ToolCall(id="dup", name="echo_tool", arguments={"a": 4}),
        ])
    return _tool_messages_reply(req)


def script_always_tools(req: ScriptedRequest) -> Any:
    m = count("model:always")
    n = len(req.tool_results)
    return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
        ToolCall(id=f"c{m}-{n}", name="echo_tool", arguments={"a": 1})])


def script_show_prompt(req: ScriptedRequest) -> Any:
    return {"roles": [m.role for m in req.messages], "first": req.messages[0].content,
            "model": req.model, "options": req.options}


class BrokenConnection(ChatModelConnection):
    def chat(self, messages, **kwargs) -> ChatResponse:
        raise ProviderError("service down", status_code=503, retryable=True)


class Chatty(Agent):
    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        sent = ctx.send_event(ChatRequestEvent(
            model=event.input.get("model", "model"),
            messages=[ChatMessage(content=event.input["q"])],
            prompt_args=event.input.get("args"),
            output_schema=event.input.get("schema"),
        ))
        ctx.sensory_memory.set("request_id", sent.id)

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        r = event.response
        ctx.send_event(OutputEvent(output={
            "key": ctx.key,
            "kind": "answer",
            "answers_request": event.request_id == ctx.sensory_memory.get("request_id"),
            "error": event.error,
            "content": r.message.content if r else None,
            "structured": r.structured if r else None,
        }))

    @action(ToolResponseEvent)
    @staticmethod
    def watch_tools(event: ToolResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={
            "key": ctx.key, "kind": "tools",
            "responses": {cid: r.model_dump() for cid, r in event.responses.items()}}))


def chat_agent(connection: Any, tools: list[str] = (), **setup: Any) -> Agent:
    agent = Chatty()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, connection)
    agent.add_resource("model", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn", tools=list(tools),
                                          **setup))
    for fn in (slow_tool, fast_tool, broken_tool, echo_tool):
        agent.add_resource(fn.__name__, ResourceType.TOOL, fn)
    return agent


def scripted(fn) -> ResourceDescriptor:
    return ResourceDescriptor(ScriptedChatModel, function=qualified_name(fn))


def answers(res: LocalRunResult) -> list[dict[str, Any]]:
    return [o for o in res.outputs if o["kind"] == "answer"]


def test_chat_with_scripted_rules_and_no_tools():
    conn = ResourceDescriptor(ScriptedChatModel, rules=[
        ScriptRule(when="hello", reply="Hi there!"),
        ScriptRule(when="score", reply_json={"score": 4}),
    ], default_reply="?")
    res = run(chat_agent(conn), [{"key": "a", "q": "hello you"}, {"key": "b", "q": "what?"},
                                 {"key": "c", "q": "score it",
                                  "schema": {"type": "object"}}])
    assert res.errors == []
    got = {o["key"]: o for o in answers(res)}
    assert got["a"]["content"] == "Hi there!"
    assert got["b"]["content"] == "?"
    assert got["c"]["structured"] == {"score": 4}
    assert all(o["answers_request"] and o["error"] is None for o in got.values())


def test_chat_rules_with_a_tool_round():
    conn = ResourceDescriptor(ScriptedChatModel, rules=[
        ScriptRule(when="price", reply="It costs 7.",
                   tool_calls=[ToolCall(id="t1", name="echo_tool", arguments={"a": 7})]),
    ])
    res = run(chat_agent(conn, tools=["echo_tool"]), [{"key": "a", "q": "price of tea?"}])
    assert res.errors == []
    [tools] = [o for o in res.outputs if o["kind"] == "tools"]
    assert tools["responses"]["t1"]["content"] == 7
    [ans] = answers(res)
    assert ans["content"] == "It costs 7." and ans["error"] is None and ans["answers_request"]


def test_tool_round_with_two_calls_finishing_out_of_order(probes):
    agent = chat_agent(scripted(script_two_tools), tools=["slow_tool", "fast_tool"])
    res = run(agent, [{"key": "a", "q": "use both"}])
    assert res.errors == []
    assert probes.notes() == ["fast", "slow"]  # started in order slow, fast; finished reversed
    [tools] = [o for o in res.outputs if o["kind"] == "tools"]
    assert {cid: (r["name"], r["ok"], r["content"]) for cid, r in tools["responses"].items()} == {
        "call_slow": ("slow_tool", True, {"slow": 20}),
        "call_fast": ("fast_tool", True, {"fast": 3}),
    }
    [ans] = answers(res)
    assert ans["error"] is None and ans["answers_request"]
    reply = json.loads(ans["content"])
    assert reply["results"] == {"call_slow": '{"slow":20}', "call_fast": '{"fast":3}'}
    assert reply["names"] == {"call_slow": "slow_tool", "call_fast": "fast_tool"}
    assert reply["asked_ids"] == ["call_slow", "call_fast"]
    assert reply["tools_offered"] == ["fast_tool", "slow_tool"]


def test_failing_tool_and_unknown_tool_become_error_tool_messages():
    agent = chat_agent(scripted(script_broken_and_unknown), tools=["broken_tool", "echo_tool"])
    res = run(agent, [{"key": "a", "q": "go"}])
    assert res.errors == []
    [ans] = answers(res)
    assert ans["error"] is None  # the chat still completes
    results = json.loads(ans["content"])["results"]
    assert results["c_broken"].startswith("Error:")
    assert "disk on fire" in results["c_broken"]
    assert results["c_ghost"].startswith("Error:")
    assert "ghost_tool" in results["c_ghost"]
    assert results["c_ok"] == "7"


def test_tool_declared_but_not_offered_by_the_setup_is_refused():
    # broken_tool is an agent resource, but this setup only offers echo_tool
    agent = chat_agent(scripted(script_broken_and_unknown), tools=["echo_tool"])
    res = run(agent, [{"key": "a", "q": "go"}])
    results = json.loads(answers(res)[0]["content"])["results"]
    assert results["c_broken"].startswith("Error:")
    assert "disk on fire" not in results["c_broken"]
    assert results["c_ok"] == "7"


def test_idless_and_duplicate_tool_call_ids_get_unique_synthetic_ids():
    agent = chat_agent(scripted(script_idless), tools=["echo_tool"])
    res = run(agent, [{"key": "a", "q": "go"}])
    assert res.errors == []
    reply = json.loads(answers(res)[0]["content"])
    ids = reply["asked_ids"]
    assert len(ids) == 4 and len(set(ids)) == 4 and all(ids)
    # each result lands on its own call: results in call order are the arguments 1..4
    assert [reply["results"][i] for i in ids] == ["1", "2", "3", "4"]


def test_max_tool_rounds_reached_gives_chat_response_with_error():
    agent = chat_agent(scripted(script_always_tools), tools=["echo_tool"], max_tool_rounds=2)
    res = run(agent, [{"key": "a", "q": "loop"}, {"key": "b", "q": "loop"}])
    assert res.errors == []
    got = answers(res)
    assert len(got) == 2
    for ans in got:
        assert ans["content"] is None
        assert ans["answers_request"]
        assert "max_tool_rounds" in ans["error"]
    # each chat ran exactly max_tool_rounds tool rounds
    tool_rounds = [o for o in res.outputs if o["kind"] == "tools"]
    assert sorted(o["key"] for o in tool_rounds) == ["a", "a", "b", "b"]


def test_failing_connection_sets_chat_response_error_and_job_continues():
    agent = chat_agent(ResourceDescriptor(BrokenConnection))
    agent.add_resource("good_conn", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(ScriptedChatModel, default_reply="fine"))
    agent.add_resource("good", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="good_conn"))
    records = [{"key": "a", "q": "x"}, {"key": "a", "q": "y", "model": "good"},
               {"key": "b", "q": "z", "model": "good"}, {"key": "c", "q": "w", "model": "nope"}]
    res = run(agent, records)
    assert res.errors == []
    got = by_key(answers(res))
    [bad] = [o for o in got["a"] if o["error"]]
    assert "service down" in bad["error"] and bad["content"] is None and bad["answers_request"]
    assert [o["content"] for o in got["a"]] == [None, "fine"]
    assert got["b"][0]["content"] == "fine"
    # a request naming an unknown chat model also fails only its chat
    assert got["c"][0]["content"] is None and "nope" in got["c"][0]["error"]


def test_structured_output_that_is_not_json_is_a_chat_error():
    conn = ResourceDescriptor(ScriptedChatModel, default_reply="not json at all")
    res = run(chat_agent(conn), [{"key": "a", "q": "x", "schema": {"type": "object"}}])
    [ans] = answers(res)
    assert ans["content"] is None and "not JSON" in ans["error"]


def test_setup_prompt_placeholders_filled_from_prompt_args():
    agent = chat_agent(scripted(script_show_prompt), prompt="sys", model="m-1",
                       options={"temperature": 0.1})
    agent.add_resource("sys", ResourceType.PROMPT, Prompt.from_text("You review {topic} {other}."))
    res = run(agent, [{"key": "a", "q": "go", "args": {"topic": "tea", "unused": 1}}])
    assert res.errors == []
    reply = json.loads(answers(res)[0]["content"])
    assert reply == {"roles": ["system", "user"], "first": "You review tea {other}.",
                     "model": "m-1", "options": {"temperature": 0.1}}


def test_chat_model_connection_declared_as_instance():
    # add_resource accepts Resource instances (the plan keeps them); a scripted model
    # given as an instance must answer like one given as a descriptor
    agent = chat_agent(ScriptedChatModel(default_reply="from instance"))
    res = run(agent, [{"key": "a", "q": "x"}])
    [ans] = answers(res)
    assert ans["error"] is None, ans["error"]
    assert ans["content"] == "from instance"


def script_mixed_ids(req: ScriptedRequest) -> Any:
    if not req.tool_results:
        return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
            ToolCall(id="call-0-1", name="echo_tool", arguments={"a": 1}),
            ToolCall(id="", name="echo_tool", arguments={"a": 2}),
        ])
    return _tool_messages_reply(req)


def test_synthetic_tool_call_ids_do_not_collide_with_provider_ids():
    agent = chat_agent(scripted(script_mixed_ids), tools=["echo_tool"])
    res = run(agent, [{"key": "a", "q": "go"}])
    assert res.errors == []
    reply = json.loads(answers(res)[0]["content"])
    ids = reply["asked_ids"]
    assert len(set(ids)) == 2 and all(ids), ids
    assert [reply["results"][i] for i in ids] == ["1", "2"]


def script_echo_number(req: ScriptedRequest) -> Any:
    n = int(req.last_user_text)
    if not req.tool_results:
        return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
            ToolCall(id="", name="echo_tool", arguments={"a": n}),
            ToolCall(id="", name="echo_tool", arguments={"a": n + 1}),
        ])
    return {"n": n, "results": sorted(int(m.content) for m in req.tool_results)}


class TwoChats(Agent):
    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        for n in event.input["ns"]:
            ctx.send_event(ChatRequestEvent(model="model", messages=[ChatMessage(content=str(n))]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "error": event.error,
                                           "reply": json.loads(event.response.message.content)
                                           if event.response else None}))


def test_several_chats_in_one_run_each_get_their_own_tool_results():
    agent = TwoChats()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, scripted(script_echo_number))
    agent.add_resource("model", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn", tools=["echo_tool"]))
    agent.add_resource("echo_tool", ResourceType.TOOL, echo_tool)
    res = run(agent, [{"key": "a", "ns": [10, 20, 30]}, {"key": "b", "ns": [40]}])
    assert res.errors == []
    assert all(o["error"] is None for o in res.outputs)
    got = sorted((o["key"], o["reply"]["n"], o["reply"]["results"]) for o in res.outputs)
    assert got == [("a", 10, [10, 11]), ("a", 20, [20, 21]), ("a", 30, [30, 31]),
                   ("b", 40, [40, 41])]


_STALE: dict[str, RunnerContext] = {}


class KeepsContext(Agent):
    @action(InputEvent)
    @staticmethod
    def first(event: InputEvent, ctx: RunnerContext) -> None:
        _STALE["ctx"] = ctx
        ctx.send_event(Ping())

    @action(Ping)
    @staticmethod
    def later(event: Ping, ctx: RunnerContext) -> None:
        from flink_agents_py.api import NotInActionContextError, ResourceNotFoundError

        out: dict[str, Any] = {"key": ctx.key}
        try:
            _STALE["ctx"].send_event(OutputEvent(output="stale"))
        except NotInActionContextError:
            out["stale"] = "refused"
        try:
            ctx.get_resource("nope", ResourceType.TOOL)
        except ResourceNotFoundError as e:
            out["missing"] = str(e)
        ctx.send_event(OutputEvent(output=out))


def test_stale_context_is_refused_and_missing_resource_is_named():
    res = run(KeepsContext(), [{"key": "a"}])
    assert res.errors == []
    [out] = res.outputs
    assert out["stale"] == "refused"
    assert "nope" in out["missing"] and "tool" in out["missing"]


def test_max_in_flight_one_runs_io_calls_one_at_a_time(probes):
    records = [{"key": k, "i": i} for i in range(2) for k in ("x", "y", "z")]
    res = run(SlowEcho(), records, max_in_flight=1)
    assert res.errors == []
    assert len(res.outputs) == 6
    kinds = [kind for kind, _, _ in probes.store("io_log", list)]
    assert kinds == ["start", "end"] * 6


@pytest.mark.parametrize(("one_at_a_time", "where"), [
    (False, "at the end of input"), (True, "before the local runner's next input")])
def test_a_run_that_can_never_finish_is_an_error_record_and_the_run_goes_on(monkeypatch,
                                                                           one_at_a_time,
                                                                           where):
    # a broken invariant: the first call outcome of key "lost" never reaches the core, so
    # its run stays busy with nothing in flight; it is given up, as on Flink
    from flink_agents_py.runtime.core._inbox import Inbox

    put, lost = Inbox.put, []

    def dropping(self: Inbox, key: Any, item: Any) -> None:
        if key == "lost" and not lost:
            lost.append(item)
            return
        put(self, key, item)

    monkeypatch.setattr(Inbox, "put", dropping)
    records = [{"key": "lost", "i": 1}, {"key": "lost", "i": 2}, {"key": "ok", "i": 3}]
    result = AgentsExecutionEnvironment.local().from_list(records).apply(SlowEcho()).run(
        one_at_a_time=one_at_a_time)
    assert len(lost) == 1
    assert sorted((o["key"], o["got"]) for o in result.outputs) == [
        ("lost", 200), ("ok", 300)]
    assert [(e.key, e.seq, e.action, e.error_type) for e in result.errors] == [
        ("lost", 0, "on_input", "UnfinishedRunError")]
    assert f"the run of key 'lost' (input 0) could not finish {where}" in \
        result.errors[0].message
    assert "whose outcome never came back" in result.errors[0].message
    assert result.counters["runs_abandoned"] == 1 and result.completed


@pytest.mark.parametrize("one_at_a_time", [False, True])
def test_a_none_or_falsy_key_with_a_call_in_flight_is_not_taken_for_a_stuck_run(probes,
                                                                               one_at_a_time):
    # None is a record key like any other: its calls in flight count as in flight, as on
    # Flink (test_operator_costs: a run of key None was given up there while its call ran)
    keys = [None, 0, "", "x"]
    records = [{"key": k, "i": i} for i in range(3) for k in keys]
    result = (AgentsExecutionEnvironment.local()
              .from_list(records, key_selector=lambda r: r["key"])
              .apply(SlowEcho()).run(one_at_a_time=one_at_a_time))
    assert result.errors == [] and not result.counters.get("runs_abandoned")
    outs = by_key(result.outputs)
    assert {k: [o["got"] for o in outs[k]] for k in keys} == {
        k: [0, 100, 200] for k in keys}


def test_flink_agents_local_names_on_the_native_runner_say_what_to_use():
    """``to_list()`` / ``execute()`` (Flink Agents' local runner) name ``collect()`` and
    ``flink_agents_py.compat``; other missing names keep Python's own error and hint."""
    env = AgentsExecutionEnvironment.get_execution_environment()
    job = env.from_list([{"key": "a", "n": 1}])
    with pytest.raises(AttributeError, match=r"'to_list'.*collect\(\).*flink_agents_py\.compat"):
        job.to_list()
    with pytest.raises(AttributeError, match=r"'execute'.*collect\(\).*flink_agents_py\.compat"):
        env.execute()
    with pytest.raises(AttributeError) as missing:
        job.colect()
    assert str(missing.value) == "'LocalAgentJob' object has no attribute 'colect'"
    assert missing.value.name == "colect" and missing.value.obj is job  # "Did you mean"
    assert not hasattr(job, "to_list") and hasattr(job, "collect")


async def _doubled(x: int) -> int:
    count("doubled ran")
    return 2 * x


class SyncCallOfAsync(Agent):
    """A plain action giving an ``async`` function to the synchronous ``durable_execute``."""

    @action(InputEvent)
    @staticmethod
    def go(event: InputEvent, ctx: RunnerContext) -> None:
        try:
            value: Any = ctx.durable_execute(_doubled, 2)
        except TypeError as e:
            value = f"TypeError: {e}"
        ctx.send_event(OutputEvent(output=value))


def test_an_async_function_given_to_durable_execute_says_to_await_durable_execute_async(
        probes, recwarn):
    """Its coroutine is closed unrun (no "never awaited" warning), and the recorded failure
    names the function and ``durable_execute_async`` (recorded, so a replay gives it too)."""
    env = AgentsExecutionEnvironment.get_execution_environment()
    result = env.from_list([{"key": "a"}]).apply(SyncCallOfAsync()).run()
    assert result.errors == []
    [out] = result.outputs
    assert out.startswith("TypeError: ctx.durable_execute(") and "_doubled is async" in out
    assert "await ctx.durable_execute_async(_doubled, ...)" in out
    assert probes["doubled ran"] == 0
    assert not [w for w in recwarn if "never awaited" in str(w.message)]
