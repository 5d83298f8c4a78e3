"""ReActAgent: reason -> act -> observe until an answer or the bound, on both runners."""

from __future__ import annotations

import json

import pytest
from support import react_agents as ra

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.agents import ReActAgent
from flink_agents_py.api import (
    ChatModelSetup,
    ResourceDescriptor,
    ResourceType,
)
from flink_agents_py.testing import (
    ScriptedRequest,
    check_replay_safety,
    model_from_function,
    tool_call,
    tool_calls,
)


def _run(agent, records):
    job = AgentsExecutionEnvironment.local().from_list(records).apply(agent)
    return job.collect(), job.result.errors


def test_loops_through_a_tool_to_a_structured_answer():
    outputs, errors = _run(ra.build_react(), [{"key": "a", "a": 2, "b": 3, "mode": ""},
                                              {"key": "b", "a": 40, "b": 2, "mode": ""}])
    assert errors == []
    # keys a and b run side by side on the local runner: their outputs come in either order
    assert sorted(outputs, key=lambda t: t.total) == [ra.Total(total=5), ra.Total(total=42)]


def test_a_model_that_never_answers_fails_its_record_with_a_named_error_and_the_job_goes_on():
    outputs, errors = _run(ra.build_react(max_iterations=2), [
        {"key": "a", "a": 1, "b": 1, "mode": " forever"}, {"key": "b", "a": 1, "b": 2, "mode": ""}])
    assert outputs == [ra.Total(total=3)]
    assert [(e.key, e.action, e.error_type) for e in errors] == [("a", "start_action",
                                                                  "ReActAgentError")]
    assert "max_iterations=2" in errors[0].message and "max_tool_rounds" in errors[0].message


def test_the_schema_instruction_follows_the_prompt_system_message():
    seen: list[list[tuple[str, str]]] = []

    def script(req: ScriptedRequest) -> object:
        seen.append([(m.role, m.content[:30]) for m in req.messages])
        return {"total": 1}

    agent = ra.build_react()
    agent.override_resource("conn", model_from_function(script))
    outputs, _ = _run(agent, [{"key": "a", "a": 0, "b": 1, "mode": ""}])
    assert outputs == [ra.Total(total=1)]
    assert [r for r, _ in seen[0]] == ["system", "system", "user"]
    assert seen[0][1][1].startswith("The final response should be")


def test_primitive_input_without_prompt_is_the_user_message_and_text_is_the_answer():
    agent = ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="conn"))
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       model_from_function(lambda r: f"echo:{r.last_user_text}"))
    outputs, errors = _run(agent, ["hello", 7])
    assert errors == [] and outputs == ["echo:hello", "echo:7"]


def test_a_text_prompt_is_the_users_message_as_in_flink_agents():
    # Flink Agents' start_action: prompt.format_messages(role=MessageRole.USER, ...); a model
    # given only a system message (Anthropic refuses that) got the question as one before
    from flink_agents_py.api import Prompt

    def roles(r: ScriptedRequest) -> str:
        return " ".join(f"{m.role}:{m.content}" for m in r.messages)

    for prompt, value in [(Prompt.from_text("Q: {input}"), 42),
                          (Prompt.from_text("{a}-{b}"), {"key": "k", "a": 1, "b": "x"})]:
        agent = ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="conn"),
                           prompt=prompt)
        agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                           model_from_function(roles))
        outputs, errors = _run(agent, [value])
        assert errors == [] and outputs == ["user:Q: 42" if value == 42 else "user:1-x"]


def test_an_object_input_without_prompt_is_a_named_error():
    agent = ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="conn"))
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       model_from_function(lambda r: "x"))
    outputs, errors = _run(agent, [{"key": "k", "q": 1}, {"key": "j", "input": "fine"}])
    assert outputs == ["x"]
    assert errors[0].error_type == "ReActAgentError" and "no prompt" in errors[0].message


def test_react_agent_as_a_sub_agent_offered_as_a_tool():
    child = ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="child_conn"),
                       subagent_description="Answers questions about numbers.")
    child.add_resource("child_conn", ResourceType.CHAT_MODEL_CONNECTION,
                       model_from_function(lambda r: f"child says {r.last_user_text}"))

    def parent_script(req: ScriptedRequest) -> object:
        if not req.tool_results:
            assert [t.name for t in req.tools] == ["_subagent_helper"]
            return tool_calls(tool_call("_subagent_helper", input="what is 6*7"))
        return f"parent heard {req.tool_results[-1].content}"

    parent = ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="conn"),
                        subagents={"helper": child.as_subagent()})
    parent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                        model_from_function(parent_script))
    outputs, errors = _run(parent, ["go"])
    assert errors == []
    assert outputs == [f"parent heard {json.dumps(['child says what is 6*7'])}"]


def test_replay_safe_at_every_checkpoint_point():
    report = check_replay_safety(ra.build_react(), [
        {"key": "a", "a": 2, "b": 3, "mode": ""}, {"key": "b", "a": 1, "b": 1, "mode": " forever"}])
    report.assert_ok()


def test_bad_configuration_is_a_type_error():
    with pytest.raises(TypeError, match="ResourceDescriptor"):
        ReActAgent(chat_model="model")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="output_schema"):
        ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="c"),
                   output_schema=int)  # type: ignore[arg-type]


