"""Flink Agents' file Trace Log (its main branch), from its e2e tests ported.

Ported from apache/flink-agents (Apache-2.0) with their imports changed:

- ``python/flink_agents/e2e_tests/e2e_tests_integration/python_trace_logging_test.py``
  (commit 67e917e81337a892375e9f6d5a6936a68b63d1be): ``trace-log.base-dir`` set, the
  default targets (events at ``STANDARD``), then ``[{"scope": "ALL"}]`` with the lineage an
  output event's record carries (``producerExecutionId``, ``upstreamEventId``,
  ``upstreamActionName``) checked against the action records; its last step, Flink Agents'
  ``flink_agents.cli.trace_tree`` reader, has no counterpart and is left out.
- ``memory_trace_logging_test.py`` (commit a96372a788696bd30cfc0104bfbd9da9f3e5277a): memory
  write and run-begin events in the Trace Log at ``VERBOSE`` (``EVENT_ONLY``), the
  run-begin events' upstream being their input events, without a producer.

Before this port ``AgentConfigOptions.TRACE_LOG_TARGETS`` was an ``AttributeError`` and
``trace-log.base-dir`` wrote nothing.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from flink_agents_py.observability import ApacheEventLog
from flink_agents_py.observability._apache_trace_log import TraceSpec, trace_detail
from tests.test_compat_memory_event_log import run

pytestmark = pytest.mark.timeout(120)

PROGRAMS = """
    # Ported from apache/flink-agents python/flink_agents/e2e_tests/e2e_tests_integration/
    # python_trace_logging_test.py (commit 67e917e81337) and memory_trace_logging_test.py
    # (commit a96372a78869), Apache-2.0: the imports changed; their checks as functions.
    # Records are compared with InputEvent.EVENT_TYPE / OutputEvent.EVENT_TYPE, as there
    # (records name Flink Agents' "_output_event"; the class's EVENT_TYPE equals it too).
    import json
    from pathlib import Path

    from flink_agents_py.compat import Agent
    from flink_agents_py.compat import AgentConfigOptions, AgentExecutionOptions
    from flink_agents_py.compat import action
    from flink_agents_py.compat import Event, InputEvent, OutputEvent
    from flink_agents_py.compat import EventType
    from flink_agents_py.compat import AgentsExecutionEnvironment
    from flink_agents_py.compat import RunnerContext


    class PythonTraceLoggingAgent(Agent):
        @action(EventType.InputEvent)
        @staticmethod
        def process_input(event: Event, ctx: RunnerContext) -> None:
            input_data = InputEvent.from_event(event).input
            ctx.send_event(
                OutputEvent(output={"processed_review": f"{input_data['review']}"})
            )


    class MemoryWritingAgent(Agent):
        @action(EventType.InputEvent)
        @staticmethod
        def process_input(event: Event, ctx: RunnerContext) -> None:
            input_data = InputEvent.from_event(event).input
            ctx.short_term_memory.set("user.tier", "gold")
            ctx.send_event(OutputEvent(output={"processed": input_data["review"]}))


    def read_records(trace_log_dir: Path) -> list:
        records = []
        for log_file in trace_log_dir.glob("traces-*.log"):
            with log_file.open(encoding="utf-8") as handle:
                records.extend(json.loads(line) for line in handle if line.strip())
        return records


    def check_python_trace_logging(records) -> None:
        assert records, "Trace log file is empty."
        assert all(record["entityType"] == "event" for record in records)
        outputs = [
            record for record in records if record["entityName"] == OutputEvent.EVENT_TYPE
        ]
        assert outputs, "Trace log should contain Python output Events."
        for record in outputs:
            assert record["timestamp"]
            assert record["detail"] == "STANDARD"
            assert record["entityMetadata"]["eventId"]
            assert "processed_review" in record["attributes"]["output"]


    def check_trace_tree_lineage(records) -> None:
        input_events = {
            record["entityMetadata"]["eventId"]: record
            for record in records
            if record["entityType"] == "event"
            and record["entityName"] == InputEvent.EVENT_TYPE
        }
        output_events = [
            record
            for record in records
            if record["entityType"] == "event"
            and record["entityName"] == OutputEvent.EVENT_TYPE
        ]
        actions = {
            record["executionId"]: record
            for record in records
            if record["entityType"] == "action"
            and record["entityName"] == "process_input"
            and record["status"] == "started"
        }
        assert input_events
        assert len(output_events) == len(input_events)
        assert len(actions) == len(input_events)
        for input_event in input_events.values():
            metadata = input_event["entityMetadata"]
            assert "producerExecutionId" not in metadata
            assert "upstreamEventId" not in metadata
            assert "upstreamActionName" not in metadata
        for output_event in output_events:
            metadata = output_event["entityMetadata"]
            input_event = input_events[metadata["upstreamEventId"]]
            action_record = actions[metadata["producerExecutionId"]]
            assert metadata["upstreamActionName"] == "process_input"
            assert action_record["entityName"] == "process_input"
            assert (
                action_record["entityMetadata"]["triggerEventId"]
                == metadata["upstreamEventId"]
            )
            assert output_event["inputRunId"] == input_event["inputRunId"]
            assert action_record["inputRunId"] == input_event["inputRunId"]
            assert "parentExecutionId" not in action_record


    def check_memory_trace_logging(all_records, inputs) -> None:
        records = [record for record in all_records if record["entityType"] == "event"]
        types = [r["entityName"] for r in records]
        assert EventType.AgentRunBeginEvent in types
        assert EventType.ShortTermWriteEvent in types

        write = next(r for r in records if r["entityName"] == EventType.ShortTermWriteEvent)
        assert write["attributes"]["value"]["user.tier"] == "gold"
        assert write["attributes"]["key"] == "7"

        begins = [r for r in records if r["entityName"] == EventType.AgentRunBeginEvent]
        assert len(begins) == len(inputs)
        assert {event["attributes"]["key"] for event in begins} == {"7"}
        assert begins[0]["attributes"]["value"] == {}
        assert begins[-1]["attributes"]["value"].get("user.tier") == "gold"

        input_events = {
            record["entityMetadata"]["eventId"]: record
            for record in records
            if record["entityName"] == EventType.InputEvent
        }
        assert {event["entityMetadata"]["upstreamEventId"] for event in begins} == set(
            input_events
        )
        for begin in begins:
            metadata = begin["entityMetadata"]
            input_event = input_events[metadata["upstreamEventId"]]
            assert begin["inputRunId"] == input_event["inputRunId"]
            assert metadata["upstreamActionName"] == "agent_run_begin_action"
            assert "producerExecutionId" not in metadata
