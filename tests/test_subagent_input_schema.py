"""A sub-agent's declared input schema is checked before any call starts.

Before, ``input_schema`` (or the schema derived from ``input_type``) only told a chat model
what to send: an action's ``submit_subagent(name, input)`` and a model's ``_subagent_<name>``
call with arguments breaking it started a child run with that input anyway, which failed
deep inside the child (or worse, did not). Now such an input is refused at submit: the action
gets ``SubagentInputError`` naming the sub-agent, the field and what is wrong with it; the
model gets the same reason as the tool call's error, so it can correct the call. Valid input
still reaches the sub-agent unchanged (contract 7), and a sub-agent that declares no input
takes any.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import subagent_tool_agents as sa
from support.probes import current

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    AsyncSubagentSetup,
    InputEvent,
    OutputEvent,
    PlanError,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    RunStatus,
    SubagentInputError,
    SubagentResult,
    action,
)
from flink_agents_py.plan import AgentPlan

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]
DIFF_SCHEMA = (
    '{"type": "object", "properties": {"diff": {"type": "string"}, '
    '"lines": {"type": "integer", "minimum": 1}}, "required": ["diff"]}'
)


@pytest.fixture(autouse=True)
def _no_scripts():
    sa.reset()
    yield
    sa.reset()


class CountingRun(AsyncSubagentSetup):
    """An async remote that counts its submits and completes at once."""

    def call_submit_request(self, session_id: str, call_id: str, input: Any) -> None:
        sa.count("async:submit", input)

    def call_query_status(self, session_id: str, call_id: str) -> RunStatus:
        return RunStatus.completed()

    def call_fetch_result(self, session_id: str, call_id: str) -> SubagentResult:
        return SubagentResult.ok("done")


class Submitting(Agent):
    """Submits ``input["arg"]`` to sub-agent ``input["to"]``; outputs the result or the error."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        try:
            handle = await ctx.submit_subagent(event.input["to"], event.input["arg"])
        except SubagentInputError as e:
            ctx.send_event(OutputEvent(output={"refused": str(e)}))
            return
        result = await handle
        ctx.send_event(OutputEvent(output={"ok": result.success, "result": result.result}))


def submitting(**kw: Any) -> Agent:
    agent = Submitting()
    for name, (rtype, value) in {
        "internal": sa.internal(sa.Echo, input_schema=DIFF_SCHEMA),
        "deferred": sa.deferred(input_schema=DIFF_SCHEMA),
        "async": (
            ResourceType.AGENT,
            ResourceDescriptor(
                CountingRun, input_schema=DIFF_SCHEMA, status_poll_interval_millis=1
            ),
        ),
        "typed": sa.internal(sa.Echo, input_type="support.subagent_tool_agents:ReviewTask"),
        "free": sa.internal(sa.Echo),
        **kw,
    }.items():
        agent.add_resource(name, rtype, value)
    return agent


def run(agent: Agent, *records: dict[str, Any]):
    return AgentsExecutionEnvironment.local().from_list(list(records)).apply(agent).run()


CHILD_SAW = {"internal": "child:echo", "deferred": "deferred:deferred", "async": "async:submit"}


@pytest.mark.parametrize("kind", ["internal", "deferred", "async"])
@pytest.mark.parametrize(
    ("arg", "where", "why"),
    [
        ({"diff": 5}, "at $.diff", "5 is not of type 'string'"),
        ({"lines": 3}, "at $", "'diff' is a required property"),
        ({"diff": "d", "lines": 0}, "at $.lines", "0 is less than the minimum of 1"),
        ("review the diff", "at $", "'review the diff' is not of type 'object'"),
    ],
)
def test_an_action_submitting_input_that_breaks_the_schema_is_refused_at_submit(
    kind, arg, where, why, probes
):
    res = run(submitting(), {"key": "k", "to": kind, "arg": arg})
    assert res.errors == []
    [out] = res.outputs
    message = out["refused"]
    assert f"sub-agent {kind!r}" in message
    assert f"{where}: {why}" in message
    assert current()[CHILD_SAW[kind]] == 0  # no child run, no request, no remote run


@pytest.mark.parametrize("kind", ["internal", "deferred", "async"])
def test_input_that_follows_the_schema_reaches_the_sub_agent_unchanged(kind, probes):
    arg = {"diff": "+a", "lines": 2, "extra": [1, None]}
    res = run(submitting(), {"key": "k", "to": kind, "arg": arg})
    assert res.errors == []
    [out] = res.outputs
    assert out["ok"] is True
    assert current()[CHILD_SAW[kind]] == 1
    assert sa.inputs()[CHILD_SAW[kind]] == [arg]


def test_the_schema_derived_from_the_input_type_is_checked_too(probes):
    res = run(
        submitting(),
        {"key": "k", "to": "typed", "arg": {"review": "fine"}},
        {"key": "j", "to": "typed", "arg": {"review": "fine", "product": "p", "attachment": "x"}},
    )
    refused, ran = sorted(res.outputs, key=lambda o: "refused" not in o)
    assert "sub-agent 'typed'" in refused["refused"]
    assert "'product' is a required property" in refused["refused"]
    assert "'attachment' is a required property" in refused["refused"]
    assert ran["ok"] is True and current()["child:echo"] == 1


