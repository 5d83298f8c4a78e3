"""Flink Agents' memory event logging e2e test on a MiniCluster, as it runs there.

Ported from apache/flink-agents ``python/flink_agents/e2e_tests/e2e_tests_integration/
memory_event_logging_test.py`` (commit b2bb753698980a6ee625a035305e57dc5b3f7b64,
Apache-2.0) with its imports changed: the job (``from_datastream`` with a key selector,
``execute_and_collect``) and its checks of the file event log, which
``test_compat_memory_event_log.py`` runs on the local runner.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.test_compat_memory_event_log import CHECKS, run

JOB = """
    import json
    import os
    import sysconfig
    import tempfile
    from pathlib import Path

    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment

    from memory_writing_agent import *  # noqa: F403
    {checks}

    event_log_dir = Path(tempfile.mkdtemp(dir=".")) / "event_log"

    inputs = [{{"id": 7, "review": f"input-{{i}}"}} for i in range(3)]

    config = Configuration()
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(1)

    agents_env = AgentsExecutionEnvironment.get_execution_environment(env=env)
    agents_env.get_config().set_str("baseLogDir", str(event_log_dir))
    agents_env.get_config().set(AgentExecutionOptions.AGENT_RUN_BEGIN_EVENT, True)
    agents_env.get_config().set_str("event-log.level", "VERBOSE")

    input_datastream = env.from_collection(inputs)
    output_datastream = (
        agents_env.from_datastream(
            input=input_datastream, key_selector=lambda value: str(value["id"])
        )
        .apply(MemoryWritingAgent())
        .to_datastream()
    )
    print("OUT", json.dumps(list(output_datastream.execute_and_collect())))
    check(event_log_dir, inputs)
"""


@pytest.mark.flink
@pytest.mark.timeout(600)
def test_memory_event_logging_program_on_a_minicluster(tmp_path):
    main = textwrap.dedent(JOB).format(checks=textwrap.dedent(CHECKS))
    proc = run(tmp_path, main, timeout=540)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    lines = proc.stdout.splitlines()
    assert any(line.startswith("CHECKED ") for line in lines)
    [out] = [line for line in lines if line.startswith("OUT ")]
    assert sorted(o["processed"] for o in json.loads(out[4:])) == [
        "input-0",
        "input-1",
        "input-2",
    ]
