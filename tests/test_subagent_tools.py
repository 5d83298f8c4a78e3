"""Sub-agents as chat-model tools: the contracts of ``ChatModelSetup.subagents``.

A chat model setup naming ``subagents=[...]`` offers each one to its model as a callable
``_subagent_<name>``; the built-in tool call action delegates those calls through the same
``submit``/``await`` convention actions use. Each contract N below has at least one test
named ``test_contract_N_...``. Agents, scripts and setups live in ``subagent_tool_agents``
(importable by name); the scripted model records every request it receives, so the tests
assert on what the model was offered and what it saw.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson
import pytest
from pydantic import ValidationError
from support import subagent_tool_agents as sa
from support.harness import KEY, drive_until, new_core, records_of, resume, snapshot_of
from support.probes import gate

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    RESERVED_TOOL_PREFIX,
    Agent,
    ChatModelSetup,
    FunctionTool,
    InputEvent,
    InternalSubagent,
    MessageRole,
    OutputEvent,
    PlanError,
    ResourceDescriptor,
    ResourceError,
    ResourceType,
    RunnerContext,
    action,
    tool,
)
from flink_agents_py.api._subagents import SUBAGENT_DESCRIPTION_MARKER, subagent_callable
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState, ResourceEnvironment

pytestmark = pytest.mark.timeout(120)

MARKER = SUBAGENT_DESCRIPTION_MARKER
OBJECT_SCHEMA = json.loads(sa.OBJECT_SCHEMA)
REVIEW_TASK = "support.subagent_tool_agents:ReviewTask"


@pytest.fixture(autouse=True)
def _no_scripts():
    """No scripted model answers before the test sets its script (counts, requests and gates
    are the test's own: ``probes``)."""
    sa.reset()
    yield
    sa.reset()


def run(agent: Agent, *records: dict[str, Any]):
    records = records or ({"key": "k", "ask": "go"},)
    return AgentsExecutionEnvironment.local().from_list(list(records)).apply(agent).run()


def only_answer(res) -> dict[str, Any]:
    assert res.errors == []
    [out] = res.outputs
    return out


def setup_of(agent: Agent, name: str = "om") -> ChatModelSetup:
    """The chat model setup as the runtime builds it (bound and opened)."""
    setup = ResourceEnvironment(AgentPlan.from_agent(agent)).get(name, ResourceType.CHAT_MODEL)
    assert isinstance(setup, ChatModelSetup)
    return setup


def names(tools: list[Any]) -> list[str]:
    return [t.name for t in tools]


def two_turns(first_calls: list[tuple[str, str, dict[str, Any]]]):
    """A script: turn 1 makes ``first_calls``; then answers with ``{call id: content}``."""

    def script(req):
        if not req.tool_results:
            return sa.calls(*first_calls)
        return json.dumps(sa.results_by_id(req))

    return script


# the schema pydantic derives for ReviewTask, pinned whole (title dropped at the top only)
REVIEW_TASK_SCHEMA = {
    "$defs": {
        "Item": {
            "properties": {
                "sku": {"title": "Sku", "type": "string"},
                "qty": {"default": 1, "title": "Qty", "type": "integer"},
            },
            "required": ["sku"],
            "title": "Item",
            "type": "object",
        }
    },
    "description": "A review to rate.",
    "properties": {
        "review": {"title": "Review", "type": "string"},
        "product": {"description": "product id", "title": "Product", "type": "string"},
        "attachment": {"format": "binary", "title": "Attachment", "type": "string"},
        "thumbnail": {"default": "", "format": "binary", "title": "Thumbnail", "type": "string"},
        "items": {"default": [], "items": {"$ref": "#/$defs/Item"}, "title": "Items",
                  "type": "array"},
        "rating_hint": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None,
                        "title": "Rating Hint"},
    },
    "required": ["review", "product", "attachment"],
    "type": "object",
}


# ---------------------------------------------------------------------------- contract 1
def test_contract_1_each_subagent_is_one_callable_after_the_tools():
    sa.SCRIPTS["orch"] = two_turns([("1", "_subagent_reviewer", {"text": "x"})])
    agent = sa.orchestrator(
        tools=["lookup", "shout"], subagents=["reviewer", "remote"],
        # declared in the other order: the offer follows setup.subagents
        remote=sa.deferred(description="Asks the remote service.", input_type=REVIEW_TASK),
        reviewer=sa.internal(sa.Echo, description="Rates a review.",
                             input_schema=sa.OBJECT_SCHEMA),
    )
    out = only_answer(run(agent))
    assert out["error"] is None

    first, second = sa.requests()["orch"]
    for req in (first, second):  # every round offers the same callables, once each
        assert names(req.tools) == ["lookup", "shout", "_subagent_reviewer", "_subagent_remote"]
    by = {t.name: t for t in first.tools}
    assert by["_subagent_reviewer"].description == f"Rates a review. {MARKER}"
    assert by["_subagent_reviewer"].parameters == OBJECT_SCHEMA
    assert by["_subagent_remote"].description == f"Asks the remote service. {MARKER}"
    assert by["_subagent_remote"].parameters == REVIEW_TASK_SCHEMA
    # the tools are offered as they are, before the sub-agents
    assert by["lookup"] == FunctionTool.from_function(sa.lookup).metadata
    assert by["shout"] == FunctionTool.from_function(sa.shout).metadata
    # and what the model was offered is what the setup says
    assert setup_of(agent).callables() == first.tools


