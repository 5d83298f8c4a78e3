"""The YAML loader: a full document runs on the local runner; every rejection names its line."""

from __future__ import annotations

import json
import pickle
import textwrap
from pathlib import Path

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import AgentsError, ChatModelSetup, ResourceType
from flink_agents_py.plan import AgentPlan
from flink_agents_py.yaml import SCHEMA_PATH, YamlAgent, YamlError, load_agent, load_agents

pytestmark = pytest.mark.timeout(60)

FULL = """\
subagents:
  - name: remote_reviewer
    clazz: support.yaml_helpers.RemoteReviewSetup
    description: Reviews code remotely
    input_schema: '{"type":"object","properties":{"diff":{"type":"string"}},"required":["diff"]}'
    endpoint: http://127.0.0.1:9000
agents:
  - name: orchestrator
    type: python
    config: {max_tool_rounds: 4, team: reviews}
    actions:
      - name: start
        function: support.yaml_helpers:start
        on: [InputEvent]
      - name: answered
        function: support.yaml_helpers:answered
        on: ChatResponseEvent
      - name: finish
        function: support.yaml_helpers:finish
        on: [ReviewDone]
        config: {bonus: 7}
    chat_model_connections:
      - name: conn
        clazz: flink_agents_py.integrations.chat_models.ScriptedChatModel
        function: support.yaml_helpers:script
    chat_model_setups:
      - name: review_model
        connection: conn
        prompt: p
        tools: [lookup]
        max_tool_rounds: 2
    prompts:
      - name: p
        text: "Review {product}"
      - name: chat_style
        messages:
          - {role: system, content: "You review {product}."}
          - {role: user, content: "Be brief."}
    tools:
      - name: lookup
        function: support.yaml_helpers:lookup
    mcp_servers:
      - {name: files, clazz: support.yaml_helpers.FileServer, root: /srv/data}
    subagents:
      - name: child
        agent: child_agent
        description: Tags a product
        input_schema: {type: object, properties: {product: {type: string}}}
  - name: child_agent
    actions:
      - name: tag
        function: support.yaml_helpers:child_start
        on: [InputEvent]
"""


