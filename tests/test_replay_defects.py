"""Regression tests of the replay defects of issue 14 §3, each as a kind, with neighbours.

1. A sub-agent's result has the same types live and after a replay: its plain JSON form
   (pydantic models and dataclasses are objects, enums their values, datetimes ISO 8601 text,
   tuples lists), on every path; any durable result is handed over as a replay rebuilds it.
2. A declared ``result_type()`` whose conversion fails (a type pydantic cannot build, a
   result deeper than pydantic serializes) is a failed delegation reported to the model; the
   sibling results and the chat's answer are kept. A result too deep to walk is refused
   naming the path where the walk stopped.
3. A function tool offered under the reserved prefix ``_subagent_`` (its own function name,
   no explicit ``name=``) is rejected when the plan is built.
4. A chat model offering a sub-agent with no usable input shape fails the job at setup.
5. ``handle.cancel()`` takes effect without ``await``.

Agents live in ``replay_defect_agents`` (also run by the crash checker).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support import replay_defect_agents as rda
from support.harness import KEY, call_of, drive_until, new_core, resume, snapshot_of
from support.probes import gate
from support.subagent_agents import RunningPubsub

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatModelSetup,
    FunctionTool,
    InputEvent,
    InternalSubagent,
    OutputEvent,
    PlanError,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    SubagentResult,
    action,
)
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState

pytestmark = pytest.mark.timeout(60)



def gated(tag: str) -> str:
    assert gate().wait(10), "gate never opened"
    return tag


def run(agent: Agent, records: list[dict[str, Any]]):
    return AgentsExecutionEnvironment.local().from_list(records).apply(agent).run()


# -- 1. result types are the same live and after replay -------------------------------------
class RichThenGated(rda.RichResultsParent):
    """``RichResultsParent`` whose action then waits on a gated call before it outputs."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        what = event.input["what"]
        internal = await (await ctx.submit_subagent("child", {"n": 1}))
        deferred = await (await ctx.submit_subagent("remote", {"what": what}))
        remote = await (await ctx.submit_subagent("pubsub", {"n": 2}))
        env = await ctx.durable_execute_async(rda.envelope, 7)
        await ctx.durable_execute_async(gated, "g")  # c5: the snapshot is taken here
        got = {"internal": internal.result, "deferred": deferred.result,
               "async": remote.result, "envelope": env}
        ctx.send_event(OutputEvent(output={"types": {k: rda.shape(v) for k, v in got.items()},
                                           "values": {k: v for k, v in got.items()
                                                      if k != "envelope"}}))


def rich_then_gated() -> Agent:
    agent = RichThenGated()
    for rtype, name, value in rda.rich_results().declared_resources():
        agent.add_resource(name, rtype, value)
    return agent


@pytest.mark.parametrize("what", ["model", "dataclass", "enum", "datetime", "tuple", "nested"])
@pytest.mark.parametrize("how", ["deepcopy", "json"])
def test_subagent_result_types_are_the_same_live_and_after_replay(what, how):
    gate().set()
    [live] = run(rich_then_gated(), [{"key": KEY, "what": what}]).outputs
    gate().clear()
    plan = AgentPlan.from_agent(rich_then_gated())
    core = new_core(plan)
    try:
        state = InMemoryKeyState()
        core.on_input(KEY, {"key": KEY, "what": what}, state)
        drive_until(core, state, quiet=True,
                    done=lambda s: (c := call_of(s, "go", 5)) is not None and not c.done)
        snap = snapshot_of(state, how)  # type: ignore[arg-type]
    finally:
        gate().set()
        core.close()
    outputs, errors, new = resume(plan, snap)
    assert errors == []
    [replayed] = outputs
    assert new.counters["calls_replayed"] >= 5  # the results came from records
    assert replayed == live  # values and type trees alike
    types = live["types"]
    # the documented contract: a sub-agent's result is its plain JSON form, on both paths
    assert types["internal"] == ["list", {"dict": {"score": "int", "label": "str"}}, {"dict": {
        "stamp": {"dict": {"at": "str", "color": "str"}}, "color": "str", "at": "str"}}]
    assert types["async"] == {"dict": {"verdict": {"dict": {"score": "int", "label": "str"}},
                                       "at": "str"}}
    expected = {"model": {"dict": {"score": "int", "label": "str"}},
                "dataclass": {"dict": {"at": "str", "color": "str"}},
                "enum": "str", "datetime": "str", "tuple": ["list", "int", "str"],
                "nested": {"dict": {"verdicts": ["list", {"dict": {"score": "int",
                                                                   "label": "str"}}],
                                    "at": "str"}}}
    assert types["deferred"] == expected[what]
    # a durable function's model keeps its type; its Any field holds its JSON form
    assert types["envelope"] == {"Envelope": {
        "payload": {"dict": {"verdict": {"dict": {"score": "int", "label": "str"}},
                             "at": "str", "pair": ["list", "int", "int"]}},
        "tags": ["tuple", "str", "str"]}}
    assert live["values"]["deferred"] == {
        "model": {"score": 4, "label": "good"}, "dataclass": {"at": rda.WHEN.isoformat(),
                                                              "color": "red"},
        "enum": "red", "datetime": rda.WHEN.isoformat(), "tuple": [1, "two"],
        "nested": {"verdicts": [{"score": 1, "label": "bad"}], "at": rda.WHEN.isoformat()},
    }[what]


