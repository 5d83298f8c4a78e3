"""Flink Agents' tool parameter injection e2e job on a MiniCluster: its agent (in
``test_compat_injected_args``), a file source keyed by a PyFlink ``KeySelector``, the value
from the environment's configuration, a file sink; run from a directory outside the
repository."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest
from test_compat_injected_args import AGENT, PYTHON, ROOT

pytestmark = [pytest.mark.flink, pytest.mark.timeout(300)]

JOB = """
    import sys
    from pathlib import Path
    from pyflink.common import Encoder, WatermarkStrategy
    from pyflink.common.typeinfo import Types
    from pyflink.datastream import KeySelector, RuntimeExecutionMode, StreamExecutionEnvironment
    from pyflink.datastream.connectors.file_system import (
        FileSource, StreamFormat, StreamingFileSink)
    from flink_agents_py.compat import AgentsExecutionEnvironment
    from injection_agent import ToolParameterInjectionAgent


    class OrderKeySelector(KeySelector):
        def get_key(self, value: str) -> str:
            return value


    here = Path(sys.argv[1])
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    env.set_parallelism(1)
    input_datastream = env.from_source(
        source=FileSource.for_record_stream_format(
            StreamFormat.text_line_format(), f"file:///{here}/input").build(),
        watermark_strategy=WatermarkStrategy.no_watermarks(),
        source_name="tool_parameter_injection_source").map(lambda x: str(x))
    agents_env = AgentsExecutionEnvironment.get_execution_environment(env=env)
    agents_env.get_config().set_str("tenant_id", "tenant-python")
    output_datastream = (agents_env.from_datastream(input_datastream,
                                                    key_selector=OrderKeySelector())
                         .apply(ToolParameterInjectionAgent()).to_datastream())
    output_datastream.map(lambda x: str(x), Types.STRING()).add_sink(
        StreamingFileSink.for_row_format(base_path=str(here / "results"),
                                         encoder=Encoder.simple_string_encoder()).build())
    agents_env.execute()
"""


def test_the_tool_parameter_injection_job_on_a_minicluster(tmp_path: Path) -> None:
    (tmp_path / "injection_agent.py").write_text(textwrap.dedent(AGENT))
    (tmp_path / "job.py").write_text(textwrap.dedent(JOB))
    (tmp_path / "input").mkdir()
    (tmp_path / "input" / "orders.txt").write_text("order-1\norder-2\n")
    (tmp_path / "results").mkdir()
    proc = subprocess.run([str(PYTHON), "job.py", str(tmp_path)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=280,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = sorted(line.strip() for f in (tmp_path / "results").rglob("*") if f.is_file()
                   for line in f.read_text().splitlines() if line.strip())
    assert lines == ["checked:tenant-python:order-1 | hi ann-order-1 (calm)",
                     "checked:tenant-python:order-2 | hi ann-order-2 (calm)"]
