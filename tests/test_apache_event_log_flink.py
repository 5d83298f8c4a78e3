"""Apache Flink Agents' file event log on a MiniCluster: its own test's program, ported.

The program is Apache Flink Agents 0.3.1's ``python_event_logging_test.py`` with its imports
changed to ``flink_agents_py.compat``, run as a user's script from a temporary directory: it
sets ``baseLogDir``, runs the job and reads ``events-*.log`` as that test does (a record
with ``timestamp``, ``logLevel``, ``eventType`` and ``event.eventType``, ``eventType`` before
``id`` before ``attributes`` in the line, the output's content in it). A secret the agent
puts in its output never reaches the file.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.flink

pytest.importorskip("pyflink")

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else pathlib.Path(sys.executable))

AGENT = '''
from flink_agents_py.compat import Agent, Event, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.api import register_secret

SECRET = "hunter2-very-secret-token-value"
register_secret(SECRET)  # as a connection does with the API key it reads


class PythonEventLoggingAgent(Agent):
    @action(InputEvent)
    @staticmethod
    def process_input(event: Event, ctx: RunnerContext) -> None:
        input_data = InputEvent.from_event(event).input
        ctx.send_event(OutputEvent(output={"processed_review": f"{input_data['review']}",
                                           "note": "sent with " + SECRET}))
'''

MAIN = '''
import json

from pyflink.common import Configuration, Types
from pyflink.datastream import KeySelector, RuntimeExecutionMode, StreamExecutionEnvironment

from flink_agents_py.compat import AgentsExecutionEnvironment
from logging_agent import PythonEventLoggingAgent


class InputKeySelector(KeySelector):
    def get_key(self, value: dict) -> int:
        return value.get("id", 0)


env = StreamExecutionEnvironment.get_execution_environment(Configuration())
env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
env.set_parallelism(1)
agents_env = AgentsExecutionEnvironment.get_execution_environment(env=env)
agents_env.get_config().set_str("baseLogDir", "event_log")
lines = ['{"id": 1, "review": "great product"}', '{"id": 2, "review": "poor"}']
input_datastream = env.from_collection(lines, type_info=Types.STRING())
deserialize_datastream = input_datastream.map(lambda x: json.loads(x))
agents_env.from_datastream(input=deserialize_datastream, key_selector=InputKeySelector()
                           ).apply(PythonEventLoggingAgent()).to_datastream()
agents_env.execute()
'''


@pytest.mark.timeout(300)
def test_apaches_event_logging_test_ported_finds_its_files(tmp_path):
    (tmp_path / "logging_agent.py").write_text(textwrap.dedent(AGENT))
    (tmp_path / "main.py").write_text(textwrap.dedent(MAIN))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if os.environ.get("PYTHONPATH"):  # a work tree's package, not the venv's editable one
        env["PYTHONPATH"] = os.pathsep.join(
            os.path.abspath(p) for p in os.environ["PYTHONPATH"].split(os.pathsep) if p)
    res = subprocess.run([PYTHON, "main.py"], cwd=tmp_path, capture_output=True, text=True,
                         env=env, timeout=280, check=False)
    assert res.returncode == 0, res.stderr[-4000:]

    log_files = list((tmp_path / "event_log").glob("events-*.log"))
    assert len(log_files) == 1, log_files
    # events-{jobId}-{taskName}-{subtaskId}.log: Flink's job id, the task, subtask 0
    assert re.fullmatch(r"events-[0-9a-f]{32}-.*PythonEventLoggingAgent.*-0\.log",
                        log_files[0].name), log_files[0].name
    text = log_files[0].read_text()
    assert "hunter2-very-secret-token-value" not in text
    lines = [line for line in text.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]
    assert sorted(r["eventType"] for r in records) == ["_input_event"] * 2 + ["_output_event"] * 2
    for record, line in zip(records, lines, strict=True):
        assert {"timestamp", "logLevel", "eventType", "event"} <= set(record)
        assert record["event"]["eventType"] == record["eventType"]
        assert line.find('"eventType"') < line.find('"id"') < line.find('"attributes"')
    reviews = sorted(r["event"]["attributes"]["output"]["processed_review"] for r in records
                     if r["eventType"] == "_output_event")
    assert reviews == ["great product", "poor"]