def test_a_durable_result_that_does_not_rebuild_fails_live_not_after_a_restore():
    """A result whose stored form a replay could not rebuild fails when it is made."""
    from pydantic import BaseModel, field_validator

    class OnlyOnce(BaseModel):
        value: str

        @field_validator("value")
        @classmethod
        def _fresh(cls, v: str) -> str:
            if v.startswith("seen:"):
                raise ValueError("already normalized")
            return "seen:" + v

    class Maker(Agent):
        @action(InputEvent)
        @staticmethod
        async def go(event: InputEvent, ctx: RunnerContext) -> None:
            try:
                await ctx.durable_execute_async(lambda: OnlyOnce(value="x"))
                ctx.send_event(OutputEvent(output="no error"))
            except Exception as e:  # noqa: BLE001
                ctx.send_event(OutputEvent(output=type(e).__name__))

    assert run(Maker(), [{"key": KEY}]).outputs == ["SerializationError"]


# -- 2. declared result types that fail to convert -------------------------------------------
def test_failing_result_conversions_are_failed_delegations_and_siblings_are_kept():
    res = run(rda.delegation_failures(), [{"key": KEY, "ask": "go"}])
    assert res.errors == []
    [out] = res.outputs
    assert out["error"] is None  # the chat answered: a ChatResponseEvent was sent
    got = json.loads(out["answer"])
    assert set(got) == {"u", "d", "a", "t", "s"}  # every sibling's result reached the model
    assert got["s"] == "5"
    assert json.loads(got["t"]) == {"score": 4, "label": "good"}  # narrowed, extra dropped
    # a declared type pydantic cannot build
    assert got["u"].startswith("Error:") and "'unbuildable'" in got["u"]
    assert "NotAModel" in got["u"]
    # deeper than pydantic's serializer: still normalized (no fixed depth cap)
    assert json.loads(got["d"]) == rda.nested(300)
    # too deep to walk: refused, naming the path where the walk stopped
    assert got["a"].startswith("Error:") and "'abyss'" in got["a"]
    assert "the walk stopped at $.next.next.next" in got["a"]