def test_contract_1_subagents_only_and_none():
    sa.SCRIPTS["orch"] = lambda req: "ok"
    only_subagents = sa.orchestrator(subagents=["r"], r=sa.internal(
        sa.Echo, input_schema=sa.OBJECT_SCHEMA))
    assert only_answer(run(only_subagents)) == {"answer": "ok", "error": None}
    [req] = sa.requests()["orch"]
    assert names(req.tools) == ["_subagent_r"]

    sa.requests().clear()
    # a sub-agent declared but not named by the setup is not offered
    not_named = sa.orchestrator(tools=["lookup"], r=sa.internal(
        sa.Echo, input_schema=sa.OBJECT_SCHEMA))
    only_answer(run(not_named))
    [req] = sa.requests()["orch"]
    assert names(req.tools) == ["lookup"]


# ---------------------------------------------------------------------------- contract 2
UNUSABLE = {
    "internal_nothing_declared": sa.internal(sa.Echo),
    "deferred_nothing_declared": sa.deferred(),
    "type_renders_as_integer": sa.internal(sa.Echo, input_type="builtins:int"),
    "type_renders_as_array": sa.deferred(input_type="support.subagent_tool_agents:list_of_items"),
    "explicit_schema_not_an_object": sa.internal(sa.Echo, input_schema='{"type": "array"}'),
    "explicit_schema_not_json": sa.deferred(input_schema="{type: object"),
}


@pytest.mark.parametrize("declared", list(UNUSABLE), ids=list(UNUSABLE))
def test_contract_2_unusable_subagent_fails_the_job_at_setup_naming_it(declared):
    """Rejected when the plan is built (the job fails at setup), before any record."""
    sa.SCRIPTS["orch"] = lambda req: "should not be asked"
    agent = sa.orchestrator(tools=["lookup"], subagents=["good", "vague"],
                            good=sa.internal(sa.Echo, input_schema=sa.OBJECT_SCHEMA),
                            vague=UNUSABLE[declared])
    with pytest.raises(PlanError) as e:
        run(agent)
    # the culprit is named, with the setup offering it; it is not silently dropped
    [problem] = e.value.problems
    assert "'vague'" in problem and "'om'" in problem, problem
    assert "'good'" not in problem
    assert sa.requests()["orch"] == []  # the model was never asked


def test_contract_2_only_the_setup_offering_it_fails():
    """A setup not offering the unusable sub-agent is unaffected by it."""
    sa.SCRIPTS["orch"] = lambda req: "fine"
    agent = sa.orchestrator(tools=["lookup"], vague=sa.internal(sa.Echo))
    assert only_answer(run(agent)) == {"answer": "fine", "error": None}


# ---------------------------------------------------------------------------- contract 3
def test_contract_3_descriptions_end_with_the_marker_and_no_listing_message():
    sa.SCRIPTS["orch"] = lambda req: "ok"
    subagents = dict(
        described=sa.internal(sa.Echo, description="Rates reviews.  \n",
                              input_schema=sa.OBJECT_SCHEMA),
        plain=sa.internal(sa.Echo, input_schema=sa.OBJECT_SCHEMA),
        other=sa.deferred(input_type=REVIEW_TASK),
    )
    agent = sa.orchestrator(tools=["lookup"], subagents=list(subagents),
                            prompt="You orchestrate.", **subagents)
    only_answer(run(agent))
    [req] = sa.requests()["orch"]
    by = {t.name: t.description for t in req.tools}
    for name in subagents:
        assert by[f"_subagent_{name}"].endswith(MARKER)
    assert by["_subagent_described"] == f"Rates reviews. {MARKER}"
    # undescribed: a generic delegation description naming the sub-agent
    plain, other = by["_subagent_plain"], by["_subagent_other"]
    assert "'plain'" in plain and plain != MARKER and plain.count(MARKER) == 1
    assert plain.replace("'plain'", "'other'") == other
    assert not by["lookup"].endswith(MARKER)  # tools are not marked

    # the model gets the prompt and the user message, nothing listing the sub-agents
    assert [(m.role, m.content) for m in req.messages] == [
        (MessageRole.SYSTEM.value, "You orchestrate."), (MessageRole.USER.value, "go")]

    # the same conversation as a setup without sub-agents
    sa.requests().clear()
    only_answer(run(sa.orchestrator(tools=["lookup"], prompt="You orchestrate.")))
    [plain_req] = sa.requests()["orch"]
    assert plain_req.messages == req.messages


