"""A call held by flow control gives its I/O executor slot up while it is held.

The executor's ``max_in_flight`` slots are the operator's, shared by every connection. A
throttled call kept its slot while flow control held it, so one provider that throttled
took every slot, and calls to a healthy provider (and tool calls) waited until the first
one answered: measured, 8 records held at ``max_in_flight=4`` kept a ninth record's call to
another provider waiting 74 s. Now a held call frees its slot and takes one back when it may
be sent; it still counts as a waiting call (``IOExecutor.waiting``), so the host's
backpressure stops taking input when too many are held.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from support.probes import count, gate
from test_flow_control import asker, run

from flink_agents_py.api import (
    ChatMessage,
    ChatModelConnection,
    ChatResponse,
    FlowControl,
    MessageRole,
    ProviderError,
    RateLimitInfo,
    ResourceDescriptor,
)
from flink_agents_py.runtime import IOExecutor
from flink_agents_py.runtime.core._executor import io_slot

pytestmark = pytest.mark.timeout(120)


class ThrottlesUntilOpened(ChatModelConnection):
    """Says 429 (``Retry-After: 0.1``) to every call until the test's gate ``label`` opens."""

    label: str

    def chat(self, messages, **kwargs) -> ChatResponse:
        count(self.label)
        if not gate(self.label).is_set():
            raise ProviderError("slow down", status_code=429, retryable=True,
                                rate_limit=RateLimitInfo(retry_after_s=0.1))
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT,
                                                content=f"a: {messages[-1].content}"))


class OpensTheOther(ChatModelConnection):
    """A healthy provider: answers, and opens the gate ``opens`` (the other one recovers)."""

    opens: str

    def chat(self, messages, **kwargs) -> ChatResponse:
        count("healthy")
        gate(self.opens).set()
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT,
                                                content=f"b: {messages[-1].content}"))


def test_calls_held_by_one_throttling_provider_leave_slots_to_another_provider(probes):
    # the throttling provider recovers only once the healthy one has answered: before, its
    # 8 held calls kept all 4 slots, the healthy call never started and they were held until
    # max_throttle_wait_s, then failed
    agent = asker(
        {"slow": ResourceDescriptor(ThrottlesUntilOpened, label="slow", flow_control=FlowControl(
            max_throttle_wait_s=20)),
         "fine": ResourceDescriptor(OpensTheOther, opens="slow")},
        {"a": {"connection": "slow"}, "b": {"connection": "fine"}})
    records = [{"key": f"k{i}", "q": str(i), "model": "a"} for i in range(8)]
    records.append({"key": "other", "q": "8", "model": "b"})
    t0 = time.monotonic()
    res = run(agent, records, max_in_flight=4)
    took = time.monotonic() - t0
    assert res.errors == [] and [o["error"] for o in res.outputs] == [None] * 9
    assert sorted(o["content"] for o in res.outputs) == sorted(
        [f"a: {i}" for i in range(8)] + ["b: 8"])
    assert probes["healthy"] == 1 and probes["slow"] > 8  # held, then answered
    assert took < 15, f"the healthy provider's call waited for the held ones ({took:.1f} s)"


def test_a_held_call_counts_as_waiting_and_its_slot_runs_another_call():
    executor = IOExecutor(max_in_flight=1)
    release = threading.Event()
    done: list[str] = []
    finished = threading.Event()

    async def held(name: str) -> str:
        slot = io_slot()
        assert slot is not None
        slot.give_up()
        while not release.is_set():
            await asyncio.sleep(0.005)
        await slot.take_back()
        return name

    def on_done(ok: bool, value: object) -> None:
        done.append(str(value))
        if len(done) == 4:
            finished.set()

    try:
        executor.submit(held, ("h1",), {}, on_done, key="a")
        executor.submit(held, ("h2",), {}, on_done, key="b")
        executor.submit(held, ("h3",), {}, on_done, key="c")
        # the one slot goes from held call to held call, and then to a plain call
        executor.submit(lambda: "plain", (), {}, on_done, key="d")
        deadline = time.monotonic() + 10
        while done != ["plain"] and time.monotonic() < deadline:
            time.sleep(0.005)
        assert done == ["plain"]
        assert executor.waiting == 3 and executor.in_flight == 0  # backpressure sees them
        assert not executor.wait_waiting_below(3, 0.05)  # the host still waits for input
        release.set()
        assert executor.wait_waiting_below(1, 10)
        assert finished.wait(10) and sorted(done) == ["h1", "h2", "h3", "plain"]
        assert executor.waiting == 0 and executor.in_flight == 0
    finally:
        executor.stop()


