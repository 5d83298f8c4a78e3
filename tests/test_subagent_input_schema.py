"""A sub-agent's declared input schema is checked against a chat model's call, not an action's.

Before, ``input_schema`` (or the schema derived from ``input_type``) was never checked: a
model's ``_subagent_<name>`` call with arguments breaking it started a child run with that
input, which failed deep inside the child (or worse, did not). Now such a call is refused
before any child run, request or remote run starts, and the model gets the reason (sub-agent,
field, what is wrong) as the tool call's error, so it can correct the call. An action's own
submit is not checked, as in Flink Agents (whose sub-agent page submits the text "review the
diff" to a reviewer whose schema names a ``diff`` field): its input reaches the sub-agent
unchanged (contract 7), whatever the schema says.
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


BREAKING = [
    ({"diff": 5}, "at $.diff", "5 is not of type 'string'"),
    ({"lines": 3}, "at $", "'diff' is a required property"),
    ({"diff": "d", "lines": 0}, "at $.lines", "0 is less than the minimum of 1"),
    ("review the diff", "at $", "'review the diff' is not of type 'object'"),
]


@pytest.mark.parametrize("kind", ["internal", "deferred", "async"])
@pytest.mark.parametrize(("arg", "where", "why"), BREAKING)
def test_an_action_submitting_input_the_schema_does_not_describe_is_not_refused(
    kind, arg, where, why, probes
):
    # Flink Agents' own example submits a text to a sub-agent whose schema names fields
    res = run(submitting(), {"key": "k", "to": kind, "arg": arg})
    assert res.errors == []
    [out] = res.outputs
    assert out["ok"] is True, out
    assert sa.inputs()[CHILD_SAW[kind]] == [arg]  # unchanged, and run once


def async_remote() -> tuple[ResourceType, ResourceDescriptor]:
    return ResourceType.AGENT, ResourceDescriptor(
        CountingRun, input_schema=DIFF_SCHEMA, status_poll_interval_millis=1)


@pytest.mark.parametrize("kind", ["internal", "deferred", "async"])
@pytest.mark.parametrize(("arg", "where", "why"), BREAKING[:3])
def test_a_model_call_breaking_the_schema_is_refused_before_any_run(
    kind, arg, where, why, probes
):
    def script(req):
        if not req.tool_results:
            return sa.calls(("1", "_subagent_r", arg))
        return f"final: {req.tool_results[0].content}"

    sa.SCRIPTS["orch"] = script
    resource = {"internal": sa.internal(sa.Echo, input_schema=DIFF_SCHEMA),
                "deferred": sa.deferred(input_schema=DIFF_SCHEMA),
                "async": async_remote()}[kind]
    res = run(sa.orchestrator(subagents=["r"], r=resource), {"key": "k", "ask": "go"})
    assert res.errors == []
    [out] = res.outputs
    assert out["answer"].startswith("final: Error:"), out
    assert "sub-agent 'r'" in out["answer"]
    assert f"{where}: {why}" in out["answer"]
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
    def script(req):
        if not req.tool_results:
            return sa.calls(("1", "_subagent_typed", {"review": "fine"}))
        return f"final: {req.tool_results[0].content}"

    sa.SCRIPTS["orch"] = script
    typed = sa.internal(sa.Echo, input_type="support.subagent_tool_agents:ReviewTask")
    res = run(sa.orchestrator(subagents=["typed"], typed=typed), {"key": "k", "ask": "go"})
    [out] = res.outputs
    assert "sub-agent 'typed'" in out["answer"]
    assert "'product' is a required property" in out["answer"]
    assert "'attachment' is a required property" in out["answer"]
    assert current()["child:echo"] == 0


def test_a_react_agent_declaring_no_input_schema_takes_any_arguments():
    # its default schema only tells a model to send {"input": text}
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
    # a model's calls are checked by it: it fails when the plan is built, before any record
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
    ResourceDescriptor, ResourceType, action)

RAN = []


class Reviewer(Agent):
    @action(InputEvent)
    @staticmethod
    def review(event, ctx):
        RAN.append(event.input)
        ctx.send_event(OutputEvent(output=f"reviewed {event.input!r}"))


class Lead(Agent):
    @action(InputEvent)
    @staticmethod
    async def plan(event, ctx):
        reviewer = ctx.get_resource("reviewer", ResourceType.AGENT)
        future = await reviewer.submit(ctx, event.input["task"])
        result = await future
        ctx.send_event(OutputEvent(output=result.result[0] if result.success
                                   else "failed: " + result.error_message))


lead = Lead()
lead.add_resource("reviewer", ResourceType.AGENT, ResourceDescriptor(
    InternalSubagent, agent=Reviewer,
    input_schema='{"type":"object","properties":{"diff":{"type":"string"}},"required":["diff"]}'))
result = AgentsExecutionEnvironment.local().from_list(
    [{"key": "a", "task": {"diff": "+x"}}, {"key": "b", "task": "review the diff"}]
).apply(lead).run()
for out in sorted(result.outputs):
    print(out)
print(sorted(map(repr, RAN)), result.errors)
"""


def test_a_user_module_submits_as_flink_agents_example_does(tmp_path):
    # the sub-agent page's action: a text submitted to a reviewer whose schema names "diff"
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
        "reviewed 'review the diff'",
        "reviewed {'diff': '+x'}",
        "[\"'review the diff'\", \"{'diff': '+x'}\"] []",
    ]