def test_contract_3_no_system_message_without_a_prompt():
    sa.SCRIPTS["orch"] = two_turns([("1", "_subagent_r", {"text": "t"})])
    agent = sa.orchestrator(subagents=["r"], r=sa.internal(sa.Echo,
                                                           input_schema=sa.OBJECT_SCHEMA))
    only_answer(run(agent))
    for req in sa.requests()["orch"]:
        assert all(m.role != MessageRole.SYSTEM.value for m in req.messages)
    assert [m.role for m in sa.requests()["orch"][1].messages] == ["user", "assistant", "tool"]


# ---------------------------------------------------------------------------- contract 4
def test_contract_4_derived_schema_is_pinned_whole():
    agent = sa.orchestrator(subagents=["remote"], remote=sa.deferred(input_type=REVIEW_TASK))
    [c] = setup_of(agent).callables()
    assert c.parameters == REVIEW_TASK_SCHEMA
    # required lists exactly the fields without defaults; bytes is a binary string
    assert c.parameters["required"] == ["review", "product", "attachment"]
    assert c.parameters["properties"]["attachment"]["format"] == "binary"


def test_contract_4_explicit_schema_wins_over_the_input_type():
    explicit = '{"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}'
    agent = sa.orchestrator(subagents=["a", "b"],
                            a=sa.internal(sa.Echo, input_schema=explicit,
                                          input_type="support.subagent_tool_agents:Other"),
                            b=sa.deferred(input_schema=explicit, input_type=REVIEW_TASK))
    for c in setup_of(agent).callables():
        assert c.parameters == json.loads(explicit)


def test_contract_4_input_type_of_an_internal_subagent_given_as_instance():
    """``InternalSubagent(...)`` registered as an instance keeps its declared input type."""
    agent = sa.orchestrator(subagents=["r"])
    agent.add_resource("r", ResourceType.AGENT,
                       InternalSubagent(agent=sa.Echo, input_type=REVIEW_TASK))
    [c] = setup_of(agent).callables()
    assert c.parameters == REVIEW_TASK_SCHEMA


@pytest.mark.parametrize("blank", ["", "   ", "\n\t"])
def test_contract_4_blank_explicit_schema_is_rejected_at_construction(blank):
    for value in (sa.internal(sa.Echo, input_schema=blank), sa.deferred(input_schema=blank)):
        agent = sa.orchestrator(subagents=["r"], r=value)
        with pytest.raises(PlanError, match="'r'.*input_schema"):
            AgentPlan.from_agent(agent)
    with pytest.raises(ValidationError, match="input_schema"):
        InternalSubagent(agent=sa.Echo, input_schema=blank)
    with pytest.raises(ValidationError, match="input_schema"):
        sa.Remote(input_schema=blank)


@pytest.mark.parametrize(("input_type", "why"), [
    ("support.subagent_tool_agents:WithCallback", "cannot be rendered"),
    ("support.subagent_tool_agents:Node", "self-referential"),
], ids=["unrenderable_field", "self_referential"])
def test_contract_4_unrenderable_input_type_is_rejected_naming_the_remedy(input_type, why):
    sa.SCRIPTS["orch"] = lambda req: "should not be asked"
    agent = sa.orchestrator(subagents=["r"], r=sa.deferred(input_type=input_type))
    with pytest.raises(ResourceError) as e:
        subagent_callable("r", sa.Remote(input_type=input_type))
    message = str(e.value)
    assert "'r'" in message and why in message
    assert "declare input_schema" in message  # the remedy
    with pytest.raises(PlanError) as plan_error:  # the job fails at setup, naming it
        run(agent)
    assert "'r'" in str(plan_error.value) and "declare input_schema" in str(plan_error.value)
    assert sa.requests()["orch"] == []

    # the remedy works: an explicit schema wins over the type that cannot be rendered
    fixed = sa.orchestrator(subagents=["r"], r=sa.deferred(
        input_type=input_type, input_schema=sa.OBJECT_SCHEMA))
    [c] = setup_of(fixed).callables()
    assert c.parameters == OBJECT_SCHEMA


def test_contract_4_subagent_callable_directly():
    setup = sa.Remote(description="D.", input_type=REVIEW_TASK)
    assert subagent_callable("remote", setup) == {
        "name": "_subagent_remote", "description": f"D. {MARKER}",
        "parameters": REVIEW_TASK_SCHEMA}


