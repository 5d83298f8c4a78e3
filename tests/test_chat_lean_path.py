"""The built-in chat action's lean path: what a chat keeps in state and what it skips.

A chat through a setup that fills no prompt reads no memory, so its action counts no memory
operation: it is not a reader whose view other actions' sensory writes must be undone for
while it waits for the model (before, it read ``_subagent.input`` on every chat and carried
an undo entry for each write a sibling committed meanwhile, in keyed state). A setup that
does fill prompts, its own ``build_messages`` included, still gets a sub-agent's input.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

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
    action,
    chat_model_connection,
    chat_model_setup,
)
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore
from flink_agents_py.runtime._builtins import CHAT_ROUTES
from flink_agents_py.runtime._serde import event_json
from flink_agents_py.runtime.core._results import event_of
from flink_agents_py.runtime.recorder._state import InMemoryKeyState, RunState

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]


class Echo(ChatModelConnection):
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT,
                                                content=f"re: {messages[-1].content}"))


class Tick(Event):
    n: int = 0


class ChatBesideWrites(Agent):
    """One input: a chat, and a sibling action that writes sensory memory while it waits."""

    @chat_model_connection
    @staticmethod
    def conn() -> ResourceDescriptor:
        return ResourceDescriptor(Echo)

    @chat_model_setup
    @staticmethod
    def model() -> ResourceDescriptor:
        return ResourceDescriptor(ChatModelSetup, connection="conn")

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(ChatRequestEvent(model="model", messages=[ChatMessage(content="hi")]))
        ctx.send_event(Tick(n=1))

    @action(Tick)
    @staticmethod
    def tick(event: Tick, ctx: RunnerContext) -> None:
        ctx.sensory_memory.set("ticks", event.n)

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        assert event.response is not None
        ctx.send_event(OutputEvent(output={"text": event.response.content,
                                           "ticks": ctx.sensory_memory.get("ticks")}))


def test_a_waiting_chat_without_a_prompt_carries_no_memory_bookkeeping_in_state():
    core = AgentCore(AgentPlan.from_agent(ChatBesideWrites()))
    core.open()
    try:
        state = InMemoryKeyState()
        res = core.on_input("k", {"q": 1}, state)
        assert res.busy and not res.outputs
        assert state.run is not None
        (rec,) = state.run.inflight.values()  # the chat, waiting; the sibling has written
        assert rec.action in CHAT_ROUTES.values()
        assert state.run.sensory == {"ticks": 1}
        # before: memory_ops 1 (the read of "_subagent.input") and the sibling's write's undo
        assert rec.memory_ops == 0 and rec.memory_undo == []
        assert "memory_ops" not in rec.to_builtins() and "memory_undo" not in rec.to_builtins()
        outputs = list(res.outputs)
        while state.run is not None:
            core.wait_for("k", 5.0)
            outputs += core.advance("k", state).outputs
        assert outputs == [{"text": "re: hi", "ticks": 1}]
    finally:
        core.close()


MODULE = textwrap.dedent('''
    from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent,
                                     InternalSubagent, MessageRole, OutputEvent,
                                     ResourceDescriptor, ResourceType, action)
    from flink_agents_py.testing import model_from_function

    def echo(request):
        return " | ".join(m.content for m in request.messages)

    class Tagged(ChatModelSetup):
        """A setup with no prompt whose own build_messages uses the prompt arguments."""

        def build_messages(self, messages, prompt_args):
            return [ChatMessage(role=MessageRole.SYSTEM,
                                content=f"about {(prompt_args or {}).get('topic')}"),
                    *messages]

    class Child(Agent):
        @action(InputEvent)
        @staticmethod
        async def go(event, ctx):
            answer = await ctx.chat("tagged", [ChatMessage(content="go")])
            ctx.send_event(OutputEvent(output=answer.content))

    class Parent(Agent):
        @action(InputEvent)
        @staticmethod
        async def go(event, ctx):
            done = await (await ctx.submit_subagent("child", {"topic": event.input["t"]}))
            ctx.send_event(OutputEvent(output=done.result))

    def build():
        child = Child()
        child.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(echo))
        child.add_resource("tagged", ResourceType.CHAT_MODEL, ResourceDescriptor(
            Tagged, connection="conn"))
        parent = Parent()
        parent.add_resource("child", ResourceType.AGENT, ResourceDescriptor(
            InternalSubagent, agent=child, description="Answers."))
        return parent
''')

MAIN = textwrap.dedent('''
    import json
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.testing import check_replay_safety
    import tagged

    records = [{"key": "a", "t": "shoes"}]
    outs = AgentsExecutionEnvironment.local().from_list(records).apply(tagged.build()).collect()
    report = check_replay_safety(tagged.build(), records, other_process=False)
    print(json.dumps({"outputs": outs, "safe": report.ok, "report": str(report)}))
''')


def test_a_setups_own_build_messages_still_gets_a_subagents_input_as_prompt_args(tmp_path):
    (tmp_path / "tagged.py").write_text(MODULE)
    (tmp_path / "main.py").write_text(MAIN)
    proc = subprocess.run([sys.executable, "main.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=110, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads(proc.stdout.strip().splitlines()[-1])
    assert run["safe"], run["report"]
    assert run["outputs"] == [["about shoes | go"]]


async def _slow_note(text: str) -> str:
    return text.upper()


class AnswerThatWaits(ChatBesideWrites):
    """The answer's action makes a durable call, so it waits in state with its event."""

    @action(ChatResponseEvent)
    @staticmethod
    async def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        assert event.response is not None
        note = await ctx.durable_execute_async(_slow_note, event.response.content)
        ctx.send_event(OutputEvent(output={"text": note}))


def test_the_answer_event_is_stored_as_its_json_form_and_rebuilds_after_a_restore():
    # the chat's answer event is stored from the model call's recorded result (no second
    # copy): the stored form is the event's JSON form, and a restored run replays from it
    plan = AgentPlan.from_agent(AnswerThatWaits())
    core = AgentCore(plan)
    core.open()
    try:
        state = InMemoryKeyState()
        core.on_input("k", {"q": 1}, state)
        while state.run is not None and not any(
                r.event.get("type") == "ChatResponseEvent" for r in state.run.inflight.values()):
            core.wait_for("k", 5.0)
            core.advance("k", state)
        assert state.run is not None
        (rec,) = [r for r in state.run.inflight.values()
                  if r.event.get("type") == "ChatResponseEvent"]
        stored = json.loads(json.dumps(rec.event))
        assert stored["response"] == {
            "message": {"role": "assistant", "content": "re: hi", "tool_calls": [],
                        "tool_call_id": None, "name": None, "extra_args": {}},
            "structured": None, "model": None, "response_id": None, "usage": None,
            "finish_reason": None, "metadata": {}}
        assert event_json(event_of(rec.event), "the answer") == rec.event
    finally:
        core.close()
    restored = InMemoryKeyState()  # a restore: the run as the host stored it
    restored.run = RunState.from_stored(state.run.to_stored())
    restored.memory = json.loads(json.dumps(state.memory))
    again = AgentCore(plan)
    again.open()
    try:
        outputs = list(again.advance("k", restored).outputs)
        while restored.run is not None:
            again.wait_for("k", 5.0)
            outputs += again.advance("k", restored).outputs
    finally:
        again.close()
    assert outputs == [{"text": "RE: HI"}]