class CallsAbyss(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        r = await (await ctx.submit_subagent("abyss", {"n": 1}))
        ctx.send_event(OutputEvent(output={"success": r.success, "error": r.error_message}))


def test_a_result_too_deep_to_walk_is_a_failed_result_for_an_action_too():
    agent = CallsAbyss()
    agent.add_resource("abyss", ResourceType.AGENT,
                       ResourceDescriptor(rda.Behaving, behaviour="abyss"))
    res = run(agent, [{"key": KEY}])
    assert res.errors == []  # a failed delegation, not a failed action
    [out] = res.outputs
    assert out["success"] is False
    assert "'abyss'" in out["error"] and "the walk stopped at $.next.next" in out["error"]


# -- 3. the reserved prefix ----------------------------------------------------------------
PREFIXED = {
    "descriptor_func_only": lambda: ResourceDescriptor(
        FunctionTool, func="support.replay_defect_agents:_subagent_style_lookup"),
    "instance_without_name": lambda: FunctionTool(
        func="support.replay_defect_agents:_subagent_style_lookup"),
    "bare_function": lambda: rda._subagent_style_lookup,
    "tool_class_default_name": lambda: ResourceDescriptor(
        rda.SneakyTool, func="support.replay_defect_agents:add"),
}


@pytest.mark.parametrize("how", list(PREFIXED), ids=list(PREFIXED))
def test_function_named_with_the_reserved_prefix_is_rejected_at_plan_build(how):
    agent = rda.Orchestrator()
    agent.add_resource("style", ResourceType.TOOL, PREFIXED[how]())
    with pytest.raises(PlanError) as e:
        AgentPlan.from_agent(agent)
    [problem] = e.value.problems
    offered = "_subagent_sneaky" if how == "tool_class_default_name" else "_subagent_style_lookup"
    assert f"'{offered}'" in problem and "reserved prefix" in problem


def test_a_descriptor_naming_a_missing_function_is_a_plan_problem():
    agent = rda.Orchestrator()
    agent.add_resource("gone", ResourceType.TOOL, ResourceDescriptor(
        FunctionTool, func="support.replay_defect_agents:no_such_function"))
    with pytest.raises(PlanError, match="no_such_function"):
        AgentPlan.from_agent(agent)


def test_function_with_the_prefix_under_an_explicit_name_is_offered_by_that_name():
    res = run(rda.prefixed_function_with_name(), [{"key": KEY, "ask": "style?"}])
    assert res.errors == []
    assert res.outputs == [{"answer": 'style_lookup={"sku":"B01","style":"plain"}',
                            "error": None}]


def test_a_tool_offered_under_another_name_than_its_resource_is_callable():
    agent = rda.Orchestrator()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(rda.ScriptedChatModel,
                                          function="support.replay_defect_agents:prefixed_function_script"))
    agent.add_resource("lookup_resource", ResourceType.TOOL, FunctionTool.from_function(
        rda._subagent_style_lookup, name="style_lookup"))
    agent.add_resource("om", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=["lookup_resource"]))
    res = run(agent, [{"key": KEY, "ask": "style?"}])
    assert res.errors == []
    assert res.outputs == [{"answer": 'style_lookup={"sku":"B01","style":"plain"}',
                            "error": None}]