# ---------------------------------------------------------------------------- contract 5
def test_contract_5_a_callable_name_resolves_to_exactly_one_namespace(probes):
    sa.SCRIPTS["orch"] = two_turns([
        ("t", "x", {"n": 3}),                      # TOOL x
        ("s", "_subagent_x", {"n": 4}),            # AGENT x
        ("bad_s", "_subagent_lookup", {"q": "z"}),  # lookup is only a tool
        ("bad_t", "reviewer", {"text": "z"}),      # reviewer is only a sub-agent
    ])
    agent = sa.orchestrator(tools=["x", "lookup"], subagents=["x", "reviewer"],
                            x=sa.internal(sa.Echo, input_schema=sa.OBJECT_SCHEMA),
                            reviewer=sa.internal(sa.Echo, input_schema=sa.OBJECT_SCHEMA))
    # the tool x and the sub-agent x share the resource name
    plan = AgentPlan.from_agent(agent)
    assert "x" in plan.resources[ResourceType.TOOL] and "x" in plan.resources[ResourceType.AGENT]
    out = only_answer(run(agent))
    assert names(sa.requests()["orch"][0].tools) == ["x", "lookup", "_subagent_x",
                                                   "_subagent_reviewer"]
    got = json.loads(out["answer"])
    assert json.loads(got["t"]) == {"tool_x": 3}
    assert json.loads(got["s"]) == [{"got": {"n": 4}}]
    assert got["bad_s"].startswith("Error:") and "no sub-agent named 'lookup'" in got["bad_s"]
    assert got["bad_t"].startswith("Error:") and "no tool named 'reviewer'" in got["bad_t"]
    # each call ran in its own namespace, once; the misrouted ones ran nothing
    assert sa.inputs()["tool:x"] == [3]
    assert sa.inputs()["child:echo"] == [{"n": 4}]
    assert probes["tool:lookup"] == 0


# ---------------------------------------------------------------------------- contract 6
@tool(name="_subagent_sneaky")
def sneaky_tool(q: str) -> str:
    """A tool whose declared name carries the prefix."""
    return q


class PrefixedInClass(Agent):
    @tool
    @staticmethod
    def _subagent_in_class(q: str) -> str:
        """A tool declared in the class body with the prefix."""
        return q

    @action(InputEvent)
    @staticmethod
    def noop(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=None))


PREFIXED_TOOLS = {
    "resource_name": lambda a: a.add_resource("_subagent_t", ResourceType.TOOL, sa.lookup),
    "tool_decorator_name": lambda a: a.add_resource("sneaky", ResourceType.TOOL, sneaky_tool),
    "function_tool_instance": lambda a: a.add_resource(
        "plain", ResourceType.TOOL, FunctionTool.from_function(sa.lookup, name="_subagent_t")),
    "descriptor_name": lambda a: a.add_resource("plain", ResourceType.TOOL, ResourceDescriptor(
        FunctionTool, func="support.subagent_tool_agents:lookup", name="_subagent_t")),
}


@pytest.mark.parametrize("how", list(PREFIXED_TOOLS), ids=list(PREFIXED_TOOLS))
def test_contract_6_prefixed_tool_rejected_at_plan_construction(how):
    agent = sa.orchestrator()
    PREFIXED_TOOLS[how](agent)
    with pytest.raises(PlanError, match=RESERVED_TOOL_PREFIX):
        AgentPlan.from_agent(agent)


def test_contract_6_prefixed_tool_in_class_body_rejected():
    with pytest.raises(PlanError, match="_subagent_in_class"):
        AgentPlan.from_agent(PrefixedInClass())


# contract 6 for a name an MCP server advertises: tests/test_mcp.py::test_contract_6_...


# ---------------------------------------------------------------------------- contract 7
ARGS = {
    "review": "Très bien ✓ \"quoted\"", "product": "p-1",
    "n": 1, "f": 1.5, "big": 2**53 + 1, "flag": False, "none": None,
    "nested": {"list": [1, None, True, "s"], "empty": {}, "deeper": [{"a": []}]},
    "not_in_schema": "kept as is",
    "attachment": "not base64 at all",
}


@pytest.mark.parametrize("kind", ["internal", "deferred"])
def test_contract_7_model_arguments_reach_the_subagent_unchanged(kind):
    sa.SCRIPTS["orch"] = two_turns([("1", "_subagent_r", ARGS)])
    # they follow ReviewTask's schema, with fields it does not name: nothing coerces or drops
    decl = (sa.internal(sa.Echo, input_type=REVIEW_TASK) if kind == "internal"
            else sa.deferred(input_type=REVIEW_TASK))
    out = only_answer(run(sa.orchestrator(subagents=["r"], r=decl)))
    received = sa.inputs()["child:echo" if kind == "internal" else "deferred:r"]
    assert received == [ARGS]
    assert type(received[0]) is dict
    assert json.dumps(received[0], sort_keys=True) == json.dumps(ARGS, sort_keys=True)
    result = json.loads(json.loads(out["answer"])["1"])
    assert result == ([{"got": ARGS}] if kind == "internal" else {"echo": ARGS})


def test_contract_7_empty_arguments_stay_empty():
    sa.SCRIPTS["orch"] = two_turns([("1", "_subagent_r", {})])
    only_answer(run(sa.orchestrator(subagents=["r"], r=sa.internal(
        sa.Echo, input_schema=sa.OBJECT_SCHEMA))))
    assert sa.inputs()["child:echo"] == [{}]


