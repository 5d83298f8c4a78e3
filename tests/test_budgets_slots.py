"""A chat held by its budget gives its I/O executor slot up while it waits.

Under ``on_exceeded="hold"`` a key's chat waits until the budget's window ends (a day, for a
daily budget), and under an agent budget a call waits for the calls in flight to settle.
Each kept its I/O executor slot meanwhile: with ``max_in_flight`` keys held, every other
call of the operator (other keys, other models, tools) waited for the window's end. Now
the slot goes to other calls while the chat is held; it still counts as a waiting call
(backpressure).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from flink_agents_py.api import (
    Budget,
    ChatMessage,
    ChatModelSetup,
    ChatResponse,
    MessageRole,
    TokenUsage,
)
from flink_agents_py.runtime import IOExecutor
from flink_agents_py.runtime._budgets import AgentSpend, budgeted_call

pytestmark = pytest.mark.timeout(60)


def _answer(setup: Any) -> Any:
    async def ask(_: ChatModelSetup) -> ChatResponse:
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content="ok"),
                            usage=TokenUsage(input_tokens=1, output_tokens=1))
    return ask


class _Outcomes:
    def __init__(self) -> None:
        self.done: dict[str, float] = {}
        self.lock = threading.Lock()

    def on_done(self, name: str):
        def done(ok: bool, value: object) -> None:
            assert ok, value
            with self.lock:
                self.done[name] = time.monotonic()
        return done

    def wait(self, name: str, timeout_s: float = 20) -> float:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                if name in self.done:
                    return self.done[name]
            time.sleep(0.005)
        raise AssertionError(f"{name} never completed")


def test_a_key_held_until_its_window_ends_leaves_its_slot_to_other_calls():
    setup = ChatModelSetup(connection="c", budget=Budget(max_tokens=2, window_s=2.0,
                                                         on_exceeded="hold"))
    spent = {"input": 1, "output": 1, "cost": 0.0, "window_start": time.time()}
    executor, seen = IOExecutor(max_in_flight=1), _Outcomes()
    try:
        executor.submit(budgeted_call, (setup, "k", spent, _answer(setup), None), {},
                        seen.on_done("held"), key="k")
        executor.submit(lambda: "other", (), {}, seen.on_done("other"), key="other")
        other = seen.wait("other")
        held = seen.wait("held")
        assert other < held, "the other call waited for the held key's window to end"
        assert executor.waiting == 0 and executor.in_flight == 0
    finally:
        executor.stop()


def test_a_call_waiting_for_an_agent_budgets_calls_in_flight_leaves_its_slot():
    import asyncio

    ledger = AgentSpend(Budget(max_tokens=100, scope="agent"), parallelism=1)
    first = asyncio.run(ledger.admit(time.time))  # in flight: the next call waits for it
    assert first[1] is None and ledger.in_flight == 1
    executor, seen = IOExecutor(max_in_flight=1), _Outcomes()
    try:
        executor.submit(ledger.admit, (time.time,), {}, seen.on_done("waits"), key="a")
        executor.submit(lambda: "other", (), {}, seen.on_done("other"), key="b")
        seen.wait("other")
        assert "waits" not in seen.done and executor.waiting == 1  # still waiting, counted
        ledger.settle(time.time(), (1, 1, 0.0))
        seen.wait("waits")
        assert ledger.in_flight == 1
    finally:
        executor.stop()
