"""A known key cut in two by a bounded message leaves no part of itself behind.

Texts from outside (a provider's error body, a model's tool call arguments, an OTLP
collector's refusal, a skill command's output, an MCP server's answer) are cut to a bound
before they go into a message. Cut first and masked after, a key standing across the cut
left its first half unmasked (no longer the whole key, so no longer found). Each is now
masked whole, then cut.
"""

from __future__ import annotations

import uuid

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from flink_agents_py.api import register_secret


def _key() -> str:
    key = f"Kc{uuid.uuid4().hex}"
    register_secret(key)
    return key


def assert_no_piece(key: str, text: str) -> None:
    """No 8 characters in a row of ``key`` are in ``text``."""
    for i in range(len(key) - 7):
        assert key[i : i + 8] not in text, (key[i : i + 8], text[-200:])


def _answer_error(pad: str) -> str:
    from flink_agents_py.integrations.chat_models._common import answer_error

    return str(answer_error({"error": {"message": pad}}, "chat failed"))


def _tool_arguments(pad: str) -> str:
    from flink_agents_py.api import ToolCall

    return str(
        ToolCall.model_validate(
            {"id": "c1", "type": "function", "function": {"name": "t", "arguments": pad + "{"}}
        ).arguments
    )


def _unreadable(pad: str) -> str:
    from flink_agents_py.integrations.chat_models._answers import _unreadable

    return str(_unreadable(pad, "are not JSON", 0, "t"))


def _otlp_reason(pad: str) -> str:
    from flink_agents_py.observability._otel import _reason

    return _reason(pad)


def _tool_problems(pad: str) -> str:
    from flink_agents_py.api._tools import _problems

    class Args(BaseModel):
        n: int

    try:
        Args.model_validate({"n": pad})
    except ValidationError as e:
        return _problems(e)
    raise AssertionError("validated")


def _mcp_not_mcp(pad: str) -> str:
    from flink_agents_py.integrations.mcp._results import _not_mcp

    try:
        TypeAdapter(dict).validate_python(pad)
    except ValidationError as e:
        return _not_mcp(e)
    raise AssertionError("validated")


def _skill_output(pad: str) -> str:
    from flink_agents_py.skills._output import _Stream, render

    out = _Stream(bytearray(pad.encode()), total=len(pad))
    text, notes = render(out, _Stream(bytearray()), 0, len(pad) - 20, "the limits")
    assert notes["output_cut"]["kept_characters"] == len(text)  # the cut is a note, apart
    return text


def _upgrade_problem(pad: str) -> str:
    from flink_agents_py.runtime.recorder._versioning import _one_line

    return _one_line(RuntimeError(pad))


def _event_log_preview(pad: str) -> str:
    from flink_agents_py.observability._payload import truncate

    return str(truncate({pad: 1}, 300))  # a key is no string leaf: not masked before


def _event_log_text(pad: str) -> str:
    from flink_agents_py.observability._payload import truncate

    return str(truncate(pad, 300))


def _trace_preview(pad: str) -> str:
    from flink_agents_py.observability._trace import _json

    return _json({pad: 1}, 300)  # a log written before the key was registered


SITES = {  # each: (what makes the message, the bound it cuts at)
    "a provider's error body": (_answer_error, 500),
    "a tool call's arguments that are not JSON": (_tool_arguments, 300),
    "arguments a provider's wire could not read": (_unreadable, 300),
    "an OTLP collector's refusal": (_otlp_reason, 297),
    "a tool argument that failed its check": (_tool_problems, 80),
    "an MCP answer that is not MCP": (_mcp_not_mcp, 100),
    "a skill command's output": (_skill_output, None),
    "an error quoted in a replay's upgrade message": (_upgrade_problem, 600),
    "an event log payload's preview (a dict key)": (_event_log_preview, 300),
    "an event log payload's text": (_event_log_text, 300),
    "a trace's preview of a logged payload (a dict key)": (_trace_preview, 300),
}


@pytest.mark.parametrize("site", sorted(SITES))
def test_a_key_standing_across_a_cut_leaves_no_half_behind(site):
    make, bound = SITES[site]
    key = _key()
    for before in {bound - 10, bound - 16, bound - 24} if bound else {40}:
        pad = "x" * before + key + "y" * 400
        text = make(pad)
        assert "x" * 20 in text  # the text around the key is kept
        assert_no_piece(key, text)


EVENT_LOG_SCRIPT = """
import json, sys
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, action, register_secret
from flink_agents_py.observability import EventLog, MemorySink

KEY = sys.argv[1]
register_secret(KEY, "my key")

class Tally(Agent):
    @action(InputEvent)
    @staticmethod
    async def tally(event, ctx):  # a payload keyed by the key, long enough to be cut
        ctx.send_event(OutputEvent(output={"pad": "p" * event.input["n"], KEY: 1}))

sink = MemorySink()
env = AgentsExecutionEnvironment.local(event_log=EventLog(sink=sink, max_chars=60))
env.from_list([{"key": str(n), "n": n} for n in range(50)]).apply(Tally()).run()
print(json.dumps(sink.records))
"""


def test_a_users_event_log_keeps_no_piece_of_a_key_its_preview_cuts(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    key = f"Kc{uuid.uuid4().hex}"
    (tmp_path / "tally.py").write_text(EVENT_LOG_SCRIPT)
    proc = subprocess.run(
        [sys.executable, "tally.py", key],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=100,
        env={"PYTHONPATH": str(Path(__file__).resolve().parents[1]), "PATH": ""},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = proc.stdout.strip().splitlines()[-1]
    assert '"$truncated"' in records  # payloads were cut: some at the key
    assert_no_piece(key, records)