# ---------------------------------------------------------------------------- contract 8
def test_contract_8_internal_result_is_the_json_of_its_full_output_list():
    sa.SCRIPTS["orch"] = two_turns([("1", "_subagent_two", {"v": 1})])
    out = only_answer(run(sa.orchestrator(subagents=["two"], two=sa.internal(
        sa.TwoOutputs, input_schema=sa.OBJECT_SCHEMA))))
    content = json.loads(out["answer"])["1"]
    expected = [{"part": 1, "of": {"v": 1}}, {"part": 2, "score": 4}]
    assert json.loads(content) == expected
    assert content == orjson.dumps(expected).decode()  # JSON text, as tools' results are
    [tool_msg] = sa.requests()["orch"][1].tool_results
    assert tool_msg.role == MessageRole.TOOL.value and tool_msg.name == "_subagent_two"


def test_contract_8_declared_result_type_narrows_undeclared_passes_through():
    sa.SCRIPTS["orch"] = two_turns([("typed", "_subagent_typed", {"v": 1}),
                                    ("raw", "_subagent_raw", {"v": 1})])
    agent = sa.orchestrator(
        subagents=["typed", "raw"],
        typed=sa.deferred("verdict_plus", cls=sa.TypedRemote, input_schema=sa.OBJECT_SCHEMA),
        raw=sa.deferred("verdict_plus", input_schema=sa.OBJECT_SCHEMA))
    got = json.loads(only_answer(run(agent))["answer"])
    assert json.loads(got["typed"]) == {"score": 4, "label": "good"}  # extra fields ignored
    assert json.loads(got["raw"]) == {"score": 4, "label": "good",
                                      "secret": "not for the model", "debug": [1, 2]}


def test_contract_8_result_not_of_the_declared_type_is_a_failed_delegation():
    sa.SCRIPTS["orch"] = two_turns([("1", "_subagent_typed", {"v": 1})])
    agent = sa.orchestrator(subagents=["typed"], typed=sa.deferred(
        "not_a_verdict", cls=sa.TypedRemote, input_schema=sa.OBJECT_SCHEMA))
    content = json.loads(only_answer(run(agent))["answer"])["1"]
    assert content.startswith("Error:") and "'typed'" in content and "Verdict" in content


# ---------------------------------------------------------------------------- contract 9
def _cycle() -> Any:
    d: dict[str, Any] = {"a": {"b": []}}
    d["a"]["b"].append(d)
    return d


BAD = {
    "non_string_key": (lambda: {"meta": {"ok": 1, 2: "two"}}, "$.meta"),
    "nan": (lambda: {"scores": [1.0, math.nan]}, "$.scores[1]"),
    "infinity": (lambda: {"a": {"b": -math.inf}}, "$.a.b"),
    "object": (lambda: {"items": [1, object()]}, "$.items[1]"),
    "set": (lambda: {"tags": {"a", "b"}}, "$.tags"),
    "cycle": (_cycle, "$.a.b[0]"),
}


def _delegate_bad(case: str) -> tuple[dict[str, Any], str]:
    """Run a chat whose one delegation returns ``BAD_RESULTS[case]()``; return the answer
    and the tool message the model's second turn saw."""
    sa.SCRIPTS["orch"] = two_turns([("1", "_subagent_bad", {"case": case})])
    agent = sa.orchestrator(subagents=["bad"], bad=sa.deferred(
        "bad", input_schema=sa.OBJECT_SCHEMA))
    res = run(agent)
    out = only_answer(res)  # no job failure, no error record
    assert out["error"] is None
    first, second = sa.requests()["orch"]  # the model was asked again, with the outcome
    [msg] = second.tool_results
    assert msg.tool_call_id == "1"
    return out, msg.content


@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_contract_9_result_without_json_form_is_refused_with_its_path(case):
    make, path = BAD[case]
    sa.BAD_RESULTS[case] = make
    _, content = _delegate_bad(case)
    assert content.startswith("Error:"), content
    assert "'bad'" in content
    assert path in content, f"no path {path!r} in: {content}"
    assert "object object" not in content  # not stringified


def test_contract_9_cycle_refused_with_path():
    sa.BAD_RESULTS["cycle"] = _cycle
    _, content = _delegate_bad("cycle")
    assert content.startswith("Error:") and "cycle" in content and "$.a.b[0]" in content


def test_contract_9_diamond_is_legal():
    def diamond():
        shared = {"x": [1, 2]}
        return {"left": shared, "right": shared, "both": [shared, shared]}

    sa.BAD_RESULTS["diamond"] = diamond
    _, content = _delegate_bad("diamond")
    shared = {"x": [1, 2]}
    assert json.loads(content) == {"left": shared, "right": shared, "both": [shared, shared]}


def test_a_sub_agents_text_result_reaches_the_model_as_its_text():
    """As a tool's: ``tool says: HELLO WORLD!`` (Flink Agents), not ``"HELLO WORLD!"``."""
    sa.BAD_RESULTS["text"] = lambda: "HELLO WORLD!"
    _, content = _delegate_bad("text")
    assert content == "HELLO WORLD!"
    sa.reset()
    sa.BAD_RESULTS["json_looking"] = lambda: '{"a": 1}'  # a text: as it is, not re-encoded
    assert _delegate_bad("json_looking")[1] == '{"a": 1}'


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"next": value}
    return value


