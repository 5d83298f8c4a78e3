"""Hooks that follow an action's end share its clock reading; no reading outlives a callback.

Issue 31, part 4: with the agent metrics on, a chat read the clock twelve times on the
operator thread, once in nearly every hook. Between an action's end and the dispatch of its
events, the start of the action one of them triggers and the run's end, only the runtime's
bookkeeping runs, so ``MetricsProbe`` keeps the end's reading there (``Probe.reading``) and
a chat reads the clock six times: at the run's start, each action's end, and its model
call's start and end. The core clears the kept reading at the start of every host callback
and before it resumes an action's code, so a reading never stands for time that user code
or waiting took.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import flink_agents_py
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelConnection,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponse,
    ChatResponseEvent,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    RunnerContext,
    action,
    chat_model_connection,
    chat_model_setup,
)
from flink_agents_py.observability import AgentMetrics
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore, InMemoryKeyState, Observer, Probe

pytestmark = pytest.mark.timeout(60)


class InstantModel(ChatModelConnection):
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content=f"re: {messages[-1].content}")
        )


class Chat(Agent):
    """One chat a record: ``ask`` sends the request, ``answer`` the output."""

    @chat_model_connection
    @staticmethod
    def conn() -> ResourceDescriptor:
        return ResourceDescriptor(InstantModel)

    @chat_model_setup
    @staticmethod
    def model() -> ResourceDescriptor:
        return ResourceDescriptor(ChatModelSetup, connection="conn")

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(ChatRequestEvent(model="model", messages=[ChatMessage(content="hi")]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=event.response.content if event.response else None))


class _Ticks:
    """A clock that advances one second a reading, counting its readings."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return float(self.reads)


def _chat(core: AgentCore, key: str) -> list[Any]:
    state = InMemoryKeyState()
    outputs = list(core.on_input(key, {"n": key}, state).outputs)
    while state.run is not None:
        assert core.wait_for(key, 10)
        outputs += core.advance(key, state).outputs
    return outputs


def test_a_chat_reads_the_clock_six_times_and_what_follows_an_actions_end_shares_it():
    ticks = _Ticks()
    metrics = AgentMetrics(clock=ticks)
    core = AgentCore(AgentPlan.from_agent(Chat()), observer=metrics)
    core.open()
    try:
        assert _chat(core, "w") == ["re: hi"]  # (the core finds its routes)
        before = ticks.reads
        assert _chat(core, "k") == ["re: hi"]
    finally:
        core.close()
    # the run's start; ask's end (the request's dispatch and the chat action's start share
    # it); the model call's start and end; the chat action's end (the answer's dispatch and
    # answer's start share it); answer's end (the run's end shares it)
    assert ticks.reads - before == 6

    def newest(name: str, label: str | None) -> float:
        return metrics.latency[name][label].newest(1)[0]

    assert newest("run_latency_ms", None) == 5000.0
    assert newest("action_latency_ms", "ask") == 1000.0
    assert newest("chat_call_latency_ms", "model") == 1000.0
    # the chat and its chat action: from ask's end to the chat action's end, both
    assert newest("chat_latency_ms", "model") == 3000.0
    assert newest("action_latency_ms", "_chat_model_action") == 3000.0
    assert newest("action_latency_ms", "answer") == 1000.0
    snap = metrics.snapshot()
    assert snap["chats"] == {"model": 1 + 1} and snap["chat_calls"] == {"model": 2}
    assert snap["runs_completed"] == 2 and snap["calls_in_flight"] == 0
    assert metrics.open_calls() == 0 and not metrics._keys


async def _step(x: int) -> int:
    return x + 1