def write(tmp_path: Path, text: str, name: str = "agents.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def line_of(path: Path, needle: str, nth: int = 1) -> int:
    """1-based line of the ``nth`` line of ``path`` containing ``needle``."""
    hits = [i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line]
    return hits[nth - 1]


def rejected(path: Path) -> YamlError:
    with pytest.raises(YamlError) as info:
        load_agents(path)
    return info.value


def assert_problem(err: YamlError, path: Path, line: int, *fragments: str) -> None:
    """Some problem names ``path``'s file and ``line`` and contains every fragment."""
    prefix = f"{path}:{line}: "
    matching = [p for p in err.problems if p.startswith(prefix)]
    assert matching, f"no problem at {prefix!r} in:\n{err}"
    assert any(all(f in p for f in fragments) for p in matching), (fragments, matching)
    assert path.name in str(err) and f"{path.name}:{line}:" in str(err)


def run(agent, records):
    return AgentsExecutionEnvironment.local().from_list(records).apply(agent).run()


# --------------------------------------------------------------------------- the happy path


def test_full_document_loads_and_runs(tmp_path):
    path = write(tmp_path, FULL)
    agents = load_agents(path)
    assert list(agents) == ["orchestrator", "child_agent"]
    orchestrator = agents["orchestrator"]
    assert isinstance(orchestrator, YamlAgent)
    assert orchestrator.source == f"{path}:{line_of(path, '- name: orchestrator')}"

    plan = AgentPlan.from_agent(orchestrator)
    assert plan.config == {"max_tool_rounds": 4, "team": "reviews"}
    assert plan.actions["finish"].config == {"bonus": 7}
    assert plan.actions["finish"].triggers == ("ReviewDone",)
    assert plan.actions["answered"].triggers == ("ChatResponseEvent",)
    assert set(plan.resources[ResourceType.AGENT]) == {"child", "remote_reviewer"}
    assert set(plan.subagents) == {"child"}
    child = plan.resources[ResourceType.AGENT]["child"].descriptor.arguments
    assert json.loads(child["input_schema"])["properties"] == {"product": {"type": "string"}}
    remote = plan.resources[ResourceType.AGENT]["remote_reviewer"].descriptor
    assert remote.clazz == "support.yaml_helpers.RemoteReviewSetup"
    assert remote.arguments["endpoint"] == "http://127.0.0.1:9000"
    mcp = plan.resources[ResourceType.MCP_SERVER]["files"].descriptor
    assert (mcp.clazz, mcp.arguments) == ("support.yaml_helpers.FileServer", {"root": "/srv/data"})
    assert AgentPlan.from_json(plan.to_json()).actions.keys() == plan.actions.keys()
    assert pickle.loads(pickle.dumps(plan)).subagents.keys() == {"child"}

    res = run(orchestrator, [{"key": "a", "product": "mug"}, {"key": "b", "product": "pen"}])
    assert res.errors == []
    assert sorted(res.outputs, key=lambda o: o["key"]) == [
        {"key": "a", "verdict": 'verdict for mug: sturdy, blue', "bonus": 7,
         "child": [{"tagged": "MUG"}]},
        {"key": "b", "verdict": 'verdict for pen: sturdy, blue', "bonus": 7,
         "child": [{"tagged": "PEN"}]},
    ]


def test_text_and_load_agent(tmp_path):
    text = textwrap.dedent(FULL)
    assert list(load_agents(text)) == ["orchestrator", "child_agent"]
    # One agent is nobody's sub-agent: that is the one load_agent picks.
    assert load_agent(text).name == "orchestrator"
    assert load_agent(write(tmp_path, FULL), name="child_agent").name == "child_agent"
    assert load_agent(str(write(tmp_path, FULL, "again.yml"))).name == "orchestrator"
    with pytest.raises(YamlError, match="no agent named 'nobody'"):
        load_agent(text, name="nobody")
    two = """\
    agents:
      - name: one
        actions: [{name: a, function: "support.yaml_helpers:echo", on: InputEvent}]
      - name: two
        actions: [{name: a, function: "support.yaml_helpers:echo", on: InputEvent}]
    """
    with pytest.raises(YamlError, match="pass name="):
        load_agent(textwrap.dedent(two))
    assert run(load_agent(textwrap.dedent(two), name="two"), [{"key": "k"}]).outputs == [
        {"key": "k", "echo": {"key": "k"}}]


def test_shared_subagents_are_visible_to_every_agent(tmp_path):
    path = write(tmp_path, """\
    subagents:
      - name: remote_reviewer
        clazz: support.yaml_helpers.RemoteReviewSetup
        description: shared
        endpoint: http://shared:1
    agents:
      - name: first
        actions: [{name: go, function: "support.yaml_helpers:call_shared", on: [InputEvent]}]
      - name: second
        actions: [{name: go, function: "support.yaml_helpers:call_shared", on: [InputEvent]}]
      - name: third
        actions: [{name: go, function: "support.yaml_helpers:call_shared", on: [InputEvent]}]
        subagents:
          - name: remote_reviewer
            clazz: support.yaml_helpers.RemoteReviewSetup
            endpoint: http://own:2
    """)
    agents = load_agents(path)
    for name in ("first", "second"):
        res = run(agents[name], [{"key": "k", "diff": "+x"}])
        assert res.errors == []
        assert res.outputs == [{"key": "k", "remote": {
            "reviewed": {"key": "k", "diff": "+x"}, "by": "http://shared:1"}}]
    # An agent's own entry of the same name wins over the shared one.
    res = run(agents["third"], [{"key": "k"}])
    assert res.outputs[0]["remote"]["by"] == "http://own:2"


def test_shared_internal_subagent_is_not_given_to_the_agent_it_names(tmp_path):
    path = write(tmp_path, """\
    subagents:
      - name: tagger
        agent: child_agent
    agents:
      - name: parent
        actions: [{name: go, function: "support.yaml_helpers:call_tagger", on: [InputEvent]}]
      - name: child_agent
        actions: [{name: tag, function: "support.yaml_helpers:child_start", on: [InputEvent]}]
    """)
    agents = load_agents(path)
    assert set(AgentPlan.from_agent(agents["parent"]).subagents) == {"tagger"}
    assert AgentPlan.from_agent(agents["child_agent"]).subagents == {}


@pytest.mark.skipif("subagents" not in ChatModelSetup.model_fields,
                    reason="ChatModelSetup declares no subagents field")
def test_chat_model_setup_subagents_pass_through_and_delegate(tmp_path):
    path = write(tmp_path, """\
    agents:
      - name: parent
        actions:
          - {name: ask, function: "support.yaml_helpers:ask_delegate", on: [InputEvent]}
          - {name: reply, function: "support.yaml_helpers:reply", on: [ChatResponseEvent]}
        chat_model_connections:
          - name: conn
            clazz: flink_agents_py.integrations.chat_models.ScriptedChatModel
            function: support.yaml_helpers:delegate_script
        chat_model_setups:
          - name: delegating_model
            connection: conn
            subagents: [child]
        subagents:
          - name: child
            agent: child_agent
            input_schema: {type: object, properties: {product: {type: string}}}
      - name: child_agent
        actions: [{name: tag, function: "support.yaml_helpers:child_start", on: [InputEvent]}]
    """)
    parent = load_agents(path)["parent"]
    setup = AgentPlan.from_agent(parent).resources[ResourceType.CHAT_MODEL]["delegating_model"]
    assert setup.descriptor.arguments["subagents"] == ["child"]
    res = run(parent, [{"key": "k", "product": "cup"}])
    assert res.errors == []
    assert len(res.outputs) == 1 and "CUP" in res.outputs[0]["answer"], res.outputs


@pytest.mark.skipif("subagents" in ChatModelSetup.model_fields,
                    reason="ChatModelSetup declares a subagents field")
def test_chat_model_setup_subagents_rejected_without_the_field(tmp_path):
    path = write(tmp_path, """\
    agents:
      - name: parent
        chat_model_connections:
          - {name: conn, clazz: flink_agents_py.integrations.chat_models.ScriptedChatModel}
        chat_model_setups:
          - name: m
            connection: conn
            subagents: [child]
    """)
    err = rejected(path)
    assert_problem(err, path, line_of(path, "subagents: [child]"),
                   "chat_model_setups[0].subagents", "declares no 'subagents' field")


def test_json_schema_validates_the_example_document():
    jsonschema = pytest.importorskip("jsonschema")
    import yaml

    from flink_agents_py.yaml._loader import _Loader  # YAML 1.2 booleans: `on` is a string

    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.validate(yaml.load(textwrap.dedent(FULL), Loader=_Loader), schema)
    bad = yaml.load("agents: [{name: a, type: java, colour: blue}]", Loader=_Loader)
    assert len(list(jsonschema.Draft7Validator(schema).iter_errors(bad))) == 2


def test_schema_is_package_data():
    assert SCHEMA_PATH.name == "agents.schema.json" and SCHEMA_PATH.is_file()
    import flink_agents_py.yaml as package

    assert SCHEMA_PATH.parent == Path(package.__file__).parent


# --------------------------------------------------------------------------- rejections


def test_type_java_is_rejected(tmp_path):
    path = write(tmp_path, """\
    agents:
      - name: a
        actions: [{name: go, function: "support.yaml_helpers:echo", on: [InputEvent]}]
        chat_model_connections:
          - name: conn
            type: java
            clazz: org.apache.flink.agents.OllamaChatModelConnection
        tools:
          - {name: t, type: Python, function: "support.yaml_helpers:lookup"}
    """)
    err = rejected(path)
    assert_problem(err, path, line_of(path, "type: java"),
                   "chat_model_connections[0].type", "'java' is not supported", "python")
    assert isinstance(err, AgentsError)
    assert not any("tools" in p for p in err.problems)  # type: Python is fine


@pytest.mark.parametrize("clazz, fragment", [
    ("flink_agents_py.integrations.chat_models:ScriptedChatModel", "use dots"),
    ("ScriptedChatModel", "fully-qualified dotted class path"),
    ("support.yaml_helpers.NoSuchClass", "cannot import"),
    ("no_such_module_xyz.Conn", "cannot import"),
    ("support.yaml_helpers.lookup", "is not a class"),
    ("support.yaml_helpers.RemoteReviewSetup", "not a ChatModelConnection subclass"),
])
def test_bad_clazz_is_rejected(tmp_path, clazz, fragment):
    path = write(tmp_path, f"""\
    agents:
      - name: a
        chat_model_connections:
          - name: conn
            clazz: {clazz}
    """)
    assert_problem(rejected(path), path, line_of(path, "clazz:"),
                   "agents[0].chat_model_connections[0].clazz", fragment)


def test_unknown_keys_are_rejected_with_the_allowed_keys(tmp_path):
    path = write(tmp_path, """\
    agents:
      - name: a
        colour: blue
        actions:
          - name: go
            function: support.yaml_helpers:echo
            on: [InputEvent]
            trigger: sometimes
        chat_model_connections:
          - name: conn
            clazz: flink_agents_py.integrations.chat_models.ScriptedChatModel
            functon: support.yaml_helpers:script
    version: 2
    """)
    err = rejected(path)
    assert_problem(err, path, line_of(path, "colour:"), "agents[0].colour", "unknown key",
                   "allowed keys: name, type, config, actions")
    assert_problem(err, path, line_of(path, "trigger:"), "agents[0].actions[0].trigger",
                   "allowed keys: name, type, function, on, config")
    assert_problem(err, path, line_of(path, "functon:"), "unknown key 'functon'",
                   "ScriptedChatModel", "function")
    assert_problem(err, path, line_of(path, "version:"), "unknown key 'version'")
    assert len(err.problems) == 4


def test_missing_or_bad_action_function_is_rejected(tmp_path):
    path = write(tmp_path, """\
    agents:
      - name: a
        actions:
          - name: missing
            function: support.yaml_helpers:no_such_function
            on: [InputEvent]
          - name: no_function
            on: [InputEvent]
          - name: one_argument
            function: support.yaml_helpers:not_an_action
            on: [InputEvent]
          - name: dotted
            function: support.yaml_helpers.echo
            on: [InputEvent]
          - name: not_callable
            function: support.yaml_helpers:NOT_CALLABLE
            on: [InputEvent]
    """)
    err = rejected(path)
    assert_problem(err, path, line_of(path, "no_such_function"),
                   "actions[0].function", "cannot import 'support.yaml_helpers:no_such_function'")
    assert_problem(err, path, line_of(path, "name: no_function"),
                   "actions[1]", "needs 'function'")
    assert_problem(err, path, line_of(path, "not_an_action"), "must take (event, ctx)")
    assert_problem(err, path, line_of(path, "support.yaml_helpers.echo"), "'module:qualname'",
                   "'my_app.module:function'")
    assert_problem(err, path, line_of(path, "NOT_CALLABLE"), "is not callable")
    assert len(err.problems) == 5


def test_a_trigger_close_to_a_known_type_is_rejected(tmp_path):
    # a name no event class has is a type of the program's own (as Flink Agents' loader
    # passes it through); one a letter off a known type is taken for a typo
    path = write(tmp_path, """\
    agents:
      - name: a
        actions:
          - name: go
            function: support.yaml_helpers:echo
            on:
              - InputEvent
              - InputEvnt
          - name: by_path
            function: support.yaml_helpers:echo
            on: support.yaml_helpers.ReviewDone
          - name: none
            function: support.yaml_helpers:echo
            on: []
    """)
    err = rejected(path)
    assert_problem(err, path, line_of(path, "- InputEvnt"), "agents[0].actions[0].on[1]",
                   "'InputEvnt' names no known event type", "close to 'InputEvent'")
    assert_problem(err, path, line_of(path, "on: []"), "at least one trigger")
    assert len(err.problems) == 2  # a dotted Event class path is a known type


def test_duplicate_names_are_rejected(tmp_path):
    path = write(tmp_path, """\
    subagents:
      - {name: r, clazz: support.yaml_helpers.RemoteReviewSetup}
      - {name: r, clazz: support.yaml_helpers.RemoteReviewSetup}
    agents:
      - name: a
        actions:
          - {name: go, function: "support.yaml_helpers:echo", on: [InputEvent]}
          - {name: go, function: "support.yaml_helpers:echo", on: [InputEvent]}
        tools:
          - {name: t, function: "support.yaml_helpers:lookup"}
          - {name: t, function: "support.yaml_helpers:lookup"}
      - name: a
        config: {x: 1, x: 2}
    """)
    err = rejected(path)
    assert_problem(err, path, line_of(path, "{name: r,", 2), "subagents[1].name",
                   "duplicate sub-agent name 'r'", f"line {line_of(path, '{name: r,')}")
    assert_problem(err, path, line_of(path, "{name: go,", 2), "actions[1].name",
                   "duplicate action name 'go'")
    assert_problem(err, path, line_of(path, "{name: t,", 2), "tools[1].name",
                   "duplicate tool name 't'")
    assert_problem(err, path, line_of(path, "- name: a", 2), "agents[1].name",
                   "duplicate agent name 'a'")
    assert_problem(err, path, line_of(path, "x: 2"), "duplicate key 'x'")


def test_internal_subagent_cycle_is_rejected(tmp_path):
    path = write(tmp_path, """\
    agents:
      - name: a
        actions: [{name: go, function: "support.yaml_helpers:echo", on: [InputEvent]}]
        subagents:
          - name: to_b
            agent: b
      - name: b
        actions: [{name: go, function: "support.yaml_helpers:echo", on: [InputEvent]}]
        subagents:
          - name: to_a
            agent: a
      - name: self_ref
        subagents:
          - {name: me, agent: self_ref}
      - name: c
        subagents:
          - {name: to_a, agent: a}
    """)
    err = rejected(path)
    assert_problem(err, path, line_of(path, "- name: to_a"), "agents[1].subagents[0]",
                   "internal sub-agent cycle: a -> b -> a")
    assert_problem(err, path, line_of(path, "{name: me,"), "cycle: self_ref -> self_ref")
    assert len(err.problems) == 2  # c only reaches the cycle: nothing more to report


def test_non_subagent_setup_clazz_under_subagents_is_rejected(tmp_path):
    path = write(tmp_path, """\
    subagents:
      - name: shared_bad
        clazz: support.yaml_helpers.NotASetup
    agents:
      - name: a
        subagents:
          - name: conn_as_agent
            clazz: flink_agents_py.integrations.chat_models.ScriptedChatModel
          - name: internal_by_clazz
            clazz: flink_agents_py.api.InternalSubagent
          - name: both
            agent: a
            clazz: support.yaml_helpers.RemoteReviewSetup
          - name: nowhere
            agent: no_such_agent
          - name: bad_schema
            clazz: support.yaml_helpers.RemoteReviewSetup
            input_schema: "{not json"
    """)
    err = rejected(path)
    assert_problem(err, path, line_of(path, "support.yaml_helpers.NotASetup"), "subagents[0].clazz",
                   "NotASetup is not a SubagentSetup subclass")
    assert_problem(err, path, line_of(path, "chat_models.ScriptedChatModel"),
                   "agents[0].subagents[0].clazz", "not a SubagentSetup subclass")
    assert_problem(err, path, line_of(path, "api.InternalSubagent"), "declared with 'agent:'")
    assert_problem(err, path, line_of(path, "- name: both"), "not both")
    assert_problem(err, path, line_of(path, "no_such_agent"), "names no agent of this document")
    assert_problem(err, path, line_of(path, "{not json"), "input_schema is not valid JSON")


def test_resource_references_and_fields_are_checked(tmp_path):
    path = write(tmp_path, """\
    agents:
      - name: a
        chat_model_connections:
          - name: conn
            clazz: flink_agents_py.integrations.chat_models.ScriptedChatModel
            rules: [{when: 3}]
        chat_model_setups:
          - name: m
            connection: nope
            tools: [lookup, missing]
            tool_dispatch: sometimes
        tools:
          - {name: lookup, function: "support.yaml_helpers:lookup"}
          - {name: _subagent_x, function: "support.yaml_helpers:lookup"}
        prompts:
          - {name: p, text: hi, messages: []}
          - name: q
            messages: [{role: boss, content: hi}]
    """)
    err = rejected(path)
    assert_problem(err, path, line_of(path, "rules:"), "rules[0].when", "valid string")
    assert_problem(err, path, line_of(path, "connection: nope"),
                   "names connection 'nope'", "conn")
    assert_problem(err, path, line_of(path, "tools: [lookup, missing]"), "tools[1]",
                   "names tool 'missing'")
    assert_problem(err, path, line_of(path, "tool_dispatch"), "tool_dispatch")
    assert_problem(err, path, line_of(path, "_subagent_x"), "reserved prefix")
    assert_problem(err, path, line_of(path, "{name: p,"), "exactly one of 'text' or 'messages'")
    assert_problem(err, path, line_of(path, "role: boss"), "prompts[1].messages[0].role")


def test_plan_problems_name_the_agent_and_its_line(tmp_path):
    path = write(tmp_path, """\
    agents:
      - name: ok
        actions: [{name: go, function: "support.yaml_helpers:echo", on: [InputEvent]}]
      - name: parent
        actions: [{name: go, function: "support.yaml_helpers:echo", on: [InputEvent]}]
        subagents:
          - {name: broken, agent: "support.yaml_helpers:BrokenAgent"}
    """)
    err = rejected(path)
    assert_problem(err, path, line_of(path, "- name: parent"), "agents[1]",
                   "agent 'parent' does not compile", "sub-agent 'broken'",
                   "must take (event, ctx)")
    assert len(err.problems) == 1


def test_invalid_yaml_names_its_line(tmp_path):
    path = write(tmp_path, "agents:\n  - name: a\n    actions: [\n  - x: {\n")
    err = rejected(path)
    assert err.problems and err.problems[0].startswith(f"{path}:")
    assert "not valid YAML" in str(err)
    with pytest.raises(YamlError, match="agents"):
        load_agents("{}\n")
    with pytest.raises(YamlError, match="no agent"):
        load_agents("agents: []\n")


def test_yes_no_on_off_are_strings():
    text = """\
    agents:
      - name: a
        config: {mode: on, enabled: true}
        actions: [{name: go, function: "support.yaml_helpers:echo", on: [InputEvent]}]
    """
    plan = AgentPlan.from_agent(load_agent(textwrap.dedent(text)))
    assert plan.config == {"mode": "on", "enabled": True}


def test_anchors_and_merge_keys(tmp_path):
    path = write(tmp_path, """\
    agents:
      - name: a
        actions:
          - &echo {name: go, function: "support.yaml_helpers:echo", on: [InputEvent]}
          - <<: *echo
            name: again
        chat_model_connections:
          - &conn
            name: c1
            clazz: flink_agents_py.integrations.chat_models.ScriptedChatModel
            default_reply: hi
          - <<: *conn
            name: c2
            colour: red
    """)
    err = rejected(path)
    assert_problem(err, path, line_of(path, "colour: red"), "chat_model_connections[1].colour")
    assert len(err.problems) == 1
    path.write_text("".join(line for line in path.read_text().splitlines(keepends=True)
                            if "colour" not in line))
    plan = AgentPlan.from_agent(load_agent(path))
    assert set(plan.actions) >= {"go", "again"}
    conns = plan.resources[ResourceType.CHAT_MODEL_CONNECTION]
    assert conns["c2"].descriptor.arguments == {"default_reply": "hi"}


def test_type_java_on_a_shared_subagent_keeps_agents_from_compiling(tmp_path):
    path = write(tmp_path, """\
    subagents:
      - name: remote
        type: java
        clazz: support.yaml_helpers.RemoteReviewSetup
    agents:
      - name: a
        actions: [{name: go, function: "support.yaml_helpers:call_shared", on: [InputEvent]}]
    """)
    err = rejected(path)
    assert_problem(err, path, line_of(path, "type: java"), "subagents[0].type", "'java'")
    assert len(err.problems) == 1


@pytest.mark.skipif("subagents" not in ChatModelSetup.model_fields,
                    reason="ChatModelSetup declares no subagents field")
def test_chat_model_setup_subagents_must_be_declared(tmp_path):
    path = write(tmp_path, """\
    subagents:
      - {name: shared, clazz: support.yaml_helpers.RemoteReviewSetup}
    agents:
      - name: a
        chat_model_connections:
          - {name: conn, clazz: flink_agents_py.integrations.chat_models.ScriptedChatModel}
        chat_model_setups:
          - name: m
            connection: conn
            subagents: [shared, ghost]
    """)
    err = rejected(path)
    assert_problem(err, path, line_of(path, "[shared, ghost]"), "chat_model_setups[0].subagents[1]",
                   "names sub-agent 'ghost'", "subagents: shared")
    assert len(err.problems) == 1
