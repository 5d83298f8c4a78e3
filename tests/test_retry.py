"""Chat error policies: fail, retry (backoff, bounded, retryable errors only, counted), ignore.

Retries happen inside one durable call: the counters show one executed call per model call,
and a restore replays the recorded outcome without trying the provider again.
"""

from __future__ import annotations

import copy
import json
import time
from typing import Any

import pytest
from support.probes import count, gate
from support.providers import FAST, flaky, only_answer, outputs_of, probe_agent, run_probe

from flink_agents_py.api import (
    ChatMessage,
    ChatModelConnection,
    ChatResponse,
    MessageRole,
    ProviderError,
    ResourceDescriptor,
    ToolCall,
)
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore, InMemoryKeyState
from flink_agents_py.runtime._builtin_actions import _backoff

pytestmark = pytest.mark.timeout(60)



def test_retry_recovers_and_counts_retries_in_the_response(probes):
    res = run_probe(probe_agent(flaky("r1", fail_first=2), error_policy="retry", **FAST),
                    [{"key": "a", "q": "hi"}])
    ans = only_answer(res)
    assert ans["error"] is None and ans["content"] == "ok"
    assert ans["metadata"]["retries"] == 2
    assert ans["metadata"]["attempt"] == 3  # the connection's own metadata is kept
    assert ans["metadata"]["retry_errors"] == ["ProviderError: service down (status 503)"] * 2
    assert probes["r1"] == 3
    assert res.counters["calls_executed"] == 1  # three attempts, one durable call


def test_retry_without_failures_reports_zero_retries():
    ans = only_answer(run_probe(probe_agent(flaky("r0"), error_policy="retry"),
                                [{"key": "a", "q": "hi"}]))
    assert ans["metadata"] == {"attempt": 1, "retries": 0}


def test_retry_gives_up_after_max_attempts_naming_every_error(probes):
    res = run_probe(probe_agent(flaky("r2", fail_first=10, status=503), error_policy="retry",
                                retry_max_attempts=4, **FAST), [{"key": "a", "q": "hi"}])
    ans = only_answer(res)
    assert ans["content"] is None
    assert ans["error"].startswith("ProviderError: service down (status 503) (after 4 attempts, "
                                   "3 retries; earlier errors: ")
    assert ans["error"].count("status 503") == 4
    assert probes["r2"] == 4 and res.counters["calls_executed"] == 1


@pytest.mark.parametrize("error, status", [("provider", 400), ("provider", 401), ("value", 0)])
def test_retry_does_not_retry_errors_that_are_not_retryable(error, status, probes):
    label = f"r3-{error}-{status}"
    ans = only_answer(run_probe(probe_agent(flaky(label, fail_first=1, error=error, status=status),
                                            error_policy="retry", **FAST),
                                [{"key": "a", "q": "hi"}]))
    assert probes[label] == 1
    assert "after" not in ans["error"]
    assert ans["error"] == ("ValueError: a bug in the adapter" if error == "value"
                            else f"ProviderError: service down (status {status})")


def test_timeouts_are_retryable():
    ans = only_answer(run_probe(probe_agent(flaky("r4", fail_first=1, error="timeout"),
                                            error_policy="RETRY", **FAST),  # upper case works
                                [{"key": "a", "q": "hi"}]))
    assert ans["content"] == "ok" and ans["metadata"]["retries"] == 1
    assert ans["metadata"]["retry_errors"] == ["TimeoutError: the model took too long"]


def test_fail_policy_does_not_retry(probes):
    ans = only_answer(run_probe(probe_agent(flaky("r5", fail_first=1)),  # the default: fail
                                [{"key": "a", "q": "hi"}]))
    assert probes["r5"] == 1
    assert ans["error"] == "ProviderError: service down (status 503)" and ans["content"] is None


def test_ignore_policy_ends_the_chat_with_an_empty_marked_answer(probes):
    res = run_probe(probe_agent(flaky("r6", fail_first=5), error_policy="ignore"),
                    [{"key": "a", "q": "hi"}, {"key": "b", "q": "hi"}])
    assert res.errors == []
    answers = outputs_of(res, "answer")
    assert len(answers) == 2 and probes["r6"] == 2  # no retries under ignore
    for ans in answers:
        assert ans["error"] is None and ans["content"] == ""
        assert ans["metadata"] == {"error_policy": "ignore",
                                   "ignored_error": "ProviderError: service down (status 503)"}


class FlakyWithTools(ChatModelConnection):
    """Every model call fails once before answering; the first answer calls a tool."""

    def chat(self, messages, **kwargs) -> ChatResponse:
        n = count("tools")
        if n % 2 == 1:
            raise ProviderError("busy", status_code=502, retryable=True)
        if not any(m.role == MessageRole.TOOL for m in messages):
            return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[
                ToolCall(id="c1", name="echo", arguments={"a": 1})]))
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content="done"))


