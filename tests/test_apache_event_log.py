"""Apache Flink Agents' file event log (``baseLogDir``) on the local runner, as its users read it.

A program ported from Apache Flink Agents 0.3 that sets ``baseLogDir`` and reads the files
(as Apache's ``python_event_logging_test.py`` and its docs' monitoring page do) found
nothing: the option was taken and had no effect. Now it gets
``{baseLogDir}/events-{jobId}-{taskName}-{subtaskId}.log`` with one JSON record per event
(``timestamp``, ``logLevel``, ``eventType``, ``event``: ``eventType``, ``id``,
``attributes``), secrets masked; our own event log is unchanged beside it.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from flink_agents_py.api import (
    Agent,
    Event,
    InputEvent,
    OutputEvent,
    ToolCall,
    ToolRequestEvent,
    action,
    register_secret,
)
from flink_agents_py.observability import ApacheEventLog
from flink_agents_py.observability._apache_event_log import apache_event

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else pathlib.Path(sys.executable))
SECRET = "hunter2-very-secret-token-value"


def read_records(folder: pathlib.Path) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted(folder.glob("events-*.log"))
            for line in f.read_text().splitlines() if line.strip()]


class Review(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(Event(type="Scored", attributes={"score": 5, "password": "pw-1234"}))
        ctx.send_event(OutputEvent(output={"processed_review": event.input["review"],
                                           "note": f"token {SECRET}"}))


def test_the_options_say_where_and_how_the_files_are_written(tmp_path):
    assert ApacheEventLog.from_config({}) is None
    assert ApacheEventLog.from_config({"eventLoggerType": "slf4j"}) is None
    default = ApacheEventLog.from_config({"eventLoggerType": "file"})
    assert default is not None and default.base_dir.endswith(os.sep + "flink-agents")
    spec = ApacheEventLog.from_config({
        "baseLogDir": str(tmp_path), "event-log.level": "verbose", "prettyPrint": "true",
        "event-log.type._chat_request_event.level": "OFF",
        "event-log.standard.max-string-length": 10})
    assert spec is not None and spec.level == "VERBOSE" and spec.pretty_print
    assert spec.type_levels == (("_chat_request_event", "OFF"),)
    assert spec.file_path("abc", 'Agent: a/b -> Map', 2) == str(
        tmp_path / "events-abc-Agent_ a_b -_ Map-2.log")
    with pytest.raises(ValueError, match="event-log.level must be one of"):
        ApacheEventLog.from_config({"baseLogDir": "x", "event-log.level": "LOUD"})


def test_events_take_apache_names_and_attributes():
    etype, node = apache_event(ToolRequestEvent(
        model="m", tool_calls=[ToolCall(id="c1", name="add", arguments={"a": 1})]))
    assert etype == "_tool_request_event"
    assert list(node) == ["eventType", "id", "attributes", "type"]
    assert node["attributes"] == {"model": "m", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": {"a": 1}}}]}
    etype, node = apache_event(Event(type="Mine", attributes={"a": 1}))
    assert (etype, node["attributes"]) == ("Mine", {"a": 1})


def test_standard_truncates_as_apache_does(tmp_path):
    spec = ApacheEventLog(str(tmp_path), max_string_length=4, max_array_elements=2,
                          max_depth=3)
    log = spec.open(job_id="j", task_name="t")
    assert log is not None
    record = log.record(Event(type="Longer", attributes={"a": "x" * 10}))
    log.close()
    assert record is not None
    # the event's eventType, id and attributes are never truncated; its type is (Apache's)
    assert record["eventType"] == record["event"]["eventType"] == "Longer"
    assert record["event"]["attributes"] == {"a": "x" * 10}
    assert record["event"]["type"] == {"truncatedString": "Long...", "omittedChars": 2}
    truncator = log.truncator
    assert truncator.value(["abcdef", "b", "c"], 1) == {
        "truncatedList": [{"truncatedString": "abcd...", "omittedChars": 2}, "b"],
        "omittedElements": 1}
    assert truncator.obj({"x": {"y": {"z": {"w": 1}, "s": 1}}}, 1, top=False) == {
        "x": {"y": {"truncatedObject": {"s": 1}, "omittedFields": 1}}}


def test_a_local_run_writes_apache_files_beside_our_event_log(tmp_path):
    from flink_agents_py.compat import AgentConfigOptions, AgentsExecutionEnvironment

    register_secret(SECRET)
    apache_dir, ours = tmp_path / "apache", tmp_path / "ours.jsonl"
    env = AgentsExecutionEnvironment.get_execution_environment(event_log=str(ours))
    env.get_config().set(AgentConfigOptions.BASE_LOG_DIR, str(apache_dir))
    out = env.from_list([{"key": 1, "value": {"review": "good"}}]).apply(Review()).to_list()
    env.execute()
    assert out[0][1]["processed_review"] == "good"
    files = list(apache_dir.glob("events-*.log"))
    assert len(files) == 1 and re.fullmatch(r"events-[0-9a-f]{32}-Review-0\.log",
                                            files[0].name), files
    text = files[0].read_text()
    assert SECRET not in text and "pw-1234" not in text
    records = read_records(apache_dir)
    assert [r["eventType"] for r in records] == ["_input_event", "Scored", "_output_event"]
    assert records[0]["event"]["attributes"] == {"input": {"review": "good"}}
    assert records[1]["event"]["attributes"] == {"score": 5, "password": "[REDACTED]"}
    assert records[2]["event"]["attributes"]["output"]["processed_review"] == "good"
    assert all(r["logLevel"] == "STANDARD" and r["timestamp"].endswith("Z") for r in records)
    kinds = [json.loads(line)["kind"] for line in ours.read_text().splitlines()]
    assert kinds[0] == "log_opened" and "output" in kinds  # ours, as before


SCRIPT = '''
import json
from pathlib import Path

from flink_agents_py.compat import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, OutputEvent, action


class PythonEventLoggingAgent(Agent):
    @action(InputEvent)
    @staticmethod
    def process_input(event, ctx):
        ctx.send_event(OutputEvent(output={"processed_review": event.input["review"]}))


Path("flink-conf").mkdir()
Path("flink-conf/config.yaml").write_text("agent:\\n  baseLogDir: event_log\\n"
                                          "  event-log:\\n    level: VERBOSE\\n")
agents_env = AgentsExecutionEnvironment.get_execution_environment()
agents_env.get_config("flink-conf/config.yaml")
agents_env.from_list([{"key": 1, "value": {"review": "nice"}}]).apply(
    PythonEventLoggingAgent()).to_list()
agents_env.execute()
print(json.dumps(sorted(p.name.split("-")[-2] for p in Path("event_log").glob("events-*.log"))))
'''


def test_a_script_run_from_its_own_folder_finds_the_files_where_its_config_says(tmp_path):
    (tmp_path / "main.py").write_text(textwrap.dedent(SCRIPT))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if os.environ.get("PYTHONPATH"):  # a work tree's package, not the venv's editable one
        env["PYTHONPATH"] = os.pathsep.join(
            os.path.abspath(p) for p in os.environ["PYTHONPATH"].split(os.pathsep) if p)
    res = subprocess.run([PYTHON, "main.py"], cwd=tmp_path, capture_output=True, text=True,
                         env=env, timeout=120, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout.strip().splitlines()[-1]) == ["PythonEventLoggingAgent"]
    records = read_records(tmp_path / "event_log")  # relative to the script's folder
    assert {r["logLevel"] for r in records} == {"VERBOSE"}
    line = (next((tmp_path / "event_log").glob("events-*.log"))).read_text().splitlines()[1]
    assert line.find('"eventType"') < line.find('"id"') < line.find('"attributes"')
    assert any("nice" in json.dumps(r["event"]) for r in records)


def test_apaches_option_objects_and_enums_configure_it(tmp_path):
    from flink_agents_py.compat import (
        AgentConfigOptions,
        AgentsExecutionEnvironment,
        EventLogLevel,
        LoggerType,
    )

    env = AgentsExecutionEnvironment.get_execution_environment()
    config = env.get_config()
    config.set(AgentConfigOptions.EVENT_LOGGER_TYPE, LoggerType.FILE)
    assert env.local.options.apache_event_log.base_dir.endswith("flink-agents")
    config.set(AgentConfigOptions.BASE_LOG_DIR, str(tmp_path))
    config.set(AgentConfigOptions.EVENT_LOG_LEVEL, EventLogLevel.VERBOSE)
    config.set(AgentConfigOptions.EVENT_LOG_MAX_STRING_LENGTH, 50)
    config.set(AgentConfigOptions.EVENT_LOG_MAX_ARRAY_ELEMENTS, 3)
    config.set(AgentConfigOptions.EVENT_LOG_MAX_DEPTH, 2)
    spec = env.local.options.apache_event_log
    assert (spec.base_dir, spec.level, spec.max_string_length, spec.max_array_elements,
            spec.max_depth) == (str(tmp_path), "VERBOSE", 50, 3, 2)
    config.set(AgentConfigOptions.EVENT_LOG_LEVEL, EventLogLevel.OFF)
    assert env.local.options.apache_event_log.open(job_id="j", task_name="t") is None


def test_a_flink_environment_reads_the_agent_section_of_flink_conf_dir(tmp_path, monkeypatch):
    pytest.importorskip("pyflink")
    from flink_agents_py.compat import AgentsExecutionEnvironment

    (tmp_path / "config.yaml").write_text(f"agent:\n  baseLogDir: {tmp_path / 'logs'}\n")
    monkeypatch.setenv("FLINK_CONF_DIR", str(tmp_path))
    env = AgentsExecutionEnvironment.get_execution_environment(object())
    assert env.flink.options.apache_event_log.base_dir == str(tmp_path / "logs")
    (tmp_path / "config.yaml").write_text("taskmanager:\n  numberOfTaskSlots: 1\n")
    assert AgentsExecutionEnvironment.get_execution_environment(
        object()).flink.options.apache_event_log is None


def test_a_dotted_event_type_takes_its_nearest_parents_level(tmp_path):
    # Apache resolves ``event-log.type.<TYPE>.level`` as Log4j does loggers: a ported
    # program silencing ``shop`` (its own ``shop.*`` event types) had them all logged here
    spec = ApacheEventLog.from_config({
        "baseLogDir": str(tmp_path), "event-log.type.shop.level": "OFF",
        "event-log.type.shop.refund.level": "VERBOSE"})
    assert spec is not None
    log = spec.open(job_id="j", task_name="t")
    assert log is not None

    def level(etype: str) -> str | None:
        record = log.record(Event(type=etype, attributes={"a": 1}))
        return None if record is None else record["logLevel"]

    assert level("shop.order_placed") is None
    assert level("shop.refund.asked") == "VERBOSE"
    assert level("shop.refund") == "VERBOSE"
    assert level("shopping.cart") == "STANDARD"  # not a dotted child of "shop"
    assert level("Scored") == "STANDARD"
    assert level("shop.order_placed") is None  # (resolved once, then kept)
    log.close()
