"""A chat's answer is made ready to record on the I/O thread: recorded exactly as before.

``prestore`` (run where the model call ran) makes the answer's stored form and its rebuilt
value; ``store_outcome`` (on the operator thread) then only keeps them. What is recorded and
handed over must be what ``store_outcome`` makes of the answer itself, and anything it must
decide (a known secret to mask, a class not known to rebuild as stored, no JSON form) is left
to it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from flink_agents_py.api import (
    ChatMessage,
    ChatResponse,
    MessageRole,
    TokenUsage,
    ToolCall,
    register_secret,
)
from flink_agents_py.runtime.recorder._outcomes import store_outcome
from flink_agents_py.runtime.recorder._prestored import Prestored, prestore
from flink_agents_py.runtime.recorder._round_trip import REBUILD_AS_STORED
from flink_agents_py.runtime.recorder._state import CallRecord


@pytest.fixture(autouse=True)
def no_secrets() -> Iterator[None]:
    """No known secret while a test runs (one another module registered on import included)."""
    from flink_agents_py.api import _secrets

    registry = _secrets._REGISTRY
    with registry._lock:
        saved = (
            registry._values,
            registry._forms,
            registry._patterns,
            registry._hidden,
            registry.regexes,
        )
        registry._values, registry._forms, registry._patterns = set(), set(), set()
        registry._hidden = set()
    registry.regexes = None
    try:
        yield
    finally:
        with registry._lock:
            (
                registry._values,
                registry._forms,
                registry._patterns,
                registry._hidden,
                registry.regexes,
            ) = saved


def _answer(text: str = "hi") -> ChatResponse:
    return ChatResponse(
        message=ChatMessage(
            role=MessageRole.ASSISTANT,
            content=text,
            tool_calls=[ToolCall(id="t", name="f", arguments={"a": (1, 2)})],
        ),
        usage=TokenUsage(input_tokens=3, output_tokens=4),
        metadata={"k": (1, "x")},
    )


def _stored(value: Any) -> tuple[CallRecord, tuple[bool, Any]]:
    rec = CallRecord(digest="d")
    return rec, store_outcome(rec, "r0/a/c0", True, value)


def _known() -> None:
    """``ChatResponse`` met as a whole result once (``store_outcome`` learns it rebuilds)."""
    _stored(_answer())
    assert ChatResponse in REBUILD_AS_STORED


def test_a_prestored_answer_is_recorded_and_handed_over_as_store_outcome_makes_it():
    _known()
    ready = prestore(_answer())
    assert isinstance(ready, Prestored)
    rec, (ok, value) = _stored(ready)
    plain_rec, (plain_ok, plain) = _stored(_answer())
    assert ok and plain_ok
    assert rec.value == plain_rec.value and (rec.done, rec.ok) == (True, True)
    assert type(value) is ChatResponse and value == plain
    assert value.metadata == {"k": [1, "x"]}  # as a replay hands it over: a tuple a list
    assert value.message.tool_calls[0].arguments == {"a": [1, 2]}


class Own(BaseModel):
    x: int


def test_results_store_outcome_must_decide_are_left_to_it():
    _known()
    assert prestore({"a": 1}) == {"a": 1}  # not a model known to rebuild as stored
    own = Own(x=1)
    assert prestore(own) is own
    unconvertible = _answer().model_copy(update={"metadata": {"s": {1, 2}}})
    assert prestore(unconvertible) is unconvertible  # no JSON form: store_outcome says why
    _, (ok, error) = _stored(unconvertible)
    assert not ok and "r0/a/c0" in str(error)


def test_an_answer_holding_a_known_secret_is_masked_as_before():
    _known()
    secret = "sk-prestored-0123456789abcdef"
    register_secret(secret, "test")
    answer = _answer(f"my key is {secret}")
    assert prestore(answer) is answer  # with secrets registered: store_outcome looks
    rec, (ok, value) = _stored(prestore(answer))
    assert ok and secret not in str(rec.value) and secret not in value.message.content
