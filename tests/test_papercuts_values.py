"""A chat model setup's misspelt or wrong argument values are refused at plan build.

``budget=dict(max_token=10)`` (for ``max_tokens``) used to pass the plan and fail every
record with pydantic's long error; the YAML loader caught it at load. Now the plan names
the resource, the field and the name it likely meant.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from flink_agents_py.api import (
    Agent,
    Budget,
    ChatModelSetup,
    InputEvent,
    PlanError,
    ResourceDescriptor,
    ResourceType,
    action,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.plan import AgentPlan

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(120)


class Quiet(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: Any) -> None:
        del event, ctx


def _problems(conn: dict[str, Any], **setup: Any) -> list[str]:
    agent = Quiet()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(ScriptedChatModel, **conn))
    agent.add_resource("review", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn", **setup))
    with pytest.raises(PlanError) as info:
        AgentPlan.from_agent(agent)
    return info.value.problems


def test_a_misspelt_budget_key_names_the_resource_the_field_and_the_right_name():
    (problem,) = _problems({}, budget=dict(max_token=10))
    assert problem == ("chat_model resource 'review': budget.max_token: Extra inputs are not "
                       "permitted; did you mean 'max_tokens'?")


def test_a_connections_flow_control_key_and_a_setups_values_are_checked():
    problems = _problems({"flow_control": {"request_per_minute": 3}},
                         budget=Budget(max_tokens=5), fallbacks="other", max_tool_rounds="x")
    assert ("chat_model_connection resource 'conn': flow_control.request_per_minute: Extra "
            "inputs are not permitted; did you mean 'requests_per_minute'?") in problems
    assert "chat_model resource 'review': fallbacks: Input should be a valid list (got " \
           "'other')" in problems
    assert any(p.startswith("chat_model resource 'review': max_tool_rounds: Input should be "
                            "a valid integer") for p in problems)
    assert len(problems) == 3, problems  # no fallback named 'o', 't', 'h'... from the string


def test_a_budget_value_out_of_range_is_refused_with_the_value():
    (problem,) = _problems({}, budget={"max_tokens": 10, "window_s": -1})
    assert problem == ("chat_model resource 'review': budget.window_s: Input should be "
                       "greater than 0 (got -1)")


def test_valid_values_pass():
    agent = Quiet()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        ScriptedChatModel, flow_control={"requests_per_minute": 60}))
    agent.add_resource("review", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", budget={"max_tokens": 10, "window_s": 60}))
    assert "review" in AgentPlan.from_agent(agent).resources[ResourceType.CHAT_MODEL]


SCRIPT = '''
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent, OutputEvent,
                                 PlanError, ResourceDescriptor, ResourceType, action)
from flink_agents_py.integrations.chat_models import ScriptedChatModel


class Reviewer(Agent):
    @action(InputEvent)
    @staticmethod
    async def review(event, ctx):
        reply = await ctx.chat("review", [ChatMessage(content=event.input["text"])])
        ctx.send_event(OutputEvent(output=reply.message.content))


agent = Reviewer()
agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                   ResourceDescriptor(ScriptedChatModel, default_reply="fine"))
agent.add_resource("review", ResourceType.CHAT_MODEL, ResourceDescriptor(
    ChatModelSetup, connection="conn", budget=dict(max_token=10)))
try:
    result = (AgentsExecutionEnvironment.local()
              .from_list([{"key": k, "text": "hi"} for k in "abc"]).apply(agent).run())
    print("RAN", len(result.errors), "errors")
except PlanError as e:
    print("ERROR", " ".join(str(e).split()))
'''


def test_a_users_script_with_a_misspelt_budget_key_stops_before_any_record(tmp_path: Path):
    (tmp_path / "main.py").write_text(textwrap.dedent(SCRIPT))
    proc = subprocess.run([str(PYTHON), "main.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=100, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.strip()
    assert out.startswith("ERROR"), out
    assert "chat_model resource 'review': budget.max_token:" in out
    assert "did you mean 'max_tokens'?" in out


def test_yaml_names_the_right_budget_key_too(tmp_path: Path):
    from flink_agents_py.yaml import YamlError, load_agent

    (tmp_path / "agents.yaml").write_text(textwrap.dedent('''
        agents:
          - name: mine
            actions:
              - {name: start, function: "tests.test_papercuts_values:Quiet.on_input",
                 on: [InputEvent]}
            chat_model_connections:
              - {name: conn, clazz: flink_agents_py.integrations.chat_models.ScriptedChatModel}
            chat_model_setups:
              - {name: review, connection: conn, budget: {max_token: 10}}
        '''))
    with pytest.raises(YamlError) as info:
        load_agent(str(tmp_path / "agents.yaml"))
    assert "budget.max_token: Extra inputs are not permitted; did you mean 'max_tokens'?" \
        in str(info.value)