"""

LOCAL = """
    import tempfile
    from trace_programs import *  # noqa: F403

    REVIEWS = [{"id": 1, "review": "great"}, {"id": 2, "review": "late"}]


    def run(agent, configure, records):
        trace_log_dir = Path(tempfile.mkdtemp(dir=".")) / "trace_log"
        env = AgentsExecutionEnvironment.get_execution_environment()
        env.get_config().set_str("trace-log.base-dir", str(trace_log_dir))
        configure(env.get_config())
        env.from_list(records).apply(agent).to_list()
        env.execute()
        return read_records(trace_log_dir)


    check_python_trace_logging(run(
        PythonTraceLoggingAgent(), lambda c: None,
        [{"key": r["id"], "value": r} for r in REVIEWS]))
    print("PASSED python_trace_logging")
    check_trace_tree_lineage(run(
        PythonTraceLoggingAgent(),
        lambda c: c.set(AgentConfigOptions.TRACE_LOG_TARGETS, [{"scope": "ALL"}]),
        [{"key": r["id"], "value": r} for r in REVIEWS]))
    print("PASSED trace_tree_lineage")
    inputs = [{"id": 7, "review": f"input-{i}"} for i in range(3)]


    def memory_options(config):
        config.set(AgentExecutionOptions.AGENT_RUN_BEGIN_EVENT, True)
        config.set(AgentConfigOptions.TRACE_LOG_TARGETS,
                   [{"scope": "EVENT_ONLY", "detail": "VERBOSE"}])


    check_memory_trace_logging(run(MemoryWritingAgent(), memory_options,
                                   [{"key": r["id"], "value": r} for r in inputs]), inputs)
    print("PASSED memory_trace_logging")
