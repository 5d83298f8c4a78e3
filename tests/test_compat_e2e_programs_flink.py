"""Apache Flink Agents' e2e jobs on a MiniCluster, ported with their imports changed only and
run from a directory outside the repository as a user's own modules.

- ``workflow_memory_remote_test.py`` + ``workflow_memory_remote_agent.py``: RocksDB state and
  1 s checkpoints, a file source mapped to pydantic records (a record without a key given a
  UUID one), a PyFlink ``KeySelector`` reading the model's field, short-term memory counting
  per key, outputs written with ``json.dumps`` by a ``StreamingFileSink``; checked against
  its ground truth (``resources/ground_truth/test_workflow_memory.txt``).
- ``react_agent_test.py``'s remote runner: a table of ``(a, b, c)`` rows keyed by a
  ``KeySelector`` of the ``Row``, a ``ReActAgent`` with environment tools and a
  ``RowTypeInfo`` output schema, ``to_table`` into a filesystem JSON sink, and its check of the
  model's reasoning chain read back from the file event log (``baseLogDir``) the way its
  ``test_utils.collect_tool_invocations`` reads it. Its model is an Ollama-compatible server
  on 127.0.0.1 (``tests/support/arith_ollama.py``), found through ``OLLAMA_HOST``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.arith_ollama import TOOLS_MODULE, arith_ollama

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = [pytest.mark.flink, pytest.mark.timeout(300)]


def _run(cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PYTHON), "job.py"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=280,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
    )


# workflow_memory_remote_agent.py, its imports changed
MEMORY_AGENT = """
    import uuid

    from pydantic import BaseModel
    from pyflink.datastream import KeySelector

    from flink_agents_py.compat import (
        Agent, Event, EventType, InputEvent, OutputEvent, RunnerContext, action)


    class WorkflowData(BaseModel):
        value: str
        key: str | None = None


    def deserialize_with_key(line: str) -> WorkflowData:
        data = WorkflowData.model_validate_json(line)
        if data.key is None:
            data.key = str(uuid.uuid4())
        return data


    class WorkflowKeySelector(KeySelector):
        def get_key(self, value: WorkflowData) -> str:
            return value.key


    class VisitCountAgent(Agent):
        @action(EventType.InputEvent)
        @staticmethod
        def count_visits(event: Event, ctx: RunnerContext) -> None:
            data = WorkflowData.model_validate(InputEvent.from_event(event).input)
            stm = ctx.short_term_memory

            count = (stm.get("visit_count") or 0) + 1
            stm.set("visit_count", count)

            ctx.send_event(
                OutputEvent(output={"content": data.value, "visit_count": count})
            )
"""

# workflow_memory_remote_test.py's job, its imports changed (paths made the job's own)
MEMORY_JOB = """
    import json
    from pathlib import Path

    from pyflink.common import Configuration, Encoder, WatermarkStrategy
    from pyflink.common.typeinfo import Types
    from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
    from pyflink.datastream.connectors.file_system import (
        FileSource, StreamFormat, StreamingFileSink)

    from flink_agents_py.compat import AgentsExecutionEnvironment
    from workflow_memory_remote_agent import (
        VisitCountAgent, WorkflowKeySelector, deserialize_with_key)

    current_dir = Path(__file__).parent

    config = Configuration()
    config.set_string("state.backend.type", "rocksdb")
    config.set_string("checkpointing.interval", "1s")
    config.set_string("restart-strategy.type", "disable")
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    env.set_parallelism(1)

    input_datastream = env.from_source(
        source=FileSource.for_record_stream_format(
            StreamFormat.text_line_format(),
            f"file:///{current_dir}/workflow_memory_input",
        ).build(),
        watermark_strategy=WatermarkStrategy.no_watermarks(),
        source_name="workflow_memory_source",
    )

    deserialize_datastream = input_datastream.map(deserialize_with_key)

    agents_env = AgentsExecutionEnvironment.get_execution_environment(env=env)
    output_datastream = (
        agents_env.from_datastream(
            input=deserialize_datastream, key_selector=WorkflowKeySelector()
        )
        .apply(VisitCountAgent())
        .to_datastream()
    )

    result_dir = current_dir / "results"
    result_dir.mkdir(parents=True, exist_ok=True)

    output_datastream.map(lambda x: json.dumps(x), Types.STRING()).add_sink(
        StreamingFileSink.for_row_format(
            base_path=str(result_dir.absolute()),
            encoder=Encoder.simple_string_encoder(),
        ).build()
    )

    agents_env.execute()
