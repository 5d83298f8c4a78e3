"""A chat's run on the straight lines (``runtime/core/_at_once.py``) is seen as on the general path.

A chat's user action (the run's one action on ``InputEvent``) is run and finished in one
frame, its memory writes committed there. Each program here runs through the core twice,
with the straight lines and with them off (``_at_once.AT_ONCE``), and everything observable is
compared (``test_at_once._drive``): outputs, error records, every observer hook with its
event, the metrics, the counters, log lines, and each key's stored state after every
callback, a chat waiting for its model included (so a checkpoint taken at any point restores
the same run under either path, and under the code before them: the general path is that
code). The programs: chats that answer, fail (no such model), whose model raises, that call
a tool, whose user action also writes short-term memory or sends two events, answers that
raise, await a durable call, write memory or send an event another action takes, and an
agent listening to memory write events; then the crash checker restores a chat at every
point.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from test_at_once import Mixed, _drive, _general_path, _latency_counts, _stored

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
    ResourceDescriptor,
    RunnerContext,
    ToolCall,
    action,
    chat_model_connection,
    chat_model_setup,
    tool,
)
from flink_agents_py.observability import AgentMetrics
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore
from flink_agents_py.runtime.recorder._state import InMemoryKeyState
from flink_agents_py.testing import check_replay_safety

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.filterwarnings("ignore::flink_agents_py.plan._action_checks.ActionReturnWarning"),
]


class Scripted(ChatModelConnection):
    """Answers ``re: <last text>``; raises for ``raise``; asks the tool once for ``tool``."""

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        last = messages[-1]
        if last.content == "raise":
            raise RuntimeError("the model is down")
        if last.content == "tool" and last.role is MessageRole.USER:
            call = ToolCall(id="c1", name="double", arguments={"n": 21})
            return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[call]))
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content=f"re: {last.content}")
        )


async def looked_up(n: Any) -> str:
    return f"looked up {n}"


class Noted(Event):
    note: str = ""


class Chatty(Agent):
    """A chat per input; the input's ``do`` says what its actions do besides."""

    @chat_model_connection
    @staticmethod
    def conn() -> ResourceDescriptor:
        return ResourceDescriptor(Scripted)

    @chat_model_setup
    @staticmethod
    def model() -> ResourceDescriptor:
        return ResourceDescriptor(ChatModelSetup, connection="conn", tools=["double"])

    @tool
    @staticmethod
    def double(n: int) -> int:
        """Twice ``n``."""
        return 2 * n

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        do = event.input["do"]
        ctx.sensory_memory.set("do", do)
        ctx.sensory_memory.set("n", event.input["n"])
        if do == "short":
            ctx.short_term_memory.set("asked", (ctx.short_term_memory.get("asked") or 0) + 1)
        if do == "echo":
            ctx.send_event(OutputEvent(output={"key": ctx.key, "echo": event.input["n"]}))
            return
        text = {"raise_model": "raise", "tool": "tool"}.get(do, f"q{event.input['n']}")
        if do == "changed":  # the sender changes its request after sending it
            request = ChatRequestEvent(model="model", messages=[ChatMessage(content=text)])
            ctx.send_event(request)
            request.messages.append(ChatMessage(content="late"))
            request.messages[0].extra_args["late"] = True
            return
        ctx.send_event(
            ChatRequestEvent(
                model="nowhere" if do == "no_model" else "model",
                messages=[ChatMessage(content=text)],
            )
        )
        if do == "two":
            ctx.send_event(OutputEvent(output={"key": ctx.key, "asked": event.input["n"]}))

    @action(ChatResponseEvent)
    @staticmethod
    async def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        do = ctx.sensory_memory.get("do")
        out = {
            "key": ctx.key,
            "n": ctx.sensory_memory.get("n"),
            "error": event.error,
            "text": event.response.content if event.response else None,
        }
        if do == "answer_raise":
            raise ValueError(f"refused {out['n']}")
        if do == "answer_await":
            out["found"] = await ctx.durable_execute_async(looked_up, out["n"])
        if do == "answer_short":
            ctx.short_term_memory.set("last", out["text"])
        if do == "answer_chain":
            ctx.send_event(Noted(note=str(out["n"])))
            return
        ctx.send_event(OutputEvent(output=out))

    @action(Noted)
    @staticmethod
    def on_noted(event: Noted, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "noted": event.note}))


