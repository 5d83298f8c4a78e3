"""The local model's contexts: side by side up to ``instances``, one answer per request.

``LlamaCppChatModel`` hands each chat to a free llama.cpp context of its loaded model (up to
``instances`` of them, on the same weights); identical requests at temperature 0 are
answered once, the callers that asked meanwhile get that answer from the cache. These tests
stand a fake context in for llama.cpp, so they need no model file.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from flink_agents_py.api import ChatMessage, MessageRole, ProviderError
from flink_agents_py.integrations.chat_models._llama import LlamaCppChatModel, _LoadedModel


class FakeContext:
    """Answers ``echo: <last message>``; can hold callers until ``gate`` opens."""

    def __init__(self, shared: dict[str, Any]) -> None:
        self.shared = shared
        self.name = f"ctx{len(shared['made'])}"
        shared["made"].append(self.name)

    def create_chat_completion(self, messages: list[dict[str, Any]], **_: Any) -> dict[str, Any]:
        s = self.shared
        with s["lock"]:
            s["running"] += 1
            s["peak"] = max(s["peak"], s["running"])
            s["calls"].append((self.name, messages[-1]["content"]))
            fail = s["fail"] > 0
            s["fail"] -= fail
            s["changed"].notify_all()
        try:
            s["gate"].wait(10)
            if fail:
                raise RuntimeError("out of memory")
            return {"choices": [{"message": {"content": f"echo: {messages[-1]['content']}"}}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
        finally:
            with s["lock"]:
                s["running"] -= 1


@pytest.fixture
def shared() -> dict[str, Any]:
    lock = threading.Lock()
    return {"made": [], "calls": [], "running": 0, "peak": 0, "fail": 0, "lock": lock,
            "changed": threading.Condition(lock), "gate": threading.Event()}


def connection(shared: dict[str, Any], instances: int) -> LlamaCppChatModel:
    conn = LlamaCppChatModel(instances=instances)
    conn._loaded = _LoadedModel(lambda _weights_of: FakeContext(shared), instances, 100)
    return conn


def ask(conn: LlamaCppChatModel, text: str, system: str = "rate") -> Any:
    return conn.chat([ChatMessage(role=MessageRole.SYSTEM, content=system),
                      ChatMessage(role=MessageRole.USER, content=text)])


def in_threads(fn: Any, args: list[Any]) -> list[Any]:
    out: list[Any] = [None] * len(args)

    def run(i: int) -> None:
        try:
            out[i] = fn(*args[i])
        except Exception as e:  # noqa: BLE001
            out[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(args))]
    for t in threads:
        t.start()
    return [out, threads]


def wait_for(shared: dict[str, Any], test: Any) -> None:
    with shared["changed"]:
        assert shared["changed"].wait_for(lambda: test(shared), timeout=10), shared


def release(shared: dict[str, Any], threads: list[threading.Thread]) -> None:
    """Let the held calls answer, and wait for every caller."""
    shared["gate"].set()
    for t in threads:
        t.join(10)


def failures(out: list[Any]) -> list[Exception]:
    """The callers' exceptions, each a ``ProviderError``."""
    failed = [r for r in out if isinstance(r, Exception)]
    assert all(isinstance(e, ProviderError) for e in failed), failed
    return failed


def test_contexts_answer_side_by_side_up_to_instances(shared):
    conn = connection(shared, instances=2)
    out, threads = in_threads(ask, [(conn, f"review {i}") for i in range(5)])
    wait_for(shared, lambda s: s["running"] == 2)  # two at once, the other three queue
    release(shared, threads)
    assert [r.message.content for r in out] == [f"echo: review {i}" for i in range(5)]
    assert shared["peak"] == 2 and len(shared["made"]) == 2


def test_identical_requests_are_answered_once(shared):
    conn = connection(shared, instances=2)
    out, threads = in_threads(ask, [(conn, "same text")] * 4)
    wait_for(shared, lambda s: s["running"] == 1)
    release(shared, threads)
    assert len(shared["calls"]) == 1
    assert sorted(bool(r.metadata.get("cached")) for r in out) == [False, True, True, True]
    assert {r.message.content for r in out} == {"echo: same text"}


def test_a_failed_answer_leaves_the_request_to_the_next_caller(shared):
    conn = connection(shared, instances=1)
    shared["fail"] = 1
    out, threads = in_threads(ask, [(conn, "same text")] * 2)
    wait_for(shared, lambda s: len(s["calls"]) == 1)
    release(shared, threads)
    [error] = failures(out)
    assert "out of memory" in str(error)
    [answer] = [r for r in out if not isinstance(r, Exception)]
    assert answer.message.content == "echo: same text" and not answer.metadata.get("cached")
    assert len(shared["calls"]) == 2


def test_a_request_goes_to_the_context_that_has_its_prompt_prefix(shared):
    conn = connection(shared, instances=2)
    out, threads = in_threads(ask, [(conn, "r1", "rate"), (conn, "a1", "advise")])
    wait_for(shared, lambda s: s["running"] == 2)  # one on each context
    release(shared, threads)
    for text, system in (("a2", "advise"), ("r2", "rate"), ("a3", "advise")):
        ask(conn, text, system)
    who = dict((text, name) for name, text in shared["calls"])
    assert who["a2"] == who["a3"] == who["a1"] and who["r2"] == who["r1"]


def test_a_context_that_cannot_be_made_fails_the_chat_not_the_model(shared):
    made = {"n": 0}

    def make(weights_of: Any) -> FakeContext:
        made["n"] += 1
        if made["n"] == 2:
            raise ValueError("Failed to create llama_context")
        return FakeContext(shared)

    conn = LlamaCppChatModel(instances=2)
    conn._loaded = _LoadedModel(make, 2, 100)
    out, threads = in_threads(ask, [(conn, "first"), (conn, "second")])
    wait_for(shared, lambda s: s["running"] == 1)  # one answers; the other's context failed
    release(shared, threads)
    [error] = failures(out)
    assert "could not make another context" in str(error)
    # the next request that finds the first context busy tries to make one again
    assert ask(conn, "third").message.content == "echo: third" and made["n"] >= 2