def test_contract_9_200_deep_result_still_normalizes():
    sa.BAD_RESULTS["deep200"] = lambda: _nested(200)
    _, content = _delegate_bad("deep200")
    assert json.loads(content) == _nested(200)


def test_contract_9_no_fixed_depth_cap_300_deep_normalizes():
    """Deeper than pydantic's serializer allows, well within the interpreter's stack."""
    sa.BAD_RESULTS["deep300"] = lambda: _nested(300)
    _, content = _delegate_bad("deep300")
    assert not content.startswith("Error:"), content
    assert json.loads(content) == _nested(300)


def test_contract_9_too_deep_for_the_stack_is_a_failed_delegation_not_a_crash():
    sa.BAD_RESULTS["abyss"] = lambda: _nested(100_000)
    out, content = _delegate_bad("abyss")
    assert content.startswith("Error:") and "'bad'" in content
    assert out["answer"] is not None


# --------------------------------------------------------------------------- contract 10
@pytest.mark.parametrize("kind", ["deferred", "internal"])
def test_contract_10_failed_delegation_reaches_the_model_which_corrects_the_call(kind):
    def script(req):
        if not req.tool_results:
            return sa.calls(("1", "_subagent_r", {"text": "nice shoe"}))
        [msg] = req.tool_results
        if msg.content.startswith("Error:"):  # correct the call from the reason
            return sa.calls(("2", "_subagent_r", {"review": "nice shoe"}))
        return f"final: {msg.content}"

    sa.SCRIPTS["orch"] = script
    decl = (sa.deferred("refuse_without_review", input_schema=sa.OBJECT_SCHEMA)
            if kind == "deferred" else sa.internal(sa.Picky, input_schema=sa.OBJECT_SCHEMA))
    out = only_answer(run(sa.orchestrator(subagents=["r"], r=decl)))
    turn1, turn2, turn3 = sa.requests()["orch"]
    [failed] = turn2.tool_results
    assert failed.role == MessageRole.TOOL.value and failed.tool_call_id == "1"
    assert failed.content.startswith("Error:")
    assert "'r'" in failed.content
    reason = ("input must carry a 'review' field" if kind == "deferred"
              else "picky needs a 'review' field")
    assert reason in failed.content
    if kind == "deferred":
        assert out["answer"] == 'final: {"rated":"nice shoe"}'
    else:
        assert out["answer"] == 'final: [{"rated":"nice shoe"}]'


def test_contract_10_unknown_subagent_is_told_to_the_model():
    sa.SCRIPTS["orch"] = two_turns([("1", "_subagent_ghost", {})])
    out = only_answer(run(sa.orchestrator(subagents=["r"], r=sa.internal(
        sa.Echo, input_schema=sa.OBJECT_SCHEMA))))
    content = json.loads(out["answer"])["1"]
    assert content.startswith("Error:") and "'ghost'" in content and "r" in content


# --------------------------------------------------------------------------- contract 11
def test_contract_11_reopen_rebuilds_from_scratch_without_duplicates():
    agent = sa.orchestrator(tools=["lookup"], subagents=["a", "b"],
                            a=sa.internal(sa.Echo, input_schema=sa.OBJECT_SCHEMA),
                            b=sa.deferred(input_type=REVIEW_TASK))
    setup = setup_of(agent)  # opened once by the environment
    first = setup.callables()
    assert names(first) == ["lookup", "_subagent_a", "_subagent_b"]
    setup.open()
    setup.open()
    assert setup.callables() == first

    # from scratch: a changed configuration shows, nothing of the old one stays
    setup.subagents = ["b"]
    setup.open()
    assert names(setup.callables()) == ["lookup", "_subagent_b"]
    setup.subagents = ["a", "b"]
    setup.open()
    assert setup.callables() == first
    # a failing reopen leaves no stale callables behind
    setup.subagents = ["a", "a"]
    with pytest.raises(ResourceError):
        setup.open()
    with pytest.raises(ResourceError):
        setup.callables()


def test_contract_11_repeated_callable_name_fails_open():
    sa.SCRIPTS["orch"] = lambda req: "should not be asked"
    agent = sa.orchestrator(subagents=["x", "x"],
                            x=sa.internal(sa.Echo, input_schema=sa.OBJECT_SCHEMA))
    with pytest.raises(ResourceError, match="_subagent_x"):
        setup_of(agent)
    out = only_answer(run(agent))
    assert out["answer"] is None and "_subagent_x" in out["error"]
    assert sa.requests()["orch"] == []


def test_contract_11_repeated_tool_name_fails_open():
    agent = sa.orchestrator(tools=["lookup", "lookup"])
    with pytest.raises(ResourceError, match="'lookup'"):
        setup_of(agent)