def test_a_react_agent_declaring_no_input_schema_takes_any_input_from_an_action():
    # its default schema only tells a model to send {"input": text}; a ported program
    # submits the text itself (before the check, and in Flink Agents)
    from flink_agents_py.agents import ReActAgent
    from flink_agents_py.api import ChatModelSetup, InternalSubagent
    from flink_agents_py.runtime._schemas import check_subagent_input

    react = ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="c"))
    setup = InternalSubagent(
        agent=react, input_schema=react.as_subagent().arguments["input_schema"]
    )
    for given in ("investigate", {"diff": "+x"}, {"input": "investigate"}):
        check_subagent_input("researcher", setup, given)  # refuses none
    declared = InternalSubagent(agent=react, input_schema=DIFF_SCHEMA)
    with pytest.raises(SubagentInputError, match="'researcher'"):
        check_subagent_input("researcher", declared, "investigate")


def test_a_sub_agent_that_declares_no_input_takes_any(probes):
    res = run(submitting(), {"key": "k", "to": "free", "arg": "just text"})
    assert res.outputs == [{"ok": True, "result": [{"got": "just text"}]}]


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        (
            '{"type": "object", "required": "diff"}',
            "is not a valid JSON Schema: 'diff' is not of type 'array'",
        ),
        ('{"type": "objekt"}', "is not a valid JSON Schema"),
        ("{'type': 'object'}", "is not JSON"),
    ],
)
def test_a_schema_that_is_no_json_schema_fails_the_plan_naming_the_sub_agent(schema, why):
    # every submit is checked by it: it fails when the plan is built, before any record
    bad = sa.internal(sa.Echo, input_schema=schema)
    with pytest.raises(PlanError) as err:
        AgentPlan.from_agent(submitting(broken=bad))
    assert f"agent resource 'broken': input_schema {why}" in str(err.value)


def test_an_offered_schema_that_is_no_json_schema_fails_the_plan_naming_the_setup():
    agent = sa.orchestrator(
        subagents=["r"],
        r=sa.internal(
            sa.Echo, input_schema='{"type": "object", "properties": {"diff": {"type": "strin"}}}'
        ),
    )
    with pytest.raises(PlanError) as err:
        AgentPlan.from_agent(agent)
    [problem] = err.value.problems
    assert problem.startswith(
        "chat_model resource 'om' offers sub-agent 'r': its input_schema is not a valid JSON Schema"
    ), problem


def test_a_model_breaking_the_schema_is_told_why_and_corrects_the_call(probes):
    def script(req):
        if not req.tool_results:
            return sa.calls(("1", "_subagent_r", {"diff": 7}))
        [msg] = req.tool_results
        if msg.content.startswith("Error:"):
            return sa.calls(("2", "_subagent_r", {"diff": "+x"}))
        return f"final: {msg.content}"

    sa.SCRIPTS["orch"] = script
    res = run(
        sa.orchestrator(subagents=["r"], r=sa.internal(sa.Echo, input_schema=DIFF_SCHEMA)),
        {"key": "k", "ask": "go"},
    )
    assert res.errors == []
    [out] = res.outputs
    assert out["answer"] == 'final: [{"got":{"diff":"+x"}}]'
    _, turn2, _ = sa.requests()["orch"]
    [failed] = turn2.tool_results
    assert failed.tool_call_id == "1" and failed.content.startswith("Error:")
    assert "sub-agent 'r'" in failed.content
    assert "at $.diff: 7 is not of type 'string'" in failed.content
    assert sa.inputs()["child:echo"] == [{"diff": "+x"}]  # the bad call never ran


USER_MODULE = """\
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, InputEvent, InternalSubagent, OutputEvent,
    ResourceDescriptor, ResourceType, SubagentInputError, action)

RAN = []


class Reviewer(Agent):
    @action(InputEvent)
    @staticmethod
    def review(event, ctx):
        RAN.append(event.input)
        ctx.send_event(OutputEvent(output="reviewed " + event.input["diff"]))


class Lead(Agent):
    @action(InputEvent)
    @staticmethod
    async def plan(event, ctx):
        try:
            handle = await ctx.submit_subagent("reviewer", event.input["task"])
        except SubagentInputError as e:
            ctx.send_event(OutputEvent(output="refused: " + str(e)))
            return
        ctx.send_event(OutputEvent(output=(await handle).result[0]))


lead = Lead()
lead.add_resource("reviewer", ResourceType.AGENT, ResourceDescriptor(
    InternalSubagent, agent=Reviewer,
    input_schema='{"type":"object","properties":{"diff":{"type":"string"}},"required":["diff"]}'))
result = AgentsExecutionEnvironment.local().from_list(
    [{"key": "a", "task": {"diff": "+x"}}, {"key": "b", "task": {"patch": "+x"}}]).apply(lead).run()
for out in sorted(result.outputs):
    print(out)
print(RAN, result.errors)
"""


def test_a_user_module_gets_the_refusal_at_submit(tmp_path):
    (tmp_path / "lead.py").write_text(USER_MODULE)
    proc = subprocess.run(
        [sys.executable, "lead.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=150,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "refused: the input of sub-agent 'reviewer' does not follow its input schema: at $: "
        "'diff' is a required property",
        "reviewed +x",
        "[{'diff': '+x'}] []",
    ]
