"""What the agent metrics read off a model call's recorded result, whatever its shape.

A model call's usage and metadata (tokens, throttled answers, time held by flow control,
cost by the budget's price table) are counted from the JSON form of the recorded result
(``to_loggable``: model tags unwrapped, keys as text). The metrics read only the fields they
count, so these tests pin the counts for results in every shape that form can take, through
the metrics' hooks and through the probe the core reports to.
"""

from __future__ import annotations

import enum
from typing import Any

import pytest

from flink_agents_py.api import ChatRequestEvent, ChatResponseEvent, Event
from flink_agents_py.observability import AgentMetrics
from flink_agents_py.runtime import CallKind

pytestmark = pytest.mark.timeout(60)

KEY = "k"
REQUEST = "r0/ask/e0"
CALL = f"{REQUEST}/_chat_model_action/c0"


class ModelCall:
    """A model call's command as an observer sees it (its kind and target)."""

    kind = CallKind.MODEL
    target = "fallback_setup"


class Field(str, enum.Enum):
    """A text-like key that is not text: its JSON form is ``Field.THROTTLED``."""

    THROTTLED = "throttled"


def _response(usage: Any = None, metadata: Any = None) -> dict[str, Any]:
    return {"$model": "flink_agents_py.api._messages:ChatResponse",
            "data": {"message": {"role": "assistant", "content": "hi"}, "model": None,
                     "usage": usage, "metadata": metadata}}


def _count(result: Any, via_probe: bool, ok: bool = True) -> dict[str, Any]:
    """Count one chat with one model call that ended with ``result``; the snapshot."""
    m = AgentMetrics()
    request = ChatRequestEvent(id=REQUEST, model="review_model", messages=[])
    if via_probe:
        p = m.probe
        assert p is not None
        token = p.run_started(KEY, 0)
        p.event_dispatched(KEY, request)
        p.call_started(KEY, CALL, ModelCall(), False)
        p.call_finished(KEY, CALL, ok, result)
        p.event_dispatched(KEY, ChatResponseEvent(id=f"{CALL[:-3]}/e0", request_id=REQUEST))
        p.run_completed(KEY, 0, token)
    else:
        m.run_started(KEY, 0)
        m.event_dispatched(KEY, request, "r0/ask")
        m.call_started(KEY, CALL, ModelCall(), False)
        m.call_finished(KEY, CALL, ok, result)
        m.event_dispatched(KEY, ChatResponseEvent(id=f"{CALL[:-3]}/e0", request_id=REQUEST),
                           f"{REQUEST}/_chat_model_action")
        m.run_completed(KEY, 0)
    snap = m.snapshot()
    assert snap["chats"] == {"review_model": 1}  # labelled by the chat's setup
    assert snap["chat_calls"] == {"review_model": 1}
    assert snap["latency_ms"]["chat_call"]["review_model"]["count"] == 1
    assert snap["latency_ms"]["chat"]["review_model"]["count"] == 1
    assert snap["calls_in_flight"] == 0 and snap["runs_in_flight"] == 0
    return snap


FLOW = {"throttled": 2, "flow_wait_s": 0.25, "budget": {"cost": 0.0012}, "retries": [1, 2]}
"""Metadata of a call flow control held twice (a quarter second) that cost 1200 micros."""
FLOW_COUNTS = {"chat_calls_throttled": {"review_model": 2},
               "flow_wait_ms": {"review_model": 250}, "cost_micros": {"review_model": 1200}}
NO_FLOW = {"chat_calls_throttled": {}, "flow_wait_ms": {}, "cost_micros": {}}


@pytest.mark.parametrize("via_probe", [False, True], ids=["hooks", "probe"])
@pytest.mark.parametrize("usage,metadata,tokens,flow", [
    (None, {}, None, NO_FLOW),
    (None, None, None, NO_FLOW),
    ({"input_tokens": 7, "output_tokens": 3}, FLOW, (7, 3), FLOW_COUNTS),
    # tagged models anywhere: counted from their data
    ({"$model": "m:TokenUsage", "data": {"input_tokens": 5, "output_tokens": None}},
     {"$model": "m:Meta", "data": FLOW}, (5, 0), FLOW_COUNTS),
    (None, {"budget": {"$model": "m:Spent", "data": {"cost": 0.5}}}, None,
     {**NO_FLOW, "cost_micros": {"review_model": 500_000}}),
    # keys that are not text: the JSON form's keys are their text
    (None, {1: "one", "throttled": 3}, None,
     {**NO_FLOW, "chat_calls_throttled": {"review_model": 3}}),
    (None, {Field.THROTTLED: 3}, None, NO_FLOW),
    # not a dict: nothing to read
    ({}, ["throttled"], (0, 0), NO_FLOW),
    ("usage", "metadata", None, NO_FLOW),
], ids=["no-metadata", "none", "plain", "tagged", "tagged-budget", "int-key", "enum-key",
        "empty-usage-list-metadata", "text"])
def test_a_model_calls_usage_and_flow_are_counted_from_the_json_form(
        via_probe, usage, metadata, tokens, flow):
    snap = _count(_response(usage, metadata), via_probe)
    if tokens is None:
        assert snap["input_tokens"] == {} and snap["output_tokens"] == {}
    else:
        assert snap["input_tokens"] == {"review_model": tokens[0]}
        assert snap["output_tokens"] == {"review_model": tokens[1]}
    for name, want in flow.items():
        assert snap[name] == want, name


@pytest.mark.parametrize("via_probe", [False, True], ids=["hooks", "probe"])
def test_a_failed_model_call_counts_as_failed_without_reading_its_result(via_probe):
    snap = _count(RuntimeError("boom"), via_probe, ok=False)
    assert snap["chat_calls_failed"] == {"review_model": 1}
    assert snap["input_tokens"] == {} and snap["flow_wait_ms"] == {}


@pytest.mark.parametrize("via_probe", [False, True], ids=["hooks", "probe"])
def test_an_untagged_chat_response_is_read_when_it_has_message_and_usage(via_probe):
    untagged = {"message": {"content": "hi"}, "usage": {"input_tokens": 4},
                "metadata": {"throttled": 1}}
    snap = _count(untagged, via_probe)
    assert snap["input_tokens"] == {"review_model": 4}
    assert snap["output_tokens"] == {"review_model": 0}
    assert snap["chat_calls_throttled"] == {"review_model": 1}


def test_an_event_without_a_type_is_counted_as_type_question_mark():
    m = AgentMetrics()
    m.event_dispatched(KEY, object(), None)
    m.event_dispatched(KEY, Event(type="Custom"), None)
    snap = m.snapshot()
    assert snap["events_processed"] == 2
    assert snap["events_processed_by_type"] == {"?": 1, "Custom": 1}
