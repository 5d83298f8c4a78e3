"""Flink Agents' Trace Log e2e tests on a MiniCluster, as their jobs run there.

Ported from apache/flink-agents (Apache-2.0) with their imports changed:
``python/flink_agents/e2e_tests/e2e_tests_integration/python_trace_logging_test.py``
(commit 67e917e81337a892375e9f6d5a6936a68b63d1be: a ``FileSource`` of JSON lines keyed by
a ``KeySelector``, ``agents_env.execute()``) and ``memory_trace_logging_test.py`` (commit
a96372a788696bd30cfc0104bfbd9da9f3e5277a: ``from_collection``, ``execute_and_collect``);
the agents and checks are ``test_compat_trace_log.py``'s.
"""

from __future__ import annotations

import textwrap

import pytest

from tests.test_compat_trace_log import run_programs

JOBS = """
    import json
    import tempfile

    from pyflink.common import Configuration, WatermarkStrategy
    from pyflink.datastream import KeySelector, RuntimeExecutionMode, StreamExecutionEnvironment
    from pyflink.datastream.connectors.file_system import FileSource, StreamFormat

    from trace_programs import *  # noqa: F403

    current_dir = Path(__file__).parent
    (current_dir / "input").mkdir()
    (current_dir / "input" / "input_data.txt").write_text(
        '{"id": 1, "review": "great"}\\n{"id": 2, "review": "late"}\\n')


    class InputKeySelector(KeySelector):
        def get_key(self, value: dict) -> int:
            return value.get("id", 0)


    def _run_trace_logging_pipeline(tmp_path, targets=None):
        trace_log_dir = tmp_path / "trace_log"
        config = Configuration()
        env = StreamExecutionEnvironment.get_execution_environment(config)
        env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
        env.set_parallelism(1)
        agents_env = AgentsExecutionEnvironment.get_execution_environment(env=env)
        agents_env.get_config().set_str("trace-log.base-dir", str(trace_log_dir))
        if targets is not None:
            agents_env.get_config().set(AgentConfigOptions.TRACE_LOG_TARGETS, targets)
        input_datastream = env.from_source(
            source=FileSource.for_record_stream_format(
                StreamFormat.text_line_format(),
                f"file:///{current_dir}/input/input_data.txt",
            ).build(),
            watermark_strategy=WatermarkStrategy.no_watermarks(),
            source_name="python_trace_logging_test",
        )
        deserialize_datastream = input_datastream.map(lambda x: json.loads(x))
        agents_env.from_datastream(
            input=deserialize_datastream, key_selector=InputKeySelector()
        ).apply(PythonTraceLoggingAgent()).to_datastream()
        agents_env.execute()
        return trace_log_dir


    def tmp():
        return Path(tempfile.mkdtemp(dir=current_dir))


    check_python_trace_logging(read_records(_run_trace_logging_pipeline(tmp())))
    print("PASSED python_trace_logging")
    check_trace_tree_lineage(read_records(
        _run_trace_logging_pipeline(tmp(), targets=[{"scope": "ALL"}])))
    print("PASSED trace_tree_lineage")

    trace_log_dir = tmp() / "trace_log"
    inputs = [{"id": 7, "review": f"input-{i}"} for i in range(3)]
    config = Configuration()
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(1)
    agents_env = AgentsExecutionEnvironment.get_execution_environment(env=env)
    agents_env.get_config().set_str("trace-log.base-dir", str(trace_log_dir))
    agents_env.get_config().set(AgentExecutionOptions.AGENT_RUN_BEGIN_EVENT, True)
    agents_env.get_config().set(
        AgentConfigOptions.TRACE_LOG_TARGETS,
        [{"scope": "EVENT_ONLY", "detail": "VERBOSE"}],
    )
    input_datastream = env.from_collection(inputs)
    output_datastream = (
        agents_env.from_datastream(
            input=input_datastream, key_selector=lambda value: value["id"]
        )
        .apply(MemoryWritingAgent())
        .to_datastream()
    )
    list(output_datastream.execute_and_collect())
    check_memory_trace_logging(read_records(trace_log_dir), inputs)
    print("PASSED memory_trace_logging")
"""


@pytest.mark.flink
@pytest.mark.timeout(900)
def test_trace_logging_jobs_on_a_minicluster(tmp_path):
    assert run_programs(tmp_path, textwrap.dedent(JOBS), timeout=840) == [
        "python_trace_logging",
        "trace_tree_lineage",
        "memory_trace_logging",
    ]