# -- 4. a sub-agent with no usable input shape fails the job at setup ----------------------
@pytest.mark.parametrize("declared", [
    {},
    {"input_type": "builtins:int"},
    {"input_schema": '{"type": "array"}'},
], ids=["nothing", "type_not_an_object", "schema_not_an_object"])
def test_subagent_without_input_shape_fails_at_plan_build_before_any_record(declared):
    agent = rda.Orchestrator()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        rda.ScriptedChatModel, function="support.replay_defect_agents:typed_input_script"))
    agent.add_resource("vague", ResourceType.AGENT, ResourceDescriptor(
        InternalSubagent, agent=rda.ChatInChild, **declared))
    agent.add_resource("om", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", subagents=["vague"]))
    with pytest.raises(PlanError) as e:
        AgentsExecutionEnvironment.local().from_list([{"key": KEY}]).apply(agent).run()
    [problem] = e.value.problems
    assert "'om'" in problem and "'vague'" in problem and "input_schema" in problem


def test_chat_model_naming_an_undeclared_subagent_fails_at_plan_build():
    agent = rda.Orchestrator()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(
        rda.ScriptedChatModel, function="support.replay_defect_agents:typed_input_script"))
    agent.add_resource("om", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", subagents=["missing"]))
    with pytest.raises(PlanError, match="'missing'"):
        AgentPlan.from_agent(agent)


def test_subagent_offered_by_its_input_type_is_accepted():
    res = run(rda.typed_input_subagent(), [{"key": KEY, "ask": "n?"}])
    assert res.errors == []
    assert res.outputs == [{"answer": '[{"got":{"n":5}}]', "error": None}]


# -- 5. cancel without await -----------------------------------------------------------------
class CancelsTwice(Agent):
    """Cancels without awaiting, then again (awaited); awaits the handle."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        handle = await ctx.submit_subagent(event.input["subagent"], {"what": "model"})
        handle.cancel()
        await handle.cancel()
        result = await handle
        ctx.send_event(OutputEvent(output={"cancelled": result.cancelled,
                                           "success": result.success}))


@pytest.mark.parametrize("subagent", ["pubsub", "remote", "child"])
def test_cancel_without_await_takes_effect(subagent, probes):
    agent = CancelsTwice()
    agent.add_resource("pubsub", ResourceType.AGENT, ResourceDescriptor(RunningPubsub))
    agent.add_resource("remote", ResourceType.AGENT, ResourceDescriptor(rda.RichRemote))
    agent.add_resource("child", ResourceType.AGENT,
                       ResourceDescriptor(InternalSubagent, agent=rda.ModelChild))
    res = run(agent, [{"key": KEY, "subagent": subagent}])
    assert res.errors == []
    assert res.outputs == [{"cancelled": True, "success": False}]
    if subagent == "pubsub":
        assert (probes["submit"], probes["cancel"]) == (1, 1)  # one request per handle


def test_cancel_then_call_scenarios_give_each_call_its_own_result():
    res = run(rda.cancel_then_call(), [
        {"key": s, "subagent": s, "await": a} for s in ("pubsub", "remote", "child")
        for a in (True, False)])
    assert res.errors == []
    assert len(res.outputs) == 6
    for out in res.outputs:
        assert (out["after"], out["again"], out["cancelled"]) == ("done-after", "done-again",
                                                                 True)


# -- neighbour: a recorded failure is rebuilt as it was raised --------------------------------
class Refused(Exception):
    """An exception whose constructor takes two arguments."""

    def __init__(self, code: int, why: str) -> None:
        super().__init__(f"{code}: {why}")
        self.code = code


def raises(kind: str) -> None:
    from flink_agents_py.api import ProviderError

    if kind == "key":
        raise KeyError("sku-1")
    if kind == "provider":
        raise ProviderError("rate limited", status_code=429, retryable=True)
    raise Refused(7, "not today")


class CatchesFailures(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        seen = []
        for kind in ("key", "provider", "custom"):                # c0-c2
            try:
                await ctx.durable_execute_async(raises, kind)
            except Exception as e:  # noqa: BLE001
                seen.append([type(e).__name__, str(e), list(e.args),
                             getattr(e, "status_code", None), getattr(e, "code", None)])
        await ctx.durable_execute_async(gated, "g")               # c3
        ctx.send_event(OutputEvent(output=seen))


@pytest.mark.parametrize("how", ["deepcopy", "json"])
def test_a_recorded_failure_replays_with_its_type_args_and_attributes(how):
    gate().set()
    [live] = run(CatchesFailures(), [{"key": KEY}]).outputs
    gate().clear()
    plan = AgentPlan.from_agent(CatchesFailures())
    core = new_core(plan)
    try:
        state = InMemoryKeyState()
        core.on_input(KEY, {"key": KEY}, state)
        drive_until(core, state, quiet=True,
                    done=lambda s: (c := call_of(s, "go", 3)) is not None and not c.done)
        snap = snapshot_of(state, how)  # type: ignore[arg-type]
    finally:
        gate().set()
        core.close()
    outputs, errors, _ = resume(plan, snap)
    assert errors == [] and outputs == [live]
    assert live == [["KeyError", "'sku-1'", ["sku-1"], None, None],
                    ["ProviderError", "rate limited (status 429)", ["rate limited (status 429)"],
                     429, None],
                    ["Refused", "7: not today", ["7: not today"], None, 7]]


def test_result_as_reads_a_json_result_as_a_type():
    r = SubagentResult.ok({"score": 4, "label": "good"})
    assert r.result_as(rda.Verdict) == rda.Verdict(score=4, label="good")
    assert SubagentResult.ok([1, "2"]).result_as(list[int]) == [1, 2]
    with pytest.raises(ValueError, match="no result"):
        SubagentResult.error("boom").result_as(rda.Verdict)


VAGUE_YAML = """\
agents:
  - name: orch
    actions:
      - name: start
        function: support.yaml_helpers:start
        on: [InputEvent]
    chat_model_connections:
      - name: conn
        clazz: flink_agents_py.integrations.chat_models.ScriptedChatModel
        function: support.yaml_helpers:script
    chat_model_setups:
      - name: om
        connection: conn
        subagents: [vague]
    subagents:
      - name: vague
        agent: child
  - name: child
    actions:
      - name: tag
        function: support.yaml_helpers:child_start
        on: [InputEvent]
"""


def test_yaml_subagent_without_input_shape_fails_when_loaded(tmp_path):
    from flink_agents_py.yaml import YamlError, load_agent

    path = tmp_path / "agents.yaml"
    path.write_text(VAGUE_YAML)
    with pytest.raises(YamlError, match="'vague'") as e:
        load_agent(path, name="orch")
    assert "input_schema" in str(e.value)
    # the remedy: an explicit schema
    path.write_text(VAGUE_YAML.replace(
        "        agent: child\n",
        "        agent: child\n        input_schema: {type: object}\n"))
    AgentPlan.from_agent(load_agent(path, name="orch"))
