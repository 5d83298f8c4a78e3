"""Flink Agents' external sub-agent e2e test on a MiniCluster, ported with its imports changed.

Ported from apache/flink-agents ``python/flink_agents/e2e_tests/e2e_tests_integration/
external_subagent_test.py`` (commit af9c77fac0af3862ad414bf70c4adad26f859133, Apache-2.0):
a ``SubagentSetup`` instance (``as_async_callable`` with a ``BaseSubagentCallable``) added
to the agent as an ``AGENT`` resource, called with ``setup.call(ctx, prompt, session_id)``
from a sync action, the outputs written by a ``StreamingFileSink`` and read back; and the
YAML-declared form. Its agent module is the one ``test_compat_subagent_calls.py`` ports.
Before this port the program stopped at its imports (``BaseSubagentCallable``,
``DurableCallable``, ``Result``), and the setup instance was refused when the plan was built.
"""

from __future__ import annotations

import os
import subprocess
import textwrap

import pytest

from tests.test_compat_subagent_calls import EXTERNAL_AGENT, EXTERNAL_YAML, PYTHON, ROOT

JOB = """
    # Ported from apache/flink-agents python/flink_agents/e2e_tests/e2e_tests_integration/
    # external_subagent_test.py (commit af9c77fac0af, Apache-2.0): the imports changed, the
    # tests run as one program (pytest's tmp_path is a directory of its own here).
    import sys
    import tempfile
    from pathlib import Path

    from pyflink.common import Encoder
    from pyflink.common.typeinfo import Types
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.datastream.connectors.file_system import StreamingFileSink

    from flink_agents_py.compat import AgentsExecutionEnvironment
    from flink_agents_py.compat import ResourceType
    from external_subagent_agent import (
        SUBAGENT_NAME,
        ExternalSubagentAgent,
        InputKeySelector,
        MockExternalSubagentSetup,
    )

    _RESOURCES = Path(__file__).parent


    def _run_and_collect(agents_env, output_datastream, tmp_path: Path) -> str:
        result_dir = tmp_path / "results"
        result_dir.mkdir(parents=True, exist_ok=True)
        output_datastream.map(str, Types.STRING()).add_sink(
            StreamingFileSink.for_row_format(
                base_path=str(result_dir.absolute()),
                encoder=Encoder.simple_string_encoder(),
            ).build()
        )
        agents_env.execute()
        return "".join(p.read_text() for p in result_dir.rglob("*") if p.is_file())


    def test_python_external_subagent_call_end_to_end(tmp_path: Path) -> None:
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(1)
        input_stream = env.from_collection(["a", "b"])

        agent = ExternalSubagentAgent()
        agent.add_resource(
            SUBAGENT_NAME,
            ResourceType.AGENT,
            MockExternalSubagentSetup(endpoint_url="http://ext:8080"),
        )

        agents_env = AgentsExecutionEnvironment.get_execution_environment(env=env)
        output = (
            agents_env.from_datastream(input=input_stream, key_selector=InputKeySelector())
            .apply(agent)
            .to_datastream()
        )

        contents = _run_and_collect(agents_env, output, tmp_path)
        for prompt in ("a", "b"):
            assert f"HTTP response for: {prompt} from http://ext:8080" in contents


    def test_python_external_subagent_failure_surfaces_via_result(tmp_path: Path) -> None:
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(1)
        input_stream = env.from_collection(["a"])

        agent = ExternalSubagentAgent()
        agent.add_resource(
            SUBAGENT_NAME,
            ResourceType.AGENT,
            MockExternalSubagentSetup(endpoint_url="http://down:8080", fail_on_call=True),
        )

        agents_env = AgentsExecutionEnvironment.get_execution_environment(env=env)
        output = (
            agents_env.from_datastream(input=input_stream, key_selector=InputKeySelector())
            .apply(agent)
            .to_datastream()
        )

        contents = _run_and_collect(agents_env, output, tmp_path)
        assert "endpoint http://down:8080 is down" in contents


    def test_yaml_external_subagent_call_end_to_end(tmp_path: Path) -> None:
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(1)
        input_stream = env.from_collection(["a", "b"])

        agents_env = AgentsExecutionEnvironment.get_execution_environment(env=env)
        agents_env.load_yaml(str(_RESOURCES / "external_subagent_agent.yaml"))

        output = (
            agents_env.from_datastream(input=input_stream, key_selector=InputKeySelector())
            .apply("external_subagent_yaml_agent")
            .to_datastream()
        )

        contents = _run_and_collect(agents_env, output, tmp_path)
        for prompt in ("a", "b"):
            assert f"HTTP response for: {prompt} from http://yaml-endpoint:8080" in contents


    for test in (test_python_external_subagent_call_end_to_end,
                 test_python_external_subagent_failure_surfaces_via_result,
                 test_yaml_external_subagent_call_end_to_end):
        test(Path(tempfile.mkdtemp(dir=_RESOURCES)))
        print("PASSED", test.__name__)
"""


@pytest.mark.flink
@pytest.mark.timeout(900)
def test_external_subagent_e2e_program_on_a_minicluster(tmp_path):
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "external_subagent_agent.py").write_text(textwrap.dedent(EXTERNAL_AGENT))
    (tmp_path / "external_subagent_agent.yaml").write_text(textwrap.dedent(EXTERNAL_YAML))
    (tmp_path / "external_subagent_test.py").write_text(textwrap.dedent(JOB))
    env = {
        **{k: v for k, v in os.environ.items() if k != "FLINK_CONF_DIR"},
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        [str(PYTHON), "external_subagent_test.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=840,
    )
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert [line for line in proc.stdout.splitlines() if line.startswith("PASSED")] == [
        "PASSED test_python_external_subagent_call_end_to_end",
        "PASSED test_python_external_subagent_failure_surfaces_via_result",
        "PASSED test_yaml_external_subagent_call_end_to_end",
    ]
