"""The built-in events' type names as Apache Flink Agents spells them (``"_output_event"``).

Flink Agents 0.3 names its built-in events ``_input_event``, ``_output_event``... and a
program compares with those: ``OutputEvent.EVENT_TYPE == "_output_event"``, ``event.type ==
InputEvent.EVENT_TYPE`` or ``event.get_type() == "_input_event"`` in an action listening to
several types, ``Event(type=OutputEvent.EVENT_TYPE, attributes={"output": x})`` sent as an
output (its unified events), ``Event.from_json`` of such an event, a file log record's
``eventType`` compared with ``OutputEvent.EVENT_TYPE``. Before this port, ``EVENT_TYPE`` was
``"OutputEvent"`` only, so each of these compared unequal, and the unified output event was
an ad-hoc event no action took: the output was lost. Here a built-in type equals both
spellings, while what keyed state and replay records hold stays ``"OutputEvent"``.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flink_agents_py.api import (
    ChatRequestEvent,
    ChatResponseEvent,
    ContextRetrievalRequestEvent,
    ContextRetrievalResponseEvent,
    Event,
    EventType,
    InputEvent,
    OutputEvent,
    ToolRequestEvent,
    ToolResponseEvent,
)

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]

FLINK_AGENTS_NAMES = {
    InputEvent: "_input_event",
    OutputEvent: "_output_event",
    ChatRequestEvent: "_chat_request_event",
    ChatResponseEvent: "_chat_response_event",
    ToolRequestEvent: "_tool_request_event",
    ToolResponseEvent: "_tool_response_event",
    ContextRetrievalRequestEvent: "_context_retrieval_request_event",
    ContextRetrievalResponseEvent: "_context_retrieval_response_event",
}

# Written the way Flink Agents 0.3's programs use its unified events, with the imports
# changed to flink_agents_py.compat.
AGENT = """
    from flink_agents_py.compat import (
        Agent, Event, InputEvent, OutputEvent, RunnerContext, action,
    )


    class RetryingAgent(Agent):
        @action(InputEvent.EVENT_TYPE, "retry")
        @staticmethod
        def route(event: Event, ctx: RunnerContext) -> None:
            if event.get_type() == "_input_event":
                value = InputEvent.from_event(event).input
                ctx.send_event(Event(type="retry", attributes={"value": value}))
            elif event.type == "retry":
                ctx.send_event(Event(type=OutputEvent.EVENT_TYPE, attributes={
                    "output": {"got": event.get_attr("value")}}))
"""

MAIN = """
    import json
    from flink_agents_py.compat import (
        AgentsExecutionEnvironment, ChatRequestEvent, ChatResponseEvent, Event, EventType,
        InputEvent, OutputEvent, ToolRequestEvent, ToolResponseEvent,
    )
    from retrying_agent import RetryingAgent

    assert InputEvent.EVENT_TYPE == "_input_event"
    assert OutputEvent.EVENT_TYPE == "_output_event"
    assert ChatRequestEvent.EVENT_TYPE == "_chat_request_event"
    assert ChatResponseEvent.EVENT_TYPE == "_chat_response_event"
    assert ToolRequestEvent.EVENT_TYPE == "_tool_request_event"
    assert ToolResponseEvent.EVENT_TYPE == "_tool_response_event"
    assert EventType.OutputEvent == OutputEvent.EVENT_TYPE
    assert OutputEvent(output=1).type == OutputEvent.EVENT_TYPE == "_output_event"

    read = Event.from_json(json.dumps({"type": "_output_event", "attributes": {"output": 3}}))
    print("READ", type(read).__name__, read.output)
    typed = OutputEvent.from_event(Event(type=OutputEvent.EVENT_TYPE,
                                         attributes={"output": 4}))
    print("TYPED", type(typed).__name__, typed.output, typed.type == "_output_event")

    env = AgentsExecutionEnvironment.get_execution_environment()
    out = env.from_list([{"key": "a", "value": 2}, {"key": "b", "value": 5}]) \\
        .apply(RetryingAgent()).to_list()
    env.execute()
    print("OUT", json.dumps(out))
