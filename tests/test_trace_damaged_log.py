"""A damaged line of an event log does not fail the whole ``trace`` command.

Lines that are not JSON objects were skipped already; a JSON line whose fields have other
types than the log writes (a number as ``parent``, a list as ``usage``, text as ``round``
or ``tool_calls``: a hand-edited or damaged file) raised ``TypeError`` in the text tree and
failed the command for every run. Now those fields are made of their types or left out.
"""

from __future__ import annotations

import orjson
import pytest

from flink_agents_py.observability import build_traces, read_event_log, render_html, render_text
from flink_agents_py.observability._otel import spans_of

pytestmark = pytest.mark.timeout(60)

GOOD = [
    {"ts": 1.0, "kind": "run_started", "key": "a", "id": "r0", "parent": None, "seq": 0},
    {"ts": 1.1, "kind": "event", "key": "a", "id": "r0", "parent": None, "type": "InputEvent",
     "data": {"input": {"n": 1}}},
    {"ts": 1.2, "kind": "run_completed", "key": "a", "id": "r0", "parent": None, "seq": 0,
     "duration_ms": 200.0},
]
DAMAGED = [
    {"ts": "x", "kind": "event", "key": "z", "id": 5, "parent": 7, "type": "ToolRequestEvent",
     "tool_calls": 3},
    {"ts": 2.0, "kind": "call_started", "key": "z", "id": "r0/a/c0", "parent": ["r0/a"],
     "call_kind": "chat_model", "round": "one"},
    {"ts": 2.1, "kind": "call_finished", "key": "z", "id": "r0/a/c0", "parent": "r0/a",
     "call_kind": "chat_model", "status": "ok", "usage": [1, 2], "tool_calls": "lookup"},
    {"ts": 2.2, "kind": "call_finished", "key": "y", "id": "r0/a/c0", "parent": "r0/a",
     "call_kind": "chat_model", "status": "ok", "usage": {"input_tokens": "7",
                                                         "output_tokens": 3}},
]


def test_damaged_lines_are_traced_as_far_as_they_go(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in DAMAGED + GOOD))
    traces = build_traces(read_event_log([path]))
    text = render_text(traces)
    assert 'run r0  key a  completed in 200.0 ms' in text  # the sound run, whole
    assert "orphan: parent 7 is not in the log" in text
    assert 'orphan: parent ["r0/a"] is not in the log' in text
    assert "tokens 0 in / 3 out" in text
    render_html(traces)
    for trace in traces:
        spans_of(trace)
