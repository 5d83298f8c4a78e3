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


ROLE_AGENT = '''
    from typing import TypedDict

    from flink_agents_py.compat import (
        Agent, ChatMessage, ChatRequestEvent, ChatResponseEvent, Event, InputEvent,
        MessageRole, OutputEvent, ResourceDescriptor, ResourceName, RunnerContext, action,
        chat_model_setup, tool)
    from flink_agents_py.testing import tool_call


    class Shelf(TypedDict):
        name: str


    def answer(request):
        roles = ",".join(m.role.value for m in request.messages)
        if request.tool_results:
            return ChatMessage(role=MessageRole("assistant"), content=roles)
        return tool_call("count", shelf={"name": request.last_user_text})


    class Noted(Event):
        message: ChatMessage


    class RoleAgent(Agent):
        @chat_model_setup
        @staticmethod
        def model() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=ResourceName.ChatModel.OLLAMA_SETUP,
                                      connection="scripted", model="m", tools=["count"])

        @tool
        @staticmethod
        def count(shelf: Shelf) -> int:
            """Count a shelf.

            Args:
                shelf: the shelf.
            """
            return len(shelf["name"])

        @action(InputEvent)
        @staticmethod
        def ask(event: InputEvent, ctx: RunnerContext) -> None:
            note = ChatMessage(role=MessageRole.SYSTEM, content="kept")
            ctx.short_term_memory.set("note", note)
            ctx.send_event(Noted(message=note, source=event.input))

        @action(Noted)
        @staticmethod
        def chat(event: Noted, ctx: RunnerContext) -> None:
            assert event.message.role is MessageRole.SYSTEM, event.message.role
            ctx.send_event(ChatRequestEvent(model="model", messages=[
                event.message, ChatMessage(role=MessageRole.USER, content=event.source)]))

        @action(ChatResponseEvent)
        @staticmethod
        def done(event: ChatResponseEvent, ctx: RunnerContext) -> None:
            kept = ctx.short_term_memory.get("note")
            ctx.send_event(OutputEvent(output={
                "roles": event.response.content, "role": event.response.role.value,
                "kept": [kept.role.value, kept.role is MessageRole.SYSTEM]}))
'''

ROLE_PROGRAM = '''
    import json

    from pyflink.common.typeinfo import Types
    from pyflink.datastream import StreamExecutionEnvironment

    from role_agent import RoleAgent, answer
    from flink_agents_py.compat import AgentsExecutionEnvironment, ResourceType
    from flink_agents_py.testing import model_from_function

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    data = env.from_collection(["abc", "hello"])
    agents_env = AgentsExecutionEnvironment.get_execution_environment(env=env)
    agents_env.add_resource("scripted", ResourceType.CHAT_MODEL_CONNECTION,
                            model_from_function(answer))
    outputs = (agents_env.from_datastream(input=data, key_selector=lambda x: x)
               .apply(RoleAgent()).to_datastream())
    outputs.map(lambda x: "OUT " + json.dumps(x), Types.STRING()).print()
    agents_env.execute()
'''


@pytest.mark.flink
@pytest.mark.timeout(600)
def test_message_roles_typed_dict_tools_and_undeclared_event_fields_on_flink(tmp_path):
    # ChatMessage.role as the MessageRole member through Flink's keyed state (an event
    # field, short-term memory, the chat's tool round), a typing.TypedDict tool parameter on
    # Python 3.11 and an event class given a field it does not declare: each failed before
    (tmp_path / "role_agent.py").write_text(textwrap.dedent(ROLE_AGENT))
    (tmp_path / "prog.py").write_text(textwrap.dedent(ROLE_PROGRAM))
    env = {**{k: v for k, v in os.environ.items() if k != "FLINK_CONF_DIR"},
           "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([str(PYTHON), "prog.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=540)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    lines = [line.split("> ", 1)[-1] for line in proc.stdout.splitlines()]
    got = [json.loads(x[4:]) for x in lines if x.startswith("OUT ")]
    assert got == [{"roles": "system,user,assistant,tool", "role": "assistant",
                    "kept": ["system", True]}] * 2