"""


def _run(tmp_path: Path, main: str) -> subprocess.CompletedProcess[str]:
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "retrying_agent.py").write_text(textwrap.dedent(AGENT))
    (tmp_path / "main.py").write_text(textwrap.dedent(main))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "main.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
    )


def test_a_unified_events_program_runs_from_its_own_directory(tmp_path):
    proc = _run(tmp_path, MAIN)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    lines = proc.stdout.splitlines()
    assert "READ OutputEvent 3" in lines
    assert "TYPED OutputEvent 4 True" in lines
    assert 'OUT [{"a": {"got": 2}}, {"b": {"got": 5}}]' in lines


def test_each_builtin_type_equals_both_names_and_keeps_ours_as_its_text():
    for cls, theirs in FLINK_AGENTS_NAMES.items():
        ours = cls.__name__
        assert cls.EVENT_TYPE == theirs and cls.EVENT_TYPE == ours, cls
        assert theirs == cls.EVENT_TYPE and ours == cls.EVENT_TYPE  # either side
        assert cls.EVENT_TYPE != "_other_event" and not (cls.EVENT_TYPE != theirs)
        assert getattr(EventType, ours) == theirs
        assert str(cls.EVENT_TYPE) == ours and f"{cls.EVENT_TYPE}" == ours
        assert json.dumps(cls.EVENT_TYPE) == f'"{ours}"'
        assert {cls.EVENT_TYPE: 1}[ours] == 1  # a dict finds it by our name
        assert pickle.loads(pickle.dumps(cls.EVENT_TYPE)) is cls.EVENT_TYPE
    assert InputEvent.EVENT_TYPE != "_output_event"


def test_a_built_in_events_type_equals_flink_agents_name_after_a_round_trip():
    sent = OutputEvent(output={"n": 1})
    assert sent.type == "_output_event" and sent.get_type() == "_output_event"
    back = Event.from_json(json.dumps(sent.to_json()))
    assert type(back) is OutputEvent and back.type == "_output_event"
    request = ChatRequestEvent(model="m", messages=[])
    assert request.type == "_chat_request_event"
    assert ChatRequestEvent.model_validate(request.to_json()).type == "_chat_request_event"


def test_the_stored_form_keeps_our_names_and_reads_either():
    # keyed state and replay records written before this change say "OutputEvent": the
    # stored form is unchanged, and Flink Agents' name reads as the same class
    assert OutputEvent(output=1).to_json()["type"] == "OutputEvent"
    assert json.loads(InputEvent(input=1).model_dump_json())["type"] == "InputEvent"
    old = Event.from_json('{"id": "r0/e1", "type": "OutputEvent", "output": 7}')
    theirs = Event.from_json('{"type": "_output_event", "attributes": {"output": 7}}')
    assert type(old) is type(theirs) is OutputEvent and old.output == theirs.output == 7
    typed = InputEvent.from_event(Event(type="_input_event", attributes={"input": "x"}))
    assert type(typed) is InputEvent and typed.input == "x"


def test_a_unified_output_event_is_an_output_under_the_crash_checker(tmp_path, monkeypatch):
    from flink_agents_py.testing import check_replay_safety

    (tmp_path / "retrying_agent.py").write_text(textwrap.dedent(AGENT))
    monkeypatch.syspath_prepend(str(tmp_path))
    from retrying_agent import RetryingAgent  # type: ignore[import-not-found]

    report = check_replay_safety(
        RetryingAgent(), [{"key": "a", "n": 2}, {"key": "b", "n": 5}], other_process=False
    )
    assert report.ok, report
    assert report.outputs == 2


TYPED = """
    import json
    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, AsyncExecutionResult, Event, InputEvent, MetricGroup,
        OutputEvent, ReadableConfiguration, RunnerContext, WritableConfiguration, action,
    )


    def double(x: int) -> int:
        return 2 * x


    class TypedAgent(Agent):
        @action(InputEvent.EVENT_TYPE)
        @staticmethod
        async def run(event: Event, ctx: RunnerContext) -> None:
            config: ReadableConfiguration = ctx.config
            group: MetricGroup = ctx.action_metric_group
            pending: AsyncExecutionResult = ctx.durable_execute_async(double, event.input)
            checks = [isinstance(config, ReadableConfiguration), isinstance(group, MetricGroup),
                      isinstance(pending, AsyncExecutionResult)]
            by_keyword = ctx.durable_execute(func=double, x=event.input)  # Flink Agents' name
            later = await ctx.durable_execute_async(func=double, x=by_keyword)
            try:
                ctx.durable_execute(x=1)
            except TypeError as e:
                checks.append("func=fn" in str(e))
            ctx.send_event(OutputEvent(output={"n": await pending, "checks": checks,
                                               "keyword": [by_keyword, later]}))


    env = AgentsExecutionEnvironment.get_execution_environment()
    assert isinstance(env.get_config(), WritableConfiguration)
    out = env.from_list([{"key": "a", "value": 4}]).apply(TypedAgent()).to_list()
    env.execute()
    print("OUT", json.dumps(out))
"""


def test_flink_agents_type_names_and_func_keyword_as_the_context_gives_them(tmp_path):
    # ReadableConfiguration, WritableConfiguration, AsyncExecutionResult and MetricGroup were
    # an ImportError from compat: a program typing its actions with them stopped at import;
    # durable_execute(func=f, ...) (Flink Agents' parameter name) failed the action
    proc = _run(tmp_path, TYPED)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert (
        'OUT [{"a": {"n": 8, "checks": [true, true, true, true], "keyword": [8, 16]}}]'
        in proc.stdout.splitlines()
    )


def test_a_unified_output_event_without_its_output_is_refused_naming_it():
    # it became an output of None without a word (Flink Agents refuses it too)
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import Agent, RunnerContext, action

    class Forgetful(Agent):
        @action(InputEvent)
        @staticmethod
        def go(event: Event, ctx: RunnerContext) -> None:
            ctx.send_event(Event(type="_output_event", attributes={"result": 1}))

    run = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(Forgetful()).run()
    assert run.outputs == []
    [error] = run.errors
    assert error.error_type == "ValueError" and error.action == "go"
    assert "needs its 'output' attribute" in error.message
    with pytest.raises(ValueError, match="'_input_event' is an InputEvent and needs its 'input'"):
        Event.from_json('{"type": "_input_event", "attributes": {}}')