"""


def run_programs(tmp_path: Path, main: str, timeout: int = 100) -> list[str]:
    """Run ``main`` beside the ported programs; the names of the checks that passed."""
    (tmp_path / "trace_programs.py").write_text(textwrap.dedent(PROGRAMS))
    proc = run(tmp_path, main, timeout=timeout)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    return [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("PASSED")]


def test_trace_logging_programs_on_the_local_runner(tmp_path):
    assert run_programs(tmp_path, LOCAL) == [
        "python_trace_logging",
        "trace_tree_lineage",
        "memory_trace_logging",
    ]


def test_the_most_specific_target_decides():
    def spec(*targets: dict[str, object]) -> TraceSpec:
        made = ApacheEventLog.from_config(
            {"trace-log.base-dir": "/t", "trace-log.targets": list(targets)}
        )
        assert made is not None and made.base_dir is None and made.trace is not None
        return made.trace

    default = TraceSpec(base_dir="/t")
    assert trace_detail(default, "event", "_input_event") == "STANDARD"
    assert trace_detail(default, "action", "go") == "OFF"
    every = spec(
        {"scope": "ALL", "detail": "OFF"},
        {"scope": {"entityType": "tool", "entityName": "search"}, "detail": "VERBOSE"},
        {"scope": {"entityType": "tool", "entityName": "shop.*"}},
    )
    assert trace_detail(every, "tool", "search") == "VERBOSE"
    assert trace_detail(every, "tool", "shop.cart") == "OFF"  # inherits ALL's OFF
    assert trace_detail(every, "event", "_output_event") == "OFF"
    mixed = spec(
        {"scope": "ALL"},
        {"scope": "EVENT_ONLY", "detail": "VERBOSE"},
        {"scope": {"entityType": "event", "entityName": "_input_event"}, "detail": "OFF"},
    )
    assert trace_detail(mixed, "event", "_input_event") == "OFF"
    assert trace_detail(mixed, "event", "_output_event") == "VERBOSE"
    assert trace_detail(mixed, "action", "go") == "STANDARD"
    with pytest.raises(ValueError, match=r"trace-log.targets\[0\]"):
        spec({"scope": "EVERYTHING"})
    with pytest.raises(ValueError, match="must be one of"):
        spec({"scope": "ALL", "detail": "LOUD"})
    assert ApacheEventLog.from_config({"trace-log.output-type": "FILE"}) is not None


CHAT = """
    import json
    import tempfile
    from pathlib import Path

    from flink_agents_py.compat import (
        Agent, AgentsExecutionEnvironment, ChatMessage, ChatRequestEvent, ChatResponseEvent,
        EventType, InputEvent, MessageRole, OutputEvent, ResourceDescriptor, ResourceName,
        RunnerContext, action, chat_model_connection, chat_model_setup)


    def answer(request):
        return "ok " + request.messages[-1].content


    class Asker(Agent):
        @chat_model_connection
        @staticmethod
        def scripted() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=ResourceName.ChatModel.SCRIPTED_CONNECTION,
                                      function=f"{__name__}:answer")

        @chat_model_setup
        @staticmethod
        def model() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=ResourceName.ChatModel.OLLAMA_SETUP,
                                      connection="scripted", model="m")

        @action(EventType.InputEvent)
        @staticmethod
        def ask(event: InputEvent, ctx: RunnerContext) -> None:
            ctx.send_event(ChatRequestEvent(model="model", messages=[
                ChatMessage(role=MessageRole.USER, content=str(event.input))]))

        @action(EventType.ChatResponseEvent)
        @staticmethod
        def done(event: ChatResponseEvent, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output=event.response.content))


    trace_log_dir = Path(tempfile.mkdtemp(dir=".")) / "trace_log"
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.get_config().set_str("trace-log.base-dir", str(trace_log_dir))
    env.from_list([{"key": "a", "value": "x"}, {"key": "b", "value": "y"}]).apply(
        Asker()).to_list()
    env.execute()
    [log] = trace_log_dir.glob("traces-*.log")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    requests = {r["entityMetadata"]["eventId"]: r for r in records
                if r["entityName"] == "_chat_request_event"}
    responses = [r for r in records if r["entityName"] == "_chat_response_event"]
    print("IDS", len({r["entityMetadata"]["eventId"] for r in records}), len(records))
    for response in responses:
        request = requests[response["attributes"]["request_id"]]
        print("PAIR", request["businessKey"], response["businessKey"])
"""


def test_event_ids_are_unique_in_the_log_and_a_response_names_its_request(tmp_path):
    # our event ids are per key (each key's first input is r0): the log writes them after
    # the key's text, a response's request_id too, so records of two keys do not collide
    proc = run(tmp_path, textwrap.dedent(CHAT))
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    lines = proc.stdout.splitlines()
    ids = next(line for line in lines if line.startswith("IDS")).split()
    assert ids[1] == ids[2] == "8"  # input, request, response, output for each of 2 keys
    assert sorted(line for line in lines if line.startswith("PAIR")) == ["PAIR a a", "PAIR b b"]