# --------------------------------------------------------------------------- contract 12
@pytest.mark.parametrize("dispatch", ["serial", "concurrent"])
def test_contract_12_batched_subagent_calls_overlap(dispatch):
    """Sub-agents that start at submit (internal; async likewise) overlap in a batch.

    A deferred sub-agent is documented to send nothing until its first await (so a call
    cancelled before then never issues its request); in a batch every call is submitted
    first and the handles are awaited in request order, so deferred calls run one at a time.
    """
    sa.SCRIPTS["orch"] = two_turns([("a", "_subagent_a", {"me": "a", "other": "b"}),
                                    ("b", "_subagent_b", {"me": "b", "other": "a"})])
    decl = {n: sa.internal(sa.Rendezvous, input_schema=sa.OBJECT_SCHEMA) for n in "ab"}
    agent = sa.orchestrator(subagents=["a", "b"], tool_dispatch=dispatch, **decl)
    got = json.loads(only_answer(run(agent))["answer"])
    [a], [b] = json.loads(got["a"]), json.loads(got["b"])
    # each sub-agent's call saw the other one started: they were in flight together
    assert (a, b) == ({"me": "a", "saw_other": True}, {"me": "b", "saw_other": True})


@pytest.mark.parametrize("dispatch", ["serial", "concurrent"])
def test_contract_12_mixed_batch_puts_each_result_on_its_call_id(dispatch):
    batch = [("s1", "_subagent_a", {"v": 1}), ("t1", "shout", {"text": "hey"}),
             ("s2", "_subagent_b", {"v": 2}), ("t2", "lookup", {"q": "z"}),
             ("s3", "_subagent_a", {"v": 3}), ("s4", "_subagent_b", {"v": 4})]
    sa.SCRIPTS["orch"] = two_turns(batch)
    agent = sa.orchestrator(tools=["shout", "lookup"], subagents=["a", "b"],
                            tool_dispatch=dispatch,
                            a=sa.internal(sa.Echo, input_schema=sa.OBJECT_SCHEMA),
                            b=sa.deferred("slow_echo", input_schema=sa.OBJECT_SCHEMA))
    sent = json.loads(only_answer(run(agent))["answer"])
    assert sent.pop("t1") == "HEY"  # a text result is sent as its text; the others as JSON
    got = {k: json.loads(v) for k, v in sent.items()}
    assert got == {
        "s1": [{"got": {"v": 1}}], "s2": {"echo": {"v": 2}},
        "t2": {"q": "z", "found": True}, "s3": [{"got": {"v": 3}}], "s4": {"echo": {"v": 4}},
    }
    # one tool message per call, in request order
    assert [m.tool_call_id for m in sa.requests()["orch"][1].tool_results] == [
        c[0] for c in batch]


def test_contract_12_both_dispatch_modes_decide_alike():
    batch = [("s1", "_subagent_a", {"v": 1}), ("t1", "shout", {"text": "x"}),
             ("s2", "_subagent_b", {"v": 2})]
    answers = []
    for dispatch in ("serial", "concurrent"):
        sa.reset()
        sa.SCRIPTS["orch"] = two_turns(batch)
        agent = sa.orchestrator(tools=["shout"], subagents=["a", "b"], tool_dispatch=dispatch,
                                a=sa.internal(sa.Echo, input_schema=sa.OBJECT_SCHEMA),
                                b=sa.deferred(input_schema=sa.OBJECT_SCHEMA))
        res = run(agent)
        second = sa.requests()["orch"][1]
        answers.append((only_answer(res), [m.model_dump() for m in second.messages]))
    assert answers[0] == answers[1]


def _wait_started(name: str) -> bool:
    return sa.started(name).wait(10)


