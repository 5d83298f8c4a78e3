"""Flink Agents' programs on Flink: what their jobs do that failed here before.

A pydantic model output on Flink reads as Flink Agents gives it: its JSON form, and the model.

Flink Agents' e2e tests (``execute_test.py``, ``flink_intergration_test.py``) write each
``to_datastream()`` output with ``json.dumps(x)``: Flink Agents sends an ``OutputEvent`` to
its Java operator as JSON, so a model output comes back as a dict of its fields. Here the
model itself came out, and every such job failed (``Object of type ExecuteTestOutput is not
JSON serializable``). Its older quickstarts read the same outputs as the model
(``key_by(lambda x: x.id)``, ``print()``): both keep working.

Its first quickstarts (``product_review_analysis.py``) add its own jars from its build tree
(``env.add_jars(".../flink-agents-runtime-0.1-SNAPSHOT.jar")``): missing, they failed the
job's submission; they are left out (nothing here needs them).
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
from pydantic import BaseModel

from flink_agents_py.compat._outputs import ModelOutput, json_form_outputs

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)


class Inner(BaseModel):
    name: str


class Result(BaseModel):
    id: int
    result: int
    inner: Inner | None = None


def test_a_model_output_is_its_json_form_and_reads_as_the_model():
    model = Result(id=1, result=25, inner=Inner(name="x"))
    out = json_form_outputs(model)
    assert isinstance(out, dict) and isinstance(out, ModelOutput)
    assert json.loads(json.dumps(out)) == {"id": 1, "result": 25, "inner": {"name": "x"}}
    assert out["id"] == 1 and out.id == 1 and out.inner == Inner(name="x")
    assert out.model is model and out.model_dump() == model.model_dump()
    assert str(out) == str(model) and repr(out) == repr(model)
    assert out == model and out == {"id": 1, "result": 25, "inner": {"name": "x"}}
    back = pickle.loads(pickle.dumps(out))
    assert type(back) is ModelOutput and back.model == model and back == out
    with pytest.raises(AttributeError):
        _ = out.missing


def test_models_inside_dicts_and_lists_are_converted_and_other_values_kept():
    assert json.dumps(json_form_outputs({"r": [Result(id=2, result=3)]})) == \
        '{"r": [{"id": 2, "result": 3, "inner": null}]}'
    plain = {"a": [1, 2]}
    assert json_form_outputs(plain) is plain
    assert json_form_outputs("text") == "text"


AGENT = '''
    # Adapted from apache/flink-agents python/flink_agents/e2e_tests/e2e_tests_integration/
    # execute_test_agent.py (Apache-2.0): only the imports changed.
    from pydantic import BaseModel
    from pyflink.datastream import KeySelector

    from flink_agents_py.compat import (
        Agent, Event, EventType, InputEvent, OutputEvent, RunnerContext, action)


    class ExecuteTestData(BaseModel):
        id: int
        value: int


    class ExecuteTestOutput(BaseModel):
        id: int
        result: int


    class ExecuteTestKeySelector(KeySelector):
        def get_key(self, value: ExecuteTestData) -> int:
            return value.id


    def compute_value(x: int, y: int) -> int:
        return x + y


    class ExecuteWithKwargsTestAgent(Agent):
        @action(EventType.InputEvent)
        @staticmethod
        def process(event: Event, ctx: RunnerContext) -> None:
            input_data = ExecuteTestData.model_validate(InputEvent.from_event(event).input)
            result = ctx.durable_execute(compute_value, x=input_data.value, y=20)
            ctx.send_event(
                OutputEvent(output=ExecuteTestOutput(id=input_data.id, result=result))
            )
'''

PROGRAM = '''
    import json
    from pathlib import Path

    from pyflink.common.typeinfo import Types
    from pyflink.datastream import StreamExecutionEnvironment

    from execute_test_agent import (
        ExecuteTestData, ExecuteTestKeySelector, ExecuteWithKwargsTestAgent)
    from flink_agents_py.compat import AgentsExecutionEnvironment

    current_dir = Path(__file__).parent
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    # product_review_analysis.py's: Flink Agents' own jars, not built here
    env.add_jars(
        f"file:///{current_dir}/../../../../runtime/target/flink-agents-runtime-0.1-SNAPSHOT.jar"
    )
    lines = ['{"id": 1, "value": 5}', '{"id": 2, "value": 15}', '{"id": 3, "value": 10}']
    data = env.from_collection(lines).map(lambda x: ExecuteTestData.model_validate_json(x))

    agents_env = AgentsExecutionEnvironment.get_execution_environment(env=env)
    outputs = (
        agents_env.from_datastream(input=data, key_selector=ExecuteTestKeySelector())
        .apply(ExecuteWithKwargsTestAgent())
        .to_datastream()
    )
    # Flink Agents' e2e tests: the JSON form
    outputs.map(lambda x: "JSON " + json.dumps(x), Types.STRING()).print()
    # its quickstarts: the model's attributes, and the model printed
    outputs.key_by(lambda x: x.id).map(lambda x: f"KEYED {x.id} {x.result}",
                                       Types.STRING()).print()
    outputs.map(lambda x: f"PRINTED {x}", Types.STRING()).print()
    agents_env.execute()
'''


@pytest.mark.flink
@pytest.mark.timeout(600)
def test_model_outputs_reach_json_dumps_and_attribute_readers_missing_jars_left_out(
        tmp_path):
    assert ROOT not in tmp_path.resolve().parents
    (tmp_path / "execute_test_agent.py").write_text(textwrap.dedent(AGENT))
    (tmp_path / "prog.py").write_text(textwrap.dedent(PROGRAM))
    env = {**{k: v for k, v in os.environ.items() if k != "FLINK_CONF_DIR"},
           "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([str(PYTHON), "prog.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=540)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    lines = [line.split("> ", 1)[-1] for line in proc.stdout.splitlines()]
    got = sorted((json.loads(x[5:]) for x in lines if x.startswith("JSON ")),
                 key=lambda d: d["id"])
    assert got == [{"id": 1, "result": 25}, {"id": 2, "result": 35}, {"id": 3, "result": 30}]
    assert sorted(x for x in lines if x.startswith("KEYED ")) == [
        "KEYED 1 25", "KEYED 2 35", "KEYED 3 30"]
    assert sorted(x for x in lines if x.startswith("PRINTED ")) == [
        "PRINTED id=1 result=25", "PRINTED id=2 result=35", "PRINTED id=3 result=30"]