def echo(a: int) -> int:
    """Return a."""
    return a


def test_retries_add_up_over_the_model_calls_of_a_chat(probes):
    res = run_probe(probe_agent(ResourceDescriptor(FlakyWithTools), tools=["echo"],
                                tool_fns=[echo], error_policy="retry", **FAST),
                    [{"key": "a", "q": "hi"}])
    ans = only_answer(res)
    assert ans["content"] == "done" and ans["metadata"]["retries"] == 2
    assert probes["tools"] == 4


def test_backoff_is_exponential_capped_and_jittered():
    from flink_agents_py.api import ChatModelSetup

    setup = ChatModelSetup(connection="c", retry_initial_backoff_s=0.1, retry_max_backoff_s=0.5)
    for retry, cap in [(0, 0.1), (1, 0.2), (2, 0.4), (3, 0.5), (9, 0.5)]:
        samples = [_backoff(setup, retry) for _ in range(200)]
        assert all(cap / 2 <= s <= cap for s in samples)
        assert max(samples) - min(samples) > cap / 10  # jittered, not fixed


def test_backoff_is_slept_between_attempts():
    start = time.monotonic()
    ans = only_answer(run_probe(probe_agent(flaky("r7", fail_first=2), error_policy="retry",
                                            retry_initial_backoff_s=0.1, retry_max_backoff_s=1),
                                [{"key": "a", "q": "hi"}]))
    elapsed = time.monotonic() - start
    assert ans["metadata"]["retries"] == 2
    assert elapsed >= 0.05 + 0.1  # at least half of 0.1, then half of 0.2


def test_setup_rejects_unknown_policies():
    from pydantic import ValidationError

    from flink_agents_py.api import ChatModelSetup

    with pytest.raises(ValidationError):
        ChatModelSetup(connection="c", error_policy="sometimes")
    with pytest.raises(ValidationError):
        ChatModelSetup(connection="c", retry_max_attempts=0)


# --------------------------------------------------------------------------- replay
class FlakyThenGated(ChatModelConnection):
    """The first model call fails twice then answers text that is not JSON; the structured-
    output retry (a second durable call of the same action) waits for the test's gate."""

    def chat(self, messages, **kwargs) -> ChatResponse:
        correcting = any(m.role == MessageRole.USER and "cannot be used" in m.content
                         for m in messages)
        if not correcting:
            n = count("first")
            if n <= 2:
                raise ProviderError("flaky", status_code=500, retryable=True)
            text = "not json"
        else:
            count("second")
            if not gate().wait(20):
                raise TimeoutError("gate never opened")
            text = '{"score": 3}'
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text))


def _inflight_calls(state: InMemoryKeyState) -> dict[str, Any]:
    if state.run is None:
        return {}
    out: dict[str, Any] = {}
    for rec in state.run.inflight.values():
        out.update(rec.calls)
    return out


def _run_to_end(core: AgentCore, key: str, state: InMemoryKeyState) -> list[Any]:
    outputs: list[Any] = []
    res = core.advance(key, state)
    outputs.extend(res.outputs)
    while res.busy:
        assert core.wait_for(key, 20), "no I/O completed for the key"
        res = core.advance(key, state)
        assert res.errors == []
        outputs.extend(res.outputs)
    return outputs


def test_a_restore_replays_a_retried_model_call_without_retrying_again(probes):
    schema = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
    plan = AgentPlan.from_agent(probe_agent(ResourceDescriptor(FlakyThenGated),
                                            error_policy="retry", **FAST))
    old = AgentCore(plan)
    old.open()
    key = "k"
    try:
        state = InMemoryKeyState()
        res = old.on_input(key, {"key": key, "q": "rate", "schema": schema}, state)
        while "1" not in _inflight_calls(state):  # c0 recorded; the retry call c1 started
            assert old.wait_for(key, 20), "no I/O completed for the key"
            res = old.advance(key, state)
            assert res.errors == [] and res.outputs == []
        calls = _inflight_calls(state)
        assert calls["0"].done and calls["0"].ok and not calls["1"].done
        assert probes["first"] == 3  # two failures and the answer, all in c0
        snapshot = copy.deepcopy(state)

        new = AgentCore(plan)
        new.open()
        try:
            gate().set()
            outputs = _run_to_end(new, key, snapshot)
        finally:
            new.close()
    finally:
        gate().set()
        old.close()
    [ans] = [o for o in outputs if o["kind"] == "answer"]
    assert ans["error"] is None and ans["structured"] == {"score": 3}
    assert ans["metadata"] == {"retries": 2, "output_retries": 1}
    assert probes["first"] == 3  # replayed from the record: the provider was not retried again
    assert new.counters["calls_replayed"] == 1 and new.counters["calls_executed"] == 1
    assert json.dumps(ans)  # plain JSON all the way
