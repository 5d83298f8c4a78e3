"""What an action is handed shares no list or dict with the stored form a restore replays.

An action gets values rebuilt from stored forms: a durable call's recorded result, the
event that triggered it (kept in the run's state), a chat's answer. pydantic keeps a field
typed ``Any`` (``dict[str, Any]``'s values) as it is given, so values rebuilt from the stored
form itself held the stored lists and dicts: an action changing its result or event in place
(an ``append``, a ``sort``) changed what a restore replays to it, and the restored run went
another way than the fault-free one (here: a list one item longer, a call made with other
arguments). Each program here is checkpointed while the action waits on a later call,
restored in a fresh core, and must end as the run without a fault does.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from pydantic import BaseModel

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
from flink_agents_py.runtime._chat_request import request_event
from flink_agents_py.runtime.recorder._state import InMemoryKeyState, RunState

pytestmark = pytest.mark.timeout(60)

GATE = threading.Event()
CALLS: list[Any] = []


class Box(BaseModel):
    data: dict[str, Any] = {}


class Carried(Event):
    data: dict[str, Any] = {}


def boxed() -> Box:
    CALLS.append("boxed")
    return Box(data={"n": [1]})


def gate(items: list[Any]) -> int:
    CALLS.append(list(items))
    GATE.wait(10)
    return len(items)


class Model(ChatModelConnection):
    def chat(self, messages: list[ChatMessage], **kwargs: Any) -> ChatResponse:
        CALLS.append("model")
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content="x"),
            metadata={"k": {"n": [1]}},
        )


class Changing(Agent):
    """Actions that change what they are handed in place, then wait on a call."""

    @chat_model_connection
    @staticmethod
    def conn() -> ResourceDescriptor:
        return ResourceDescriptor(Model)

    @chat_model_setup
    @staticmethod
    def model() -> ResourceDescriptor:
        return ResourceDescriptor(ChatModelSetup, connection="conn")

    @action(InputEvent)
    @staticmethod
    async def start(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input == "chat":
            ctx.send_event(
                ChatRequestEvent(model="model", messages=[ChatMessage(role="user", content="q")])
            )
        elif event.input == "event":
            ctx.send_event(Carried(data={"n": [1]}))
        else:  # a durable call's result
            items = (await ctx.durable_execute_async(boxed)).data["n"]
            items.append("mine")
            await ctx.durable_execute_async(gate, items)
            ctx.send_event(OutputEvent(output=items))

    @action(ChatResponseEvent)
    @staticmethod
    async def answered(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        assert event.response is not None
        items = event.response.metadata["k"]["n"]
        items.append("mine")
        await ctx.durable_execute_async(gate, items)
        ctx.send_event(OutputEvent(output=items))

    @action(Carried)
    @staticmethod
    async def carried(event: Carried, ctx: RunnerContext) -> None:
        items = event.data["n"]
        items.append("mine")
        await ctx.durable_execute_async(gate, items)
        ctx.send_event(OutputEvent(output=items))


def _waiting_on_gate(state: InMemoryKeyState) -> bool:
    run = state.run
    return run is not None and any(
        any("gate" in str(c.target) for c in rec.calls.values()) for rec in run.inflight.values()
    )


def _finish(core: AgentCore, state: InMemoryKeyState, outputs: list[Any]) -> None:
    while state.run is not None:
        core.wait_for("k", 10.0)
        outputs.extend(core.advance("k", state).outputs)


@pytest.mark.parametrize("given", ["result", "event", "chat"])
def test_a_change_in_place_is_not_replayed_after_a_restore(given):
    CALLS.clear()
    GATE.clear()
    core = AgentCore(AgentPlan.from_agent(Changing()))
    core.open()
    try:
        state = InMemoryKeyState()
        outputs = list(core.on_input("k", given, state).outputs)
        while not _waiting_on_gate(state):  # the checkpoint: the action waits on ``gate``
            core.wait_for("k", 10.0)
            outputs.extend(core.advance("k", state).outputs)
        checkpoint = state.run.to_stored()  # type: ignore[union-attr]
        GATE.set()
        _finish(core, state, outputs)
    finally:
        core.close()
    assert outputs == [[1, "mine"]]  # the run without a fault
    first_calls = list(CALLS)
    CALLS.clear()
    core = AgentCore(AgentPlan.from_agent(Changing()))
    core.open()
    try:
        restored = InMemoryKeyState()
        restored.run = RunState.from_stored(checkpoint)
        again = list(core.advance("k", restored).outputs)
        _finish(core, restored, again)
    finally:
        core.close()
    assert again == [[1, "mine"]]
    # recorded calls are replayed, not made again; the one in flight is made with the same
    # arguments as the first time
    assert CALLS == [[1, "mine"]] and first_calls[-1] == [1, "mine"]


def test_a_requests_dicts_are_copies_of_its_stored_form():
    stored = {
        "id": "r0/a/e0",
        "type": "ChatRequestEvent",
        "attributes": {},
        "attachments": {},
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": "q",
                "tool_calls": [],
                "tool_call_id": None,
                "name": None,
                "extra_args": {"x": {"y": [1]}},
            }
        ],
        "prompt_args": {"p": {"q": [1]}},
        "output_schema": {"type": "object", "properties": {"a": {"type": "string"}}},
    }
    request = request_event(stored)
    assert request is not None
    request.messages[0].extra_args["x"]["y"].append(2)
    request.prompt_args["p"]["q"].append(2)  # type: ignore[index]
    request.output_schema["properties"]["a"]["type"] = "integer"  # type: ignore[index]
    assert stored["messages"][0]["extra_args"] == {"x": {"y": [1]}}  # type: ignore[index]
    assert stored["prompt_args"] == {"p": {"q": [1]}}
    assert stored["output_schema"]["properties"]["a"]["type"] == "string"  # type: ignore[index]


USER_MODULE = """
import json
from typing import Any

