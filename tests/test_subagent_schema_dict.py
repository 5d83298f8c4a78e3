"""A sub-agent's ``input_schema`` given as a dict (a JSON Schema object) is taken.

Only its JSON text was: a dict, what a user writes first, failed the plan with two problems,
one saying "must be non-blank JSON Schema text" (it was not blank) and one a raw pydantic
``string_type`` error. A dict is kept as its JSON text now; any other non-text value is a
plan problem naming the sub-agent and the type it got.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flink_agents_py.api import InternalSubagent, PlanError

ROOT = Path(__file__).resolve().parents[1]

USER_MODULE = """
import json
import sys

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent,
                                 InternalSubagent, OutputEvent, ResourceDescriptor,
                                 ResourceType, RunnerContext, action)
from flink_agents_py.testing import model_from_turns, tool_call

SCHEMA = {"type": "object", "properties": {"review": {"type": "string"}},
          "required": ["review"]}


class Scorer(Agent):
    @action(InputEvent)
    @staticmethod
    def score(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"score": len(event.input["review"]) // 5}))


class Triage(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        direct = await (await ctx.submit_subagent("scorer", {"review": event.input["review"]}))
        reply = await ctx.chat("triager", [ChatMessage(content=event.input["review"])])
        ctx.send_event(OutputEvent(output={"direct": direct.result, "model": reply.content}))


model = model_from_turns([
    tool_call("_subagent_scorer", "c1", review=5),  # wrong: the schema says a string
    tool_call("_subagent_scorer", "c2", review="good value"),
    lambda req: " | ".join(m.content for m in req.messages if m.role == "tool"),
])
agent = Triage()
agent.add_resource("scorer", ResourceType.AGENT, ResourceDescriptor(
    InternalSubagent, agent=Scorer, description="Scores one review.", input_schema=SCHEMA))
agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model)
agent.add_resource("triager", ResourceType.CHAT_MODEL, ResourceDescriptor(
    ChatModelSetup, connection="conn", subagents=["scorer"]))
res = (AgentsExecutionEnvironment.local()
       .from_list([{"key": "k", "review": "good value"}]).apply(agent).run())
offered = [t.parameters for t in model.requests[0].tools]
print(json.dumps({"outputs": res.outputs, "errors": [str(e) for e in res.errors],
                  "offered": offered}))
"""


def test_a_users_dict_input_schema_is_offered_and_enforced(tmp_path):
    (tmp_path / "triage.py").write_text(textwrap.dedent(USER_MODULE))
    out = subprocess.run(
        [sys.executable, "triage.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    import json

    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["errors"] == []
    assert got["offered"][0]["properties"] == {"review": {"type": "string"}}
    [output] = got["outputs"]
    assert output["direct"] == [{"score": 2}]
    first, second = output["model"].split(" | ")
    assert "does not follow its input schema" in first and "$.review" in first, first
    assert second == '[{"score":2}]'


def test_a_dict_is_kept_as_its_json_text():
    setup = InternalSubagent(agent="x:Y", input_schema={"type": "object"})
    assert setup.input_schema == '{"type": "object"}'


@pytest.mark.parametrize(
    ("schema", "said"), [([{"type": "object"}], "got list"), ("  ", "got blank text")]
)
def test_an_input_schema_neither_dict_nor_text_is_a_plan_problem_naming_it(schema, said):
    from flink_agents_py.api import Agent, ResourceDescriptor, ResourceType
    from flink_agents_py.plan import AgentPlan

    class Child(Agent):
        pass

    parent = Agent()
    parent.add_resource(
        "scorer",
        ResourceType.AGENT,
        ResourceDescriptor(InternalSubagent, agent=Child, input_schema=schema),
    )
    with pytest.raises(PlanError) as e:
        AgentPlan.from_agent(parent)
    assert (
        f"agent resource 'scorer': input_schema must be a JSON Schema, a dict or its JSON "
        f"text, {said}" in str(e.value)
    ), str(e.value)


def test_a_bad_input_schema_of_an_offered_subagent_is_reported_once_without_pydantic_text():
    """A chat model offering the sub-agent reported it again, as pydantic's raw error (or,
    once the sub-agent was refused, as "not declared as an agent resource")."""
    from flink_agents_py.api import Agent, ChatModelSetup, ResourceDescriptor, ResourceType
    from flink_agents_py.plan import AgentPlan
    from flink_agents_py.testing import model_from_turns

    class Child(Agent):
        pass

    parent = Agent()
    parent.add_resource(
        "scorer",
        ResourceType.AGENT,
        ResourceDescriptor(InternalSubagent, agent=Child, input_schema=[{"type": "object"}]),
    )
    parent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_turns(["x"]))
    parent.add_resource(
        "triager",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor(ChatModelSetup, connection="conn", subagents=["scorer"]),
    )
    with pytest.raises(PlanError) as e:
        AgentPlan.from_agent(parent)
    text = str(e.value)
    assert text.count("'scorer'") == 2, text  # its problem, and its child's lack of actions
    assert "input_schema must be a JSON Schema, a dict or its JSON text, got list" in text
    assert "validation error" not in text and "pydantic" not in text, text
    assert "not declared" not in text, text  # it is declared, and refused


def test_a_react_agents_subagent_input_schema_may_be_a_dict():
    from flink_agents_py.agents import ReActAgent
    from flink_agents_py.api import ChatModelSetup, ResourceDescriptor

    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    agent = ReActAgent(
        chat_model=ResourceDescriptor(ChatModelSetup, connection="c"), subagent_input_schema=schema
    )
    assert (
        agent.get_subagent_input_schema() == '{"type": "object", "properties": {"q": '
        '{"type": "string"}}}'
    )
    other = agent.as_subagent(input_schema={"type": "object"})
    assert (
        InternalSubagent(**{**other.arguments, "agent": "x:Y"}).input_schema == '{"type": "object"}'
    )
