"""A failure whose text has no UTF-8 form is still written to the event log.

Python decodes file names and environment values that are not UTF-8 with
``surrogateescape`` (``os.listdir``, ``os.fsdecode``, ``os.environ``), so a message built
from one (``f"cannot parse {name}"``) holds a lone surrogate. The event log's record of that
failure (``action_finished``, a failed ``call_finished``) could not be encoded as JSON: it
was dropped (one logged exception), and the trace showed the failed action as unfinished,
the run as not failed. Now the surrogate is written as its escape (``\\udce9``).
"""

from __future__ import annotations

import orjson
import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.observability import (
    EventLog,
    build_traces,
    read_event_log,
    render_text,
)

pytestmark = pytest.mark.timeout(60)

NAME = b"caf\xe9.txt".decode("utf-8", "surrogateescape")  # os.fsdecode's 'caf\udce9.txt'


def parse_the_file() -> str:
    raise ValueError(f"cannot parse {NAME}")


class Parser(Agent):
    @action(InputEvent)
    @staticmethod
    async def parse(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input["how"] == "action":
            raise ValueError(f"cannot parse {NAME}")
        try:
            await ctx.durable_execute_async(parse_the_file)
        except ValueError:
            pass
        ctx.send_event(OutputEvent(output={"done": event.input["how"]}))


def test_failures_with_a_lone_surrogate_are_written_and_traced(tmp_path):
    path = tmp_path / "events.jsonl"
    res = (AgentsExecutionEnvironment.local(event_log=EventLog(path))
           .from_list([{"key": "a", "how": "action"}, {"key": "c", "how": "call"}])
           .apply(Parser()).run())
    assert res.outputs == [{"done": "call"}] and len(res.errors) == 1
    records = read_event_log([path])
    [action_end] = [r for r in records if r["kind"] == "action_finished" and r["key"] == "a"]
    assert action_end["status"] == "failed"
    assert action_end["error"] == "ValueError: cannot parse caf\\udce9.txt"
    assert action_end["traceback"].endswith("ValueError: cannot parse caf\\udce9.txt")
    [call_end] = [r for r in records if r["kind"] == "call_finished" and r["key"] == "c"]
    assert call_end["status"] == "failed" and "caf\\udce9.txt" in call_end["error"]
    orjson.dumps(records)  # valid text throughout

    text = render_text(build_traces(records))
    assert "unfinished" not in text
    assert "failed action: ValueError: cannot parse caf\\udce9.txt" in text
    assert "failed function call: " in text