class PlainAnswer(Chatty):
    """``Chatty`` with a plain (not async) answering action."""

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        if ctx.sensory_memory.get("do") == "answer_raise":
            raise ValueError("refused")
        ctx.send_event(
            OutputEvent(
                output={
                    "key": ctx.key,
                    "text": event.response.content if event.response else None,
                    "error": event.error,
                }
            )
        )


class WriteEvents(Chatty):
    """``Chatty`` listening to memory write events: its writes go through the general end."""

    @action(Event)
    @staticmethod
    def _sensory_write_event(event: Event, ctx: RunnerContext) -> None:
        ctx.short_term_memory.set("writes", (ctx.short_term_memory.get("writes") or 0) + 1)


DOS = [
    "chat",
    "short",
    "two",
    "no_model",
    "raise_model",
    "tool",
    "echo",
    "answer_raise",
    "answer_await",
    "answer_short",
    "answer_chain",
    "chat",
]


def _records(dos: list[str], keys: int = 2) -> list[dict[str, Any]]:
    return [{"key": f"k{i % keys}", "n": i, "do": do} for i, do in enumerate(dos * 2)]


@pytest.mark.parametrize("agent", [Chatty, PlainAnswer, WriteEvents])
def test_a_chats_run_is_seen_the_same_on_either_path(agent):
    records = _records(DOS)
    fast = _drive(agent(), records, at_once=True)
    general = _drive(agent(), records, at_once=False)
    assert fast["seen"] == general["seen"]
    assert fast["logged"] == general["logged"]
    assert fast["hooks"] == general["hooks"]
    assert fast["counters"] == general["counters"]
    assert fast["metrics"] == general["metrics"]


def test_the_chat_programs_do_what_each_input_asks():
    """The comparison above compares real behaviour: answers, failures, tools, memory."""
    out = _drive(Chatty(), _records(DOS, keys=1), at_once=True)
    flat = [o for k, v, *_ in out["seen"] if k == "outputs" for o in json.loads(v)]
    errors = [e for k, v, *_ in out["seen"] if k == "errors" for e in v]
    assert {"key": "k0", "n": 0, "error": None, "text": "re: q0"} in flat
    assert any(o.get("text") == "re: 42" for o in flat)  # the tool's result, answered
    assert any(o.get("error") and "nowhere" in o["error"] for o in flat)
    assert any(o.get("error") and "the model is down" in o["error"] for o in flat)
    assert {"key": "k0", "asked": 2} in flat and {"key": "k0", "echo": 6} in flat
    assert any(o.get("found") == "looked up 8" for o in flat)
    assert {"key": "k0", "noted": "10"} in flat
    assert [(e["seq"], e["action"], e["error_type"]) for e in errors] == [
        (7, "answer", "ValueError"),
        (19, "answer", "ValueError"),
    ]
    waiting = [s for k, *s in out["seen"] if k == "waiting"]
    assert waiting and all(s[1][0] is not None for s in waiting)  # a chat in flight, stored
    last = [s for k, *s in out["seen"] if k == "state"][-1]
    assert json.loads(last[1][1]) == {"asked": 2, "last": "re: q21"}
    assert out["counters"]["actions_failed"] == 2