"""


def test_flink_agents_workflow_memory_remote_job(tmp_path: Path) -> None:
    (tmp_path / "workflow_memory_remote_agent.py").write_text(textwrap.dedent(MEMORY_AGENT))
    (tmp_path / "job.py").write_text(textwrap.dedent(MEMORY_JOB))
    (tmp_path / "workflow_memory_input").mkdir()
    # Flink Agents' resources/workflow_memory_input: three records of one key, one without
    (tmp_path / "workflow_memory_input" / "input_data.txt").write_text(
        '{"value": "a1", "key": "alpha"}\n{"value": "a2", "key": "alpha"}\n'
        '{"value": "a3", "key": "alpha"}\n{"value": "orphan"}\n'
    )
    proc = _run(tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [
        line
        for f in (tmp_path / "results").rglob("*")
        if f.is_file()
        for line in f.read_text().splitlines()
        if line.strip()
    ]
    # its ground truth: the key's count in arrival order, the keyless record counting alone
    assert sorted(json.dumps(json.loads(x), sort_keys=True) for x in lines) == sorted(
        json.dumps(x, sort_keys=True)
        for x in [
            {"content": "a1", "visit_count": 1},
            {"content": "a2", "visit_count": 2},
            {"content": "a3", "visit_count": 3},
            {"content": "orphan", "visit_count": 1},
        ]
    )


# react_agent_test.py, test_react_agent_on_remote_runner, its imports changed
REACT_JOB = """
    import json
    import os
    import tempfile
    from pathlib import Path

    from pyflink.common import Row
    from pyflink.common.typeinfo import BasicTypeInfo, ExternalTypeInfo, RowTypeInfo
    from pyflink.datastream import KeySelector, StreamExecutionEnvironment
    from pyflink.table import DataTypes, Schema, StreamTableEnvironment, TableDescriptor

    from flink_agents_py.compat import (
        AgentExecutionOptions, AgentsExecutionEnvironment, ChatMessage, ErrorHandlingStrategy,
        MessageRole, Prompt, ReActAgent, ResourceDescriptor, ResourceName, ResourceType, Tool)
    from react_agent_tools import add, multiply

    OLLAMA_MODEL = os.environ.get("REACT_OLLAMA_MODEL", "qwen3:1.7b")


    class MyKeySelector(KeySelector):
        def get_key(self, value: Row) -> int:
            return value[0]


    def collect_tool_invocations(log_dir):
        invocations = []
        for log_file in sorted(Path(log_dir).glob("events-*.log")):
            with log_file.open() as handle:
                for line in handle:
                    if not line.strip():
                        continue
                    record = json.loads(line)
                    if record.get("eventType") != "_tool_request_event":
                        continue
                    for tool_call in record["event"]["attributes"].get("tool_calls", []):
                        function = tool_call["function"]
                        invocations.append({"name": function["name"],
                                            "arguments": function["arguments"]})
        return invocations


    tmp_path = Path(tempfile.mkdtemp(dir="."))
    stream_env = StreamExecutionEnvironment.get_execution_environment()
    stream_env.set_parallelism(1)
    t_env = StreamTableEnvironment.create(stream_execution_environment=stream_env)
    table = t_env.from_elements(
        elements=[(1, 2, 3)],
        schema=DataTypes.ROW(
            [
                DataTypes.FIELD("a", DataTypes.INT()),
                DataTypes.FIELD("b", DataTypes.INT()),
                DataTypes.FIELD("c", DataTypes.INT()),
            ]
        ),
    )

    env = AgentsExecutionEnvironment.get_execution_environment(
        env=stream_env, t_env=t_env
    )
    env.get_config().set(
        AgentExecutionOptions.ERROR_HANDLING_STRATEGY, ErrorHandlingStrategy.RETRY
    )
    env.get_config().set(AgentExecutionOptions.MAX_RETRIES, 3)

    log_dir = tmp_path / "event_logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    env.get_config().set_str("baseLogDir", str(log_dir))

    (
        env.add_resource(
            "ollama",
            ResourceType.CHAT_MODEL_CONNECTION,
            ResourceDescriptor(
                clazz=ResourceName.ChatModel.OLLAMA_CONNECTION, request_timeout=240.0
            ),
        )
        .add_resource("add", ResourceType.TOOL, Tool.from_callable(add))
        .add_resource("multiply", ResourceType.TOOL, Tool.from_callable(multiply))
    )

    prompt = Prompt.from_messages(
        messages=[
            ChatMessage(
                role=MessageRole.SYSTEM,
                content='An example of output is {"result": 30.32}.',
            ),
            ChatMessage(role=MessageRole.USER, content="What is ({a} + {b}) * {c}"),
        ],
    )

    output_type_info = RowTypeInfo(
        [BasicTypeInfo.INT_TYPE_INFO()],
        ["result"],
    )

    agent = ReActAgent(
        chat_model=ResourceDescriptor(
            clazz=ResourceName.ChatModel.OLLAMA_SETUP,
            connection="ollama",
            model=OLLAMA_MODEL,
            tools=["add", "multiply"],
        ),
        prompt=prompt,
        output_schema=output_type_info,
    )

    output_type = ExternalTypeInfo(output_type_info)

    schema = (Schema.new_builder().column("result", DataTypes.INT())).build()

    output_table = (
        env.from_table(input=table, key_selector=MyKeySelector())
        .apply(agent)
        .to_table(schema=schema, output_type=output_type)
    )

    result_dir = tmp_path / "results"
    result_dir.mkdir(parents=True, exist_ok=True)

    t_env.create_temporary_table(
        "sink",
        TableDescriptor.for_connector("filesystem")
        .option("path", str(result_dir.absolute()))
        .format("json")
        .schema(schema)
        .build(),
    )

    output_table.execute_insert("sink").wait()

    actual_result = []
    for file in result_dir.iterdir():
        if file.is_file():
            with file.open() as f:
                actual_result.extend(f.readlines())

    assert len(actual_result) == 1, actual_result
    assert "result" in json.loads(actual_result[0].strip())
    print("RESULT", actual_result[0].strip())
    print("INVOCATIONS", json.dumps(collect_tool_invocations(log_dir)))