class CancellingParent(Agent):
    """Submits the internal sub-agent ``child`` and cancels it while the child's chat is
    mid-delegation (its sub-agent ``a`` blocks); then releases ``a``."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        handle = await ctx.submit_subagent("child", {"ask": "delegate"})
        started = await ctx.durable_execute_async(_wait_started, "a")
        await handle.cancel()
        gate("a").set()
        result = await handle
        ctx.send_event(OutputEvent(output={"a_started": started, "result": result.model_dump()}))


def test_contract_12_cancelled_delegation_cancels_pending_handles_and_ends_the_chat(probes):
    def child_script(req):
        if not req.tool_results:
            return sa.calls(("1", "_subagent_a", {"name": "a"}),
                            ("2", "_subagent_b", {"v": 1}),
                            ("3", "_subagent_c", {"v": 2}))
        return "the child's chat must not be driven further"

    sa.SCRIPTS["child"] = child_script
    child = sa.orchestrator(subagents=["a", "b", "c"], model="child",
                            a=sa.internal(sa.Blocking, input_schema=sa.OBJECT_SCHEMA),
                            b=sa.deferred(input_schema=sa.OBJECT_SCHEMA),
                            c=sa.internal(sa.Counting, input_schema=sa.OBJECT_SCHEMA))
    parent = CancellingParent()
    parent.add_resource("child", ResourceType.AGENT,
                        ResourceDescriptor(InternalSubagent, agent=child))
    res = run(parent)
    assert res.errors == []
    [out] = res.outputs
    assert out["a_started"] is True
    assert out["result"]["cancelled"] is True and out["result"]["success"] is False
    # the child's model was asked once: no further chat call off the cancelled delegation
    assert len(sa.requests()["child"]) == 1
    # the deferred handle submitted and not yet awaited never ran
    assert probes["prepare:b"] == 0 and probes["deferred:b"] == 0
    assert probes["block:a"] == 1


# ------------------------------------------------------------- durable execution (restore)
def _tool_action_calls(state: InMemoryKeyState) -> dict[str, Any]:
    recs = records_of(state, "_tool_call_action")
    return recs[0].calls if recs else {}


@pytest.mark.parametrize("how", ["deepcopy", "json"])
def test_completed_delegations_are_replayed_after_restore_not_rerun(how, probes):
    sa.SCRIPTS["orch"] = two_turns([("i", "_subagent_inner", {"v": 1}),
                                    ("r", "_subagent_remote", {"v": 2}),
                                    ("g", "gated", {"name": "g"})])
    agent = sa.orchestrator(tools=["gated"], subagents=["inner", "remote"],
                            inner=sa.internal(sa.Counting, input_schema=sa.OBJECT_SCHEMA),
                            remote=sa.deferred(input_schema=sa.OBJECT_SCHEMA))
    plan = AgentPlan.from_agent(agent)
    old = new_core(plan)
    try:
        state = InMemoryKeyState()
        res = old.on_input(KEY, {"key": KEY, "ask": "go"}, state)
        assert res.busy and res.errors == []
        # both delegations recorded, the tool call still in flight
        drive_until(old, state, quiet=True, done=lambda s: all(
            (c := _tool_action_calls(s).get(str(i))) is not None and c.done for i in (0, 1)))
        calls = _tool_action_calls(state)
        assert "2" in calls and not calls["2"].done
        snapshot = snapshot_of(state, how)
        assert (probes["inner:durable"], probes["deferred:remote"]) == (1, 1)
        turns_before = len(sa.requests()["orch"])
    finally:
        gate("g").set()
        old.close()

    outputs, errors, new = resume(plan, snapshot)
    assert errors == []
    [out] = outputs
    got = {k: json.loads(v) for k, v in json.loads(out["answer"]).items()}
    assert got == {"i": [{"inner": {"v": 1}, "n": 1}], "r": {"echo": {"v": 2}},
                   "g": {"gated": "g"}}
    # the completed delegations were replayed, not run again; the in-flight tool re-ran
    assert probes["inner:durable"] == 1
    assert probes["deferred:remote"] == 1 and probes["prepare:remote"] == 1
    assert probes["tool:gated"] == 2
    assert turns_before == 1 and len(sa.requests()["orch"]) == 2  # only the second turn is new
    assert new.counters["calls_replayed"] >= 2


@pytest.mark.parametrize("case", ["non_string_key", "nan", "set"])
def test_contract_9_refusal_is_the_same_after_restore(case, probes):
    """A refused result stays refused when its delegation is replayed after a restore."""
    make, path = BAD[case]
    sa.BAD_RESULTS[case] = make
    sa.SCRIPTS["orch"] = two_turns([("1", "_subagent_bad", {"case": case}),
                                    ("g", "gated", {"name": "g"})])
    agent = sa.orchestrator(tools=["gated"], subagents=["bad"],
                            bad=sa.deferred("bad", input_schema=sa.OBJECT_SCHEMA))
    plan = AgentPlan.from_agent(agent)
    old = new_core(plan)
    try:
        state = InMemoryKeyState()
        old.on_input(KEY, {"key": KEY, "ask": "go"}, state)
        drive_until(old, state, quiet=True,
                    done=lambda s: (c := _tool_action_calls(s).get("0")) is not None and c.done)
        snapshot = snapshot_of(state)
    finally:
        gate("g").set()
        old.close()
    outputs, errors, _ = resume(plan, snapshot)
    assert errors == []
    assert probes["deferred:bad"] == 1  # replayed, not re-run
    content = json.loads(outputs[0]["answer"])["1"]
    assert content.startswith("Error:") and path in content, content


def test_contract_10_arguments_the_connection_could_not_read_are_told_not_delegated():
    from flink_agents_py.api.internal import UNREADABLE_ARGUMENTS

    def script(req):
        if not req.tool_results:  # what a connection makes of '```{"review": "nice'
            return sa.calls(("1", "_subagent_r", {
                UNREADABLE_ARGUMENTS: "are not JSON: '```{\"review\": \"nice'"}))
        [msg] = req.tool_results
        if msg.content.startswith("Error:"):  # the model calls again, readably
            return sa.calls(("2", "_subagent_r", {"review": "nice shoe"}))
        return f"final: {msg.content}"

    sa.SCRIPTS["orch"] = script
    out = only_answer(run(sa.orchestrator(subagents=["r"], r=sa.internal(
        sa.Echo, input_schema=sa.OBJECT_SCHEMA))))
    _, turn2, _ = sa.requests()["orch"]
    [failed] = turn2.tool_results
    assert failed.content.startswith("Error:") and "'_subagent_r' was called with arguments " \
        "that are not JSON" in failed.content, failed.content
    assert sa.inputs()["child:echo"] == [{"review": "nice shoe"}]  # only the readable one
    assert out["answer"].startswith("final: ")
