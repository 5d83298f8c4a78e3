"""A chat opened before text tool results went as their text restores as it was recorded.

``tests/fixtures/tool_text_before/`` holds one key's keyed state written by commit 40f20b0,
which sent a tool's ``str`` result to the model as JSON text (quoted), at two points where
the first record's chat is in flight (``make_fixture.py`` wrote them; the agent, replaying
strictly, is in ``tool_text_agents.py``):

- ``tool_in_flight``: the tool call runs when restored; the model has not read its result;
- ``model_in_flight``: the model call reading the tool message is recorded (its digest covers
  the quoted message) and the next one is in flight.

Restored by today's code, that chat keeps sending tool results quoted: no divergence (the
agent replays strictly), no recorded call runs again, no call is made with other arguments
than recorded, and its answer is the one that code gave. The queued record starts after the
restore and reads the tool's text as its text.
"""

from __future__ import annotations

import json
import logging
import pathlib
from types import ModuleType
from typing import Any

import pytest
from support.flink_state import FlinkKeyedState

from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore

pytestmark = pytest.mark.timeout(60)

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "tool_text_before"


@pytest.fixture
def agents(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The fixture's agent module (by the name its keyed state refers to), call log empty."""
    monkeypatch.syspath_prepend(str(FIXTURE))
    import tool_text_agents

    tool_text_agents.reset_calls()
    yield tool_text_agents
    tool_text_agents.reset_calls()


def _restore_to_end(plan: AgentPlan, key: str, held: FlinkKeyedState
                    ) -> tuple[list[Any], list[Any]]:
    core = AgentCore(plan, max_in_flight=8)
    core.open()
    try:
        res = core.advance(key, held.key_state())
        outputs, errors = list(res.outputs), list(res.errors)
        while res.busy:
            assert core.wait_for(key, 10), "no I/O completed for the key"
            res = core.advance(key, held.key_state())
            outputs.extend(res.outputs)
            errors.extend(res.errors)
    finally:
        core.close()
    return outputs, errors


@pytest.mark.parametrize("case", ["tool_in_flight", "model_in_flight"])
def test_a_chat_in_flight_keeps_its_quoted_tool_results_and_a_new_one_sends_text(
        case, agents, caplog):
    data = json.loads((FIXTURE / f"{case}.json").read_text())
    plan = AgentPlan.from_agent(agents.Definer())
    assert plan.config.get("replay") == "strict"
    held = FlinkKeyedState(data["keyed_state"])
    assert held.key_state().run is not None, "the fixture holds a run in flight"

    with caplog.at_level(logging.WARNING, logger="flink_agents_py"):
        outputs, errors = _restore_to_end(plan, data["key"], held)

    assert errors == []
    old_apple, old_pear = data["outputs_after"]
    assert old_apple == {"word": "apple", "answer": {"answer": 'answer("def-apple")'}}
    assert old_pear == {"word": "pear", "answer": {"answer": 'answer("def-pear")'}}
    # the chat in flight: as recorded; the record queued behind it: today's form
    assert outputs == [old_apple, {"word": "pear", "answer": {"answer": "answer(def-pear)"}}]
    ran = agents.calls()
    recorded = set(data["calls_all"]) - set(data["calls_after_restore"])
    assert recorded, "the fixture has recorded calls"
    assert [c for c in ran if c in recorded] == [], "a recorded call ran again"
    assert sorted(ran) == sorted(data["calls_after_restore"])
    assert not [r.getMessage() for r in caplog.records if "other arguments" in r.getMessage()
                or "arguments changed" in r.getMessage()]
    after = held.key_state()
    assert after.run is None and after.queued() == 0


def test_a_message_field_added_later_stays_out_of_call_digests_while_empty():
    # ChatMessage.reasoning came after messages were recorded as model calls' arguments: a
    # message without reasoning has the JSON form (and a call taking it the digest) it had
    # before the field existed; with reasoning it is kept, and both validate back
    from flink_agents_py.api import ChatMessage
    from flink_agents_py.runtime._serde import from_json_value, to_json_value
    from flink_agents_py.runtime.recorder._outcomes import call_digest

    plain = ChatMessage(role="user", content="hi")
    form = to_json_value([plain], "test")[0]["data"]
    assert form == {"role": "user", "content": "hi", "tool_calls": [], "tool_call_id": None,
                    "name": None, "extra_args": {}}
    # the digest commit 40f20b0 (before the field) recorded for this call
    assert call_digest("model", ([plain],), {}, "c0") == "b375751c3a025876"
    thought = ChatMessage(role="assistant", content="", reasoning=[{"type": "reasoning",
                                                                     "text": "hmm"}])
    stored = to_json_value(thought, "test")
    assert stored["data"]["reasoning"] == [{"type": "reasoning", "text": "hmm"}]
    assert from_json_value(stored) == thought
    assert from_json_value(to_json_value(plain, "test")) == plain