"""


def test_flink_agents_react_agent_remote_runner_job(tmp_path: Path) -> None:
    (tmp_path / "react_agent_tools.py").write_text(TOOLS_MODULE)
    (tmp_path / "job.py").write_text(textwrap.dedent(REACT_JOB))
    with arith_ollama() as (url, requests):
        proc = _run(tmp_path, OLLAMA_HOST=url)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = dict(
        line.split(" ", 1)
        for line in proc.stdout.splitlines()
        if line.startswith(("RESULT ", "INVOCATIONS "))
    )
    # (1 + 2) * 3, the model's answer through the RowTypeInfo schema into the table's row
    assert json.loads(lines["RESULT"]) == {"result": 9}
    # its test's check of the reasoning chain: add(1, 2) = 3 threaded into multiply(3, 3)
    assert json.loads(lines["INVOCATIONS"]) == [
        {"name": "add", "arguments": {"a": 1, "b": 2}},
        {"name": "multiply", "arguments": {"a": 3, "b": 3}},
    ]
    # the row's fields filled the prompt; the tools were offered by their docstrings
    assert requests[0]["messages"][-1] == {"role": "user", "content": "What is (1 + 2) * 3"}
    offered = {t["function"]["name"]: t["function"] for t in requests[0]["tools"]}
    assert offered["add"]["description"] == "Calculate the sum of a and b."
    assert offered["multiply"]["parameters"]["properties"]["a"] == {
        "type": "integer",
        "description": "The first operand",
    }
