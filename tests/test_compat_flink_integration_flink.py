"""Apache Flink Agents' Flink integration e2e program (``e2e_tests_integration/
flink_integration_agent.py`` and ``flink_intergration_test.py``'s
``test_from_datastream_to_table``), ported with its imports changed only and run on a local
MiniCluster from a directory outside the repository, as a user's own modules.

One job serves every assertion: a stream of pydantic records keyed by a PyFlink
``KeySelector``, an event class of the program's own with its own ``__init__`` and
``from_event`` carrying a pydantic model between two actions, and a PyFlink ``Row`` output
filling a table (``to_table`` with an ``ExternalTypeInfo`` of a ``RowTypeInfo``) written by
the filesystem connector as JSON lines, which the test compares with the rows Flink Agents'
ground truth gives for such input (its reviews, each with `` first action second action``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

# Adapted from apache/flink-agents python/flink_agents/e2e_tests/e2e_tests_integration/
# flink_integration_agent.py (Apache-2.0): the imports changed, docstrings left out.
AGENT = """
    import copy
    from typing import Any, ClassVar

    from pydantic import BaseModel
    from pyflink.common import Row
    from pyflink.datastream import KeySelector

    from flink_agents_py.compat import (
        Agent, Event, EventType, InputEvent, OutputEvent, RunnerContext, action)


    class ItemData(BaseModel):
        id: int
        review: str
        review_score: float
        memory_info: dict | None = None


    class MyEvent(Event):
        EVENT_TYPE: ClassVar[str] = "_my_event"

        def __init__(self, value: Any) -> None:
            super().__init__(type=MyEvent.EVENT_TYPE, attributes={"value": value})

        @classmethod
        def from_event(cls, event: "Event") -> "MyEvent":
            assert "value" in event.attributes, "Missing 'value' in event attributes"
            return cls(value=event.attributes["value"])

        @property
        def value(self) -> Any:
            return self.attributes["value"]


    class MyKeySelector(KeySelector):
        def get_key(self, value: ItemData) -> int:
            return value.id


    class DataStreamToTableAgent(Agent):
        @action(EventType.InputEvent)
        @staticmethod
        def first_action(event: Event, ctx: RunnerContext) -> None:
            content = ItemData.model_validate(InputEvent.from_event(event).input)
            content.review += " first action"
            ctx.send_event(MyEvent(value=content))

        @action(MyEvent.EVENT_TYPE)
        @staticmethod
        def second_action(event: Event, ctx: RunnerContext) -> None:
            content = ItemData.model_validate(MyEvent.from_event(event).value)
            content.review += " second action"
            ctx.send_event(
                OutputEvent(output=Row(**content.model_dump(exclude="memory_info")))
            )
"""

# flink_intergration_test.py's test_from_datastream_to_table, its imports changed; the
# input directory is this program's own (Flink Agents' input files are not stored).
PROGRAM = """
    from pathlib import Path

    from pyflink.common import WatermarkStrategy
    from pyflink.common.typeinfo import BasicTypeInfo, ExternalTypeInfo, RowTypeInfo
    from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
    from pyflink.datastream.connectors.file_system import FileSource, StreamFormat
    from pyflink.table import DataTypes, Schema, StreamTableEnvironment, TableDescriptor

    from flink_agents_py.compat import AgentsExecutionEnvironment
    from flink_integration_agent import DataStreamToTableAgent, ItemData, MyKeySelector

    current_dir = Path(__file__).parent
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    env.set_parallelism(1)
    t_env = StreamTableEnvironment.create(stream_execution_environment=env)

    input_datastream = env.from_source(
        source=FileSource.for_record_stream_format(
            StreamFormat.text_line_format(), f"file:///{current_dir}/resources/input"
        ).build(),
        watermark_strategy=WatermarkStrategy.no_watermarks(),
        source_name="streaming_agent_example",
    )
    deserialize_datastream = input_datastream.map(lambda x: ItemData.model_validate_json(x))

    agents_env = AgentsExecutionEnvironment.get_execution_environment(env=env, t_env=t_env)
    output_type = ExternalTypeInfo(
        RowTypeInfo(
            [BasicTypeInfo.LONG_TYPE_INFO(), BasicTypeInfo.STRING_TYPE_INFO(),
             BasicTypeInfo.FLOAT_TYPE_INFO()],
            ["id", "review", "review_score"],
        )
    )
    schema = (
        Schema.new_builder()
        .column("id", DataTypes.BIGINT())
        .column("review", DataTypes.STRING())
        .column("review_score", DataTypes.FLOAT())
    ).build()
    output_table = (
        agents_env.from_datastream(input=deserialize_datastream, key_selector=MyKeySelector())
        .apply(DataStreamToTableAgent())
        .to_table(schema=schema, output_type=output_type)
    )
    result_dir = current_dir / "results"
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
"""

REVIEWS = [
    (1, "Great product! Works perfectly and lasts a long time.", 3.0),
    (2, "The item arrived damaged, and the packaging was poor.", 5.0),
    (3, "Highly satisfied with the performance and value for money.", 7.0),
    (1, "Fast shipping and excellent customer service. Would buy again!", 8.0),
]


@pytest.mark.flink
@pytest.mark.timeout(600)
def test_flink_agents_datastream_to_table_program(tmp_path: Path) -> None:
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "flink_integration_agent.py").write_text(textwrap.dedent(AGENT))
    (tmp_path / "prog.py").write_text(textwrap.dedent(PROGRAM))
    inputs = tmp_path / "resources" / "input"
    inputs.mkdir(parents=True)
    (inputs / "reviews.txt").write_text(
        "".join(json.dumps({"id": i, "review": r, "review_score": s}) + "\n" for i, r, s in REVIEWS)
    )
    env = {
        **{k: v for k, v in os.environ.items() if k != "FLINK_CONF_DIR"},
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        [str(PYTHON), "prog.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=540
    )
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    rows = [
        json.loads(line)
        for part in (tmp_path / "results").rglob("*")
        if part.is_file()
        for line in part.read_text().splitlines()
        if line.strip()
    ]
    assert sorted(rows, key=lambda r: (r["id"], r["review"])) == sorted(
        (
            {"id": i, "review": f"{r} first action second action", "review_score": s}
            for i, r, s in REVIEWS
        ),
        key=lambda r: (r["id"], r["review"]),
    )
