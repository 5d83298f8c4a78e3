"""A ReAct agent declared in YAML (``react:``): run directly, as a sub-agent, and rejected."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import react_agents as ra

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.yaml import YamlError, load_agent

CALC = """\
agents:
  - name: calc
    chat_model_connections:
      - name: conn
        clazz: flink_agents_py.integrations.chat_models.ScriptedChatModel
        function: support.react_agents:calc_script
    chat_model_setups:
      - {name: model, connection: conn, tools: [add]}
    tools:
      - {name: add, function: "support.react_agents:add"}
    prompts:
      - name: ask
        messages:
          - {role: system, content: You add numbers with tools.}
          - {role: user, content: "What is {a} + {b}?{mode}"}
    react:
      chat_model: model
      prompt: ask
      output_schema: support.react_agents.Total
      max_iterations: 2
"""


def test_a_yaml_react_agent_loops_through_its_tool_and_is_bounded():
    agent = load_agent(CALC)
    job = AgentsExecutionEnvironment.local().from_list([
        {"key": "a", "a": 2, "b": 3, "mode": ""}, {"key": "b", "a": 1, "b": 1, "mode": " forever"},
        {"key": "c", "a": 40, "b": 2, "mode": ""}]).apply(agent)
    assert job.collect() == [ra.Total(total=5), ra.Total(total=42)]
    errors = job.result.errors
    assert [(e.key, e.error_type) for e in errors] == [("b", "ReActAgentError")]
    assert "max_iterations=2" in errors[0].message


@pytest.mark.parametrize(("edit", "needle", "message"), [
    (("      max_iterations: 2\n", "      max_iterations: 2\n      temperature: 0\n"),
     "temperature: 0", "temperature"),
    (("      chat_model: model\n", ""), "      prompt: ask", "needs 'chat_model'"),
    (("      chat_model: model\n", "      chat_model: nope\n"), "chat_model: nope", "'nope'"),
    (("      output_schema: support.react_agents.Total\n",
      "      output_schema: support.react_agents.add\n"),
     "output_schema: support.react_agents.add", "not a pydantic model class"),
])
def test_a_bad_react_entry_is_named_with_its_line(tmp_path, edit, needle, message):
    path = tmp_path / "agents.yaml"
    path.write_text(CALC.replace(*edit))
    with pytest.raises(YamlError) as info:
        load_agent(path)
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if needle in t)
    text = str(info.value)
    assert f"{path}:{line}" in text and message in text, text


APP = '''
from flink_agents_py.api import MessageRole
from flink_agents_py.testing import tool_call, tool_calls


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def inner(request):
    question = next(m.content for m in request.messages if m.role == MessageRole.USER)
    if not request.tool_results:
        a, b = (int(x) for x in question.split("+"))
        return tool_calls(tool_call("add", "c1", a=a, b=b))
    return "sum " + request.tool_results[-1].content


def outer(request):
    question = next(m.content for m in request.messages if m.role == MessageRole.USER)
    if not request.tool_results:
        return tool_calls(tool_call("_subagent_calc", "s1", input=question))
    return "calc says: " + request.tool_results[-1].content
'''

DOC = """\
agents:
  - name: boss
    chat_model_connections:
      - {name: conn, clazz: flink_agents_py.integrations.chat_models.ScriptedChatModel,
         function: "my_app:outer"}
    chat_model_setups:
      - {name: model, connection: conn, subagents: [calc]}
    subagents:
      - {name: calc, agent: calc, description: Adds two numbers.}
    react: {chat_model: model}
  - name: calc
    chat_model_connections:
      - {name: conn, clazz: flink_agents_py.integrations.chat_models.ScriptedChatModel,
         function: "my_app:inner"}
    chat_model_setups:
      - {name: model, connection: conn, tools: [add]}
    tools:
      - {name: add, function: "my_app:add"}
    react: {chat_model: model, max_iterations: 3}
"""

RUN = '''
import json
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.yaml import load_agent

agent = load_agent("agents.yaml")
job = AgentsExecutionEnvironment.local().from_list(
    [{"key": "a", "input": "2+3"}, {"key": "b", "input": "40+2"}]).apply(agent)
print(json.dumps({"out": job.collect(), "errors": len(job.result.errors)}))
'''


def test_a_yaml_react_agent_delegates_to_a_yaml_react_sub_agent_from_a_user_directory(
        tmp_path: Path):
    (tmp_path / "my_app.py").write_text(APP)
    (tmp_path / "agents.yaml").write_text(DOC)
    (tmp_path / "run.py").write_text(textwrap.dedent(RUN))
    done = subprocess.run([sys.executable, "run.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["errors"] == 0
    # a sub-agent's result is the JSON list of its run's outputs
    assert sorted(result["out"]) == ['calc says: ["sum 42"]', 'calc says: ["sum 5"]']