@pytest.mark.parametrize("agent", [Chatty, PlainAnswer])
def test_a_request_changed_after_it_was_sent_is_asked_and_kept_as_sent(agent):
    """The chat action's request is the sent one, not the object its sender went on changing.

    On the straight line the chat action gets the copy made as the request's stored form was
    written (``_chat_request.request_forms``), on the general path one rebuilt from that
    form: the model is asked, and the waiting chat stored, with what was sent.
    """
    records = _records(["changed", "chat", "changed"], keys=1)
    fast = _drive(agent(), records, at_once=True)
    general = _drive(agent(), records, at_once=False)
    assert fast["seen"] == general["seen"] and fast["hooks"] == general["hooks"]
    flat = [o for k, v, *_ in fast["seen"] if k == "outputs" for o in json.loads(v)]
    assert [o["text"] for o in flat] == [f"re: q{n}" for n in range(6)]  # (each twice)
    stored = [s for k, *s in fast["seen"] if k in ("waiting", "state")]
    assert stored and '"late"' not in json.dumps(stored)


ROUNDS = 450
"""Chats in one run of ``Rechat``: 901 actions, under the event chain limit of 1,000."""


class Rechat(Chatty):
    """Each answer asks again (a model that does not exist: each chat ends at once)."""

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(ChatRequestEvent(model="nowhere", messages=[ChatMessage(content="0")]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        n = (ctx.sensory_memory.get("n") or 0) + 1
        if n < ROUNDS:
            ctx.sensory_memory.set("n", n)
            ctx.send_event(ChatRequestEvent(model="nowhere", messages=[ChatMessage(content="n")]))
            return
        ctx.send_event(OutputEvent(output={"key": ctx.key, "rounds": n, "error": event.error}))


def test_a_run_of_hundreds_of_chats_started_at_once_does_not_grow_the_stack():
    """Each chat starts in the frame of the action that asked, each answer does not."""
    records = [{"key": "k0", "n": 0, "do": "chat"}]
    fast = _drive(Rechat(), records, at_once=True)
    general = _drive(Rechat(), records, at_once=False)
    assert fast["seen"] == general["seen"] and fast["hooks"] == general["hooks"]
    [out] = [o for k, v, *_ in fast["seen"] if k == "outputs" for o in json.loads(v)]
    assert out["rounds"] == ROUNDS and "nowhere" in out["error"]
    assert fast["counters"]["actions_completed"] == 2 * ROUNDS + 1


def test_a_chat_restored_at_every_point_replays_on_the_straight_lines():
    """The crash checker: each point restored (its model calls replayed, not made again)."""
    inputs = [{"key": f"k{i % 2}", "n": i, "do": do} for i, do in enumerate(DOS)]
    report = check_replay_safety(Chatty(), inputs, other_process=False, max_points=40)
    assert report.ok, report.findings
    assert report.points_total > len(inputs) and report.calls > 0


def _metrics_only(agent: Agent, records: list[dict[str, Any]], at_once: bool) -> Any:
    """Outputs, errors, stored state and metrics with the agent metrics as the only observer.

    (Their probe takes a run that ends at once in one hook, ``Probe.run_at_once``: a run
    whose action wrote memory must not be reported so, its writes committed before its
    outputs.)
    """
    with _general_path(not at_once):
        metrics = AgentMetrics()
        core = AgentCore(AgentPlan.from_agent(agent), observer=metrics)
        core.open()
        seen: list[Any] = []
        try:
            states: dict[str, InMemoryKeyState] = {}
            for record in records:
                key = record["key"]
                state = states.setdefault(key, InMemoryKeyState())
                res = core.on_input(key, dict(record), state, fresh=True)
                while state.run is not None:
                    core.wait_for(key, 5.0)
                    res.outputs.extend(core.advance(key, state).outputs)
                seen.append((res.outputs, [e.error_type for e in res.errors], _stored(state)))
        finally:
            core.close()
        return seen, _latency_counts(metrics.snapshot())


@pytest.mark.parametrize(
    "agent,dos",
    [(Chatty, ["chat", "short", "echo", "answer_short"]), (Mixed, ["sensory", "short", "echo"])],
)
def test_with_the_metrics_alone_a_run_that_writes_memory_is_the_same_on_either_path(agent, dos):
    records = _records(dos, keys=1)
    fast, general = (_metrics_only(agent(), records, at_once) for at_once in (True, False))
    assert fast == general
    memories = [json.loads(state[1]) for _, _, state in fast[0]]
    assert memories[-1]  # each program wrote memory that was kept