from pydantic import BaseModel

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, Event, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.testing import check_replay_safety


class Basket(BaseModel):
    items: dict[str, Any] = {}


class Picked(Event):
    found: dict[str, Any] = {}


def fetch(name: str) -> Basket:
    return Basket(items={"fruit": [name]})


def weigh(fruit: list) -> int:
    return len(fruit)


class Shopper(Agent):
    @action(InputEvent)
    @staticmethod
    async def shop(event: InputEvent, ctx: RunnerContext) -> None:
        basket = await ctx.durable_execute_async(fetch, event.input["name"])
        basket.items["fruit"].append("pear")  # changed in place
        weight = await ctx.durable_execute_async(weigh, basket.items["fruit"])
        ctx.send_event(Picked(found={"fruit": basket.items["fruit"], "weight": weight}))

    @action(Picked)
    @staticmethod
    async def pack(event: Picked, ctx: RunnerContext) -> None:
        event.found["fruit"].sort()  # changed in place
        event.found["fruit"].append("bag")
        weight = await ctx.durable_execute_async(weigh, event.found["fruit"])
        ctx.send_event(OutputEvent(output={"fruit": event.found["fruit"], "weight": weight}))


records = [{"key": "a", "name": "plum"}, {"key": "b", "name": "fig"}]
outputs = AgentsExecutionEnvironment.local().from_list(records).apply(Shopper()).collect()
report = check_replay_safety(Shopper(), records, other_process=False)
print(json.dumps({"ok": report.ok, "outputs": outputs, "mismatches": report.mismatches,
                  "divergences": report.divergences}))
"""


def test_a_users_agent_changing_what_it_is_handed_recovers_at_every_crash_point(tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "shopper.py").write_text(USER_MODULE)
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "shopper.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(map(json.dumps, report["outputs"])) == sorted(
        json.dumps(o)
        for o in [
            {"fruit": ["pear", "plum", "bag"], "weight": 3},
            {"fruit": ["fig", "pear", "bag"], "weight": 3},
        ]
    )
    assert report["ok"], report
    assert report["mismatches"] == 0 and report["divergences"] == 0