def test_compat_environment_applies_a_react_agent_with_environment_resources():
    from flink_agents_py.compat import AgentsExecutionEnvironment as FlinkAgentsEnv

    env = FlinkAgentsEnv.get_execution_environment()
    env.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ra.connection())
    agent = ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="conn",
                                                     tools=["add"]),
                       prompt="What is {a} + {b}?", output_schema=ra.Total)
    env.add_resource("add", ResourceType.TOOL, ra.add)
    out = env.from_list([{"key": 1, "value": {"a": 1, "b": 2}}]).apply(agent).to_list()
    env.execute()
    assert out == [{1: ra.Total(total=3)}]


@pytest.mark.flink
def test_react_agent_skills_and_string_event_types_on_a_minicluster(tmp_path):
    pytest.importorskip("pyflink")
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    from flink_agents_py.flink import create_stream_environment

    env = create_stream_environment()
    agents = AgentsExecutionEnvironment.flink(env)
    ds = env.from_source(NumberSequenceSource(0, len(ra.RECORDS) - 1),
                         WatermarkStrategy.no_watermarks(), "records").map(
        ra.record_of, output_type=Types.PICKLED_BYTE_ARRAY())
    react = agents.from_datastream(ds).apply(ra.build_react(max_iterations=2), name="react")
    tagged = agents.from_datastream(ds).apply(ra.StringTypes(), name="tags").to_datastream()
    skills = tmp_path / "skills" / "math"
    skills.mkdir(parents=True)
    (skills / "SKILL.md").write_text(ra.SKILL_MD)
    questions = env.from_source(NumberSequenceSource(0, 1), WatermarkStrategy.no_watermarks(),
                                "questions").map(ra.question_of,
                                                 output_type=Types.PICKLED_BYTE_ARRAY())
    skilled = agents.from_datastream(questions).apply(ra.build_skilled(str(skills)),
                                                      name="skilled").to_datastream()
    stream = react.to_datastream().union(react.errors_datastream(), tagged, skilled)
    with stream.execute_and_collect("react-and-string-types") as results:
        got = list(results)
    totals = sorted(o.total for o in got if isinstance(o, ra.Total))
    errors = [o for o in got if isinstance(o, dict) and "error_type" in o]
    tags = sorted((o["key"], o["tagged"], o["same_id"]) for o in got
                  if isinstance(o, dict) and "tagged" in o)
    assert totals == [5, 10]
    assert [(e["key"], e["error_type"]) for e in errors] == [("b", "ReActAgentError")]
    assert tags == [("a", 2, True), ("b", 1, True), ("c", 5, True)]
    answers = sorted(o for o in got if isinstance(o, str))
    assert answers == ['{"exit_code":0,"output":"12\\n"}', '{"exit_code":0,"output":"16\\n"}']


def test_a_json_schema_or_local_class_gives_the_validated_dict():
    class Local(ra.Total):
        pass

    for schema in (Local, {"type": "object", "properties": {"total": {"type": "integer"}},
                           "required": ["total"]}):
        agent = ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="conn"),
                           prompt="What is {a} + {b}?", output_schema=schema, tools=[ra.add])
        agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ra.connection())
        outputs, errors = _run(agent, [{"key": "a", "a": 1, "b": 1}])
        assert errors == [] and outputs == [{"total": 2}]


def test_an_agent_given_directly_as_an_agent_resource_is_an_internal_sub_agent():
    # Flink Agents' form: add_resource(name, ResourceType.AGENT, agent); the ReAct agent's
    # get_subagent_description / get_subagent_input_schema describe it to the caller
    child = ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="c"),
                       subagent_description="Echoes.")
    child.add_resource("c", ResourceType.CHAT_MODEL_CONNECTION,
                       model_from_function(lambda r: f"echo {r.last_user_text}"))
    seen = {}

    def script(req: ScriptedRequest) -> object:
        if not req.tool_results:
            seen["tools"] = {t.name: t.description for t in req.tools}
            return tool_calls(tool_call("_subagent_child", input="hi"))
        return req.tool_results[-1].content

    parent = ReActAgent(chat_model=ResourceDescriptor(ChatModelSetup, connection="c",
                                                      subagents=["child"]))
    parent.add_resource("child", ResourceType.AGENT, child)
    parent.add_resource("c", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(script))
    outputs, errors = _run(parent, ["go"])
    assert errors == [] and outputs == ['["echo hi"]']
    assert seen["tools"]["_subagent_child"].startswith("Echoes.")


def test_an_object_input_fills_the_prompt_with_each_value_as_str_gives_it():
    # Flink Agents fills a ReAct prompt from an object's fields with str(value); before,
    # non-strings went as JSON text (true, null, {"a": 1}), so a ported program's model was
    # asked other words than it was there
    from pydantic import BaseModel

    from flink_agents_py.agents.react import _user_messages
    from flink_agents_py.api import Prompt

    class Order(BaseModel):
        urgent: bool
        note: str | None
        items: dict

    prompt = Prompt.from_text("urgent={urgent} note={note} items={items} n={n}")
    [msg] = _user_messages({"urgent": True, "note": None, "items": {"a": 1}, "n": 2}, prompt)
    assert msg.content == "urgent=True note=None items={'a': 1} n=2"
    [msg] = _user_messages(Order(urgent=False, note="x", items={"b": 2}),
                           Prompt.from_text("urgent={urgent} note={note} items={items}"))
    assert msg.content == "urgent=False note=x items={'b': 2}"