def test_outside_an_executor_call_there_is_no_slot_to_give_up():
    async def own_loop() -> object:
        return io_slot()

    assert asyncio.run(own_loop()) is None


class UnavailableUntilOpened(ChatModelConnection):
    """Says 503 to every call until the test's gate ``label`` opens."""

    label: str

    def chat(self, messages, **kwargs) -> ChatResponse:
        count(self.label)
        if not gate(self.label).is_set():
            raise ProviderError("overloaded", status_code=503, retryable=True)
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT,
                                                content=f"a: {messages[-1].content}"))


def test_calls_waiting_out_a_503_backoff_leave_slots_to_another_provider(probes):
    # the error policy's backoff before a retry kept the slot too: the healthy call waited
    # behind the retries, which ran out first
    agent = asker(
        {"down": ResourceDescriptor(UnavailableUntilOpened, label="down"),
         "fine": ResourceDescriptor(OpensTheOther, opens="down")},
        {"a": {"connection": "down", "error_policy": "retry", "retry_max_attempts": 3,
               "retry_initial_backoff_s": 1.0, "retry_max_backoff_s": 1.0},
         "b": {"connection": "fine"}})
    records = [{"key": f"k{i}", "q": str(i), "model": "a"} for i in range(4)]
    records.append({"key": "other", "q": "4", "model": "b"})
    res = run(agent, records, max_in_flight=2)
    assert [o["error"] for o in res.outputs] == [None] * 5, res.outputs
    assert probes["healthy"] == 1


USER_MODULE = '''
import json, threading, time
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelConnection, ChatModelSetup,
                                 ChatResponse, FlowControl, InputEvent, MessageRole,
                                 OutputEvent, ProviderError, RateLimitInfo, ResourceDescriptor,
                                 ResourceType, RunnerContext, action)

RECOVERED = threading.Event()  # the busy provider recovers once the other one answered


class Busy(ChatModelConnection):
    def chat(self, messages, **kwargs):
        if not RECOVERED.is_set():
            raise ProviderError("slow down", status_code=429, retryable=True,
                                rate_limit=RateLimitInfo(retry_after_s=0.2))
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content="busy"))


class Healthy(ChatModelConnection):
    def chat(self, messages, **kwargs):
        RECOVERED.set()
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content="healthy"))


class Router(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        answer = await ctx.chat(event.input["model"], [ChatMessage(content="hi")])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "answer": answer.message.content}))


agent = Router()
for name, conn in (("busy", Busy), ("healthy", Healthy)):
    agent.add_resource(name + "_conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        conn, flow_control=FlowControl(max_throttle_wait_s=30)))
    agent.add_resource(name, ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection=name + "_conn"))
records = [{"key": f"k{i}", "model": "busy"} for i in range(8)]
records.append({"key": "h", "model": "healthy"})
t0 = time.monotonic()
outs = AgentsExecutionEnvironment.local(max_in_flight=4).from_list(records).apply(agent).collect()
print(json.dumps({"answers": sorted(o["answer"] for o in outs), "took": time.monotonic() - t0}))
'''


def test_as_a_user_runs_it_a_throttling_provider_does_not_hold_up_another(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "router.py").write_text(USER_MODULE)
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "router.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=100, env={"PYTHONPATH": str(root), "PATH": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["answers"] == ["busy"] * 8 + ["healthy"]
    assert found["took"] < 20  # before: held until max_throttle_wait_s, then 8 failures