class Steps(Agent):
    """An action resumed after each of two durable calls; another waits for ever."""

    @action(InputEvent)
    @staticmethod
    async def work(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input.get("wait"):
            await ctx.wait_for("never")
        a = await ctx.durable_execute_async(_step, 1)
        b = await ctx.durable_execute_async(_step, a)
        ctx.send_event(OutputEvent(output=b))


class _Keeping(Probe):
    """Keeps a reading in every hook, recording the reading each hook found."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.reading = None
        self.seen: list[tuple[str, Any]] = []

    def _hook(self, name: str) -> str:
        self.seen.append((name, self.reading))
        self.reading = f"kept by {name}"
        return name

    def input_dispatched(self, key: Any, seq: int, event: Any) -> Any:
        return self._hook("input_dispatched")

    def run_completed(self, key: Any, seq: int, token: Any) -> None:
        self._hook("run_completed")

    def event_dispatched(self, key: Any, event: Any) -> None:
        self._hook("event_dispatched")

    def action_started(self, key: Any, execution_id: str, action: str, reentered: bool) -> Any:
        return self._hook("action_started")

    def action_finished(
        self, key: Any, execution_id: str, action: str, error: BaseException | None, token: Any
    ) -> None:
        self._hook("action_finished")

    def output_emitted(self, key: Any, output: Any, event_id: str) -> None:
        self._hook("output_emitted")

    def call_started(self, key: Any, call_id: str, command: Any, replayed: bool) -> None:
        self._hook("call_started")

    def call_finished(self, key: Any, call_id: str, ok: bool, result: Any) -> None:
        self._hook("call_finished")

    def mark(self, callback: str) -> None:
        self.seen.append((callback, "callback"))


class _With(Observer):
    def __init__(self, probe: Probe) -> None:
        self.probe = probe


def test_the_core_clears_a_kept_reading_at_each_callback_and_before_an_action_resumes():
    probe = _Keeping()
    core = AgentCore(AgentPlan.from_agent(Steps()), observer=_With(probe))
    core.open()
    try:
        state = InMemoryKeyState()
        probe.mark("on_input")
        core.on_input("k", {"n": 1}, state)
        while state.run is not None:
            assert core.wait_for("k", 10)
            probe.mark("advance")
            core.advance("k", state)
        parked = InMemoryKeyState()
        probe.mark("on_input")
        core.on_input("p", {"wait": True}, parked)  # parked for good
        probe.mark("give_up")
        core.give_up("p", parked)
    finally:
        core.close()
    seen = probe.seen
    firsts = [
        seen[i + 1]
        for i, (_, v) in enumerate(seen)
        if v == "callback" and i + 1 < len(seen) and seen[i + 1][1] != "callback"
    ]
    # each callback's first hook: a run's start, a call's outcome, the end of a run given
    # up (parked, so not live: no action end comes first)
    assert [name for name, _ in firsts] == [
        "input_dispatched",
        "call_finished",
        "call_finished",
        "input_dispatched",
        "run_completed",
    ]
    assert all(reading is None for _, reading in firsts), seen
    # a call's outcome resumes its action: the next hook (its next call's start, or its
    # end) finds no reading kept from before its code ran
    after_resume = [seen[i + 1] for i, (name, _) in enumerate(seen[:-1]) if name == "call_finished"]
    assert [name for name, _ in after_resume] == ["call_started", "action_finished"]
    assert all(reading is None for _, reading in after_resume), seen


def test_the_default_event_triggered_calls_event_dispatched_then_action_started():
    probe = _Keeping()
    event = OutputEvent(output=1, id="r0/a/e0")
    assert probe.event_triggered("k", event, "b") == "action_started"
    assert [name for name, _ in probe.seen] == ["event_dispatched", "action_started"]


def test_a_users_chat_module_times_its_chats_with_six_clock_reads(tmp_path: Path):
    (tmp_path / "my_chat.py").write_text(
        textwrap.dedent("""
        from flink_agents_py.api import (
            Agent, ChatMessage, ChatModelConnection, ChatModelSetup, ChatRequestEvent,
            ChatResponse, ChatResponseEvent, InputEvent, MessageRole, OutputEvent,
            ResourceDescriptor, RunnerContext, action, chat_model_connection,
            chat_model_setup)


        class Parrot(ChatModelConnection):
            async def achat(self, messages, **kwargs):
                return ChatResponse(message=ChatMessage(
                    role=MessageRole.ASSISTANT, content=messages[-1].content.upper()))


        class Shouter(Agent):
            @chat_model_connection
            @staticmethod
            def parrot():
                return ResourceDescriptor(Parrot)

            @chat_model_setup
            @staticmethod
            def loud():
                return ResourceDescriptor(ChatModelSetup, connection="parrot")

            @action(InputEvent)
            @staticmethod
            def ask(event, ctx: RunnerContext):
                ctx.send_event(ChatRequestEvent(
                    model="loud", messages=[ChatMessage(content=str(event.input))]))

            @action(ChatResponseEvent)
            @staticmethod
            def answer(event, ctx: RunnerContext):
                ctx.send_event(OutputEvent(output=event.response.content))
    """)
    )
    (tmp_path / "main.py").write_text(
        textwrap.dedent("""
        from my_chat import Shouter
        from flink_agents_py.observability import AgentMetrics
        from flink_agents_py.plan import AgentPlan
        from flink_agents_py.runtime import AgentCore, InMemoryKeyState

        reads = [0]

        def clock():
            reads[0] += 1
            return reads[0] / 1000.0

        metrics = AgentMetrics(clock=clock)
        core = AgentCore(AgentPlan.from_agent(Shouter()), observer=metrics)
        core.open()
        outs, per_chat = [], []
        for n, word in enumerate(["hi", "yo", "hey"]):
            state = InMemoryKeyState()
            before = reads[0]
            outs += core.on_input(f"k{n}", word, state).outputs
            while state.run is not None:
                core.wait_for(f"k{n}", 10)
                outs += core.advance(f"k{n}", state).outputs
            per_chat.append(reads[0] - before)
        core.close()
        snap = metrics.snapshot()
        chat = snap["latency_ms"]["chat"]["loud"]
        action = snap["latency_ms"]["action"]["_chat_model_action"]
        print(outs, per_chat[1:], snap["chats"], snap["chat_calls"], chat["count"],
              chat["p50"] == action["p50"], snap["latency_ms"]["run"]["count"])
    """)
    )
    root = Path(flink_agents_py.__file__).parents[1]  # the package this process tests
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN"))}
    env["PYTHONPATH"] = str(root)
    proc = subprocess.run(
        [sys.executable, "main.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == [
        "['HI',",
        "'YO',",
        "'HEY']",
        "[6,",
        "6]",
        "{'loud':",
        "3}",
        "{'loud':",
        "3}",
        "3",
        "True",
        "3",
    ]
