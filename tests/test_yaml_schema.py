"""The YAML format has one definition: the models. The schema file is generated from them and
agrees with the loader; pydantic's error locations land on the right lines."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from flink_agents_py.yaml import SCHEMA_PATH, YamlError, load_agents
from flink_agents_py.yaml._specs import SUBAGENT_KINDS, DocumentSpec
from flink_agents_py.yaml.schema import json_schema, render

pytestmark = pytest.mark.timeout(120)

REGENERATE = "python -m flink_agents_py.yaml.schema > flink_agents_py/yaml/agents.schema.json"


def problems(text: str) -> list[str]:
    with pytest.raises(YamlError) as info:
        load_agents(textwrap.dedent(text))
    return info.value.problems


# --------------------------------------------------------------------------- the schema file


def test_committed_schema_is_generated_from_the_models():
    assert SCHEMA_PATH.read_text() == render(), f"the schema file is stale; run: {REGENERATE}"


def _models(root: type) -> set[type]:
    from pydantic import BaseModel

    from flink_agents_py.yaml._validate import _unwrap

    seen: set[type] = set()
    todo = [root]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for info in model.model_fields.values():
            stack = [info.annotation]
            while stack:
                t = _unwrap(stack.pop())
                if isinstance(t, dict):
                    stack.extend(t.values())
                elif isinstance(t, type) and issubclass(t, BaseModel):
                    todo.append(t)
                else:
                    stack.extend(getattr(t, "__args__", ()))
    return seen


def test_every_model_is_frozen_and_only_class_entries_take_other_keys():
    models = _models(DocumentSpec)
    assert len(models) >= 10
    for model in models:
        assert model.model_config.get("frozen") is True, model
        # Other keys are allowed exactly where they are the fields of the class ``clazz`` names.
        allows = model.model_config.get("extra") == "allow"
        assert allows == ("clazz" in model.model_fields), model
        if not allows:
            assert model.model_config.get("extra") == "forbid", model


def test_subagent_kinds_table_makes_the_union_and_its_schema():
    schema = json_schema()
    one_of = schema["properties"]["subagents"]["items"]["oneOf"]
    assert [ref["$ref"].rsplit("/", 1)[-1] for ref in one_of] == [
        model.__name__ for _, model in SUBAGENT_KINDS.values()]
    assert [key for key, _ in SUBAGENT_KINDS.values()] == ["agent", "clazz"]
    from flink_agents_py.yaml._specs import SubagentEntry
    from flink_agents_py.yaml._validate import _unwrap

    assert _unwrap(SubagentEntry) == {tag: model for tag, (_, model) in SUBAGENT_KINDS.items()}


AGREE = [
    ("minimal", "agents: [{name: a, actions: [{name: go, function: 'm:f', on: InputEvent}]}]",
     True),
    ("full resources", """\
     subagents:
       - {name: r, clazz: m.Setup, endpoint: x, input_schema: '{"type": "object"}'}
     agents:
       - name: a
         type: python
         config: {k: 1}
         actions: [{name: go, function: 'm:f', on: [InputEvent, m.Done], config: {b: 1}}]
         chat_model_connections: [{name: c, clazz: m.Conn, anything: 1}]
         chat_model_setups: [{name: s, connection: c, tools: [t], max_tool_rounds: 2}]
         prompts:
           - {name: p, text: hi, role: user}
           - {name: q, messages: [{role: system, content: x}, {content: y}]}
         tools: [{name: t, function: 'm:t', description: d}]
         mcp_servers: [{name: f, clazz: m.Files, root: /}]
         subagents: [{name: c2, agent: b, input_schema: {type: object}}]
     """, True),
    ("unknown document key", "version: 2\nagents: [{name: a}]", False),
    ("no agents key", "subagents: []", False),
    ("empty agents", "agents: []", False),
    ("unknown agent key", "agents: [{name: a, colour: blue}]", False),
    ("type java", "agents: [{name: a, type: java}]", False),
    ("empty name", "agents: [{name: ''}]", False),
    ("action without on", "agents: [{name: a, actions: [{name: go, function: 'm:f'}]}]", False),
    ("action with no trigger", "agents: [{name: a, actions: [{name: g, function: 'm:f', on: []}]}]",
     False),
    ("function with dots", "agents: [{name: a, actions: [{name: g, function: m.f, on: X}]}]",
     False),
    ("clazz with a colon", "agents: [{name: a, mcp_servers: [{name: f, clazz: 'm:F'}]}]", False),
    ("prompt with both forms", "agents: [{name: a, prompts: [{name: p, text: x, messages: []}]}]",
     False),
    ("prompt with neither form", "agents: [{name: a, prompts: [{name: p}]}]", False),
    ("role without text", "agents: [{name: a, prompts: [{name: p, role: user, messages: []}]}]",
     False),
    ("bad role", "agents: [{name: a, prompts: [{name: p, messages: [{role: boss, content: x}]}]}]",
     False),
    ("sub-agent with both kinds",
     "agents: [{name: a, subagents: [{name: s, agent: a, clazz: m.S}]}]", False),
    ("sub-agent of no kind", "agents: [{name: a, subagents: [{name: s}]}]", False),
    ("internal sub-agent with a field",
     "agents: [{name: a, subagents: [{name: s, agent: a, x: 1}]}]", False),
    ("input schema as a list",
     "agents: [{name: a, subagents: [{name: s, agent: a, input_schema: [1]}]}]", False),
]


@pytest.mark.parametrize("text, valid", [(t, v) for _, t, v in AGREE], ids=[i for i, _, _ in AGREE])
def test_schema_and_models_agree(text, valid):
    jsonschema = pytest.importorskip("jsonschema")
    import yaml

    from flink_agents_py.yaml._nodes import _Loader  # YAML 1.2 booleans, as the loader reads

    data = yaml.load(textwrap.dedent(text), Loader=_Loader)
    schema = json.loads(SCHEMA_PATH.read_text())
    validator = jsonschema.validators.validator_for(schema)
    assert validator is jsonschema.Draft7Validator  # what editors read best
    validator.check_schema(schema)
    by_schema = not list(validator(schema).iter_errors(data))
    try:
        DocumentSpec.model_validate(data)
        by_models = True
    except ValueError:
        by_models = False
    assert (by_schema, by_models) == (valid, valid)


# --------------------------------------------------------------------------- error places


def test_places_stay_right_after_bad_entries_are_dropped():
    found = problems("""\
    agents:
      - not a mapping
      - name: a
        actions:
          - {name: x, on: InputEvent}
          - {name: y, function: "support.yaml_helpers:nope", on: InputEvent}
          - {name: z, function: "support.yaml_helpers:echo", on: [InputEvnt]}
    """)
    assert found[0] == ("<string>:2: agents[0]: an agent entry must be a mapping, "
                        "got 'not a mapping'")
    assert found[1] == "<string>:5: agents[1].actions[0]: an action entry needs 'function'"
    assert found[2].startswith("<string>:6: agents[1].actions[1].function: cannot import "
                               "'support.yaml_helpers:nope'")
    assert found[3].startswith("<string>:7: agents[1].actions[2].on[0]: 'InputEvnt' names no known "
                               "event type")
    assert len(found) == 4


def test_union_tags_never_show_and_missing_keys_point_at_their_entry():
    found = problems("""\
    agents:
      - name: a
        actions: [{name: go, function: "support.yaml_helpers:echo", on: InputEvent}]
        subagents:
          - {name: 1, clazz: support.yaml_helpers.RemoteReviewSetup}
          -
            agent: a
            description: no name
    """)
    assert found == [
        "<string>:5: agents[0].subagents[0].name: name must be a non-empty string, got 1 (int)",
        "<string>:7: agents[0].subagents[1]: an internal sub-agent entry needs 'name'",
    ]


def test_an_entry_with_a_bad_name_is_still_checked():
    found = problems("""\
    agents:
      - name: [x]
        actions: [{name: go, function: "support.yaml_helpers:nope", on: InputEvent}]
    """)
    assert found[0] == "<string>:2: agents[0].name: name must be a non-empty string, got a list"
    assert found[1].startswith("<string>:3: agents[0].actions[0].function: cannot import")
    assert len(found) == 2


def test_names_of_dropped_entries_still_count_as_declared():
    found = problems("""\
    agents:
      - name: a
        actions: [{name: go, function: "support.yaml_helpers:echo", on: InputEvent}]
        chat_model_connections:
          - {name: c, clazz: "bad:path"}
        tools:
          - {name: t, function: bad.path}
        chat_model_setups:
          - {name: m, connection: c, tools: [t, u]}
    """)
    assert len(found) == 3, found
    assert "use dots" in found[0] and "'module:qualname'" in found[1]
    assert found[2].startswith(
        "<string>:9: agents[0].chat_model_setups[0].tools[1]: names tool 'u'")


def test_a_key_without_a_value_is_an_absent_optional_key():
    agents = load_agents(textwrap.dedent("""\
    agents:
      - name: a
        type:
        config:
        actions: [{name: go, function: "support.yaml_helpers:echo", on: InputEvent, config: }]
        tools:
          - {name: t, function: "support.yaml_helpers:lookup", description: }
    """))
    assert list(agents) == ["a"]
    assert problems("agents:\n") == ["<string>:1: agents: the document declares no agent"]


# --------------------------------------------------------------------------- as a user runs it


def test_a_user_module_and_document_from_outside_the_repository(tmp_path):
    (tmp_path / "shop_agents.py").write_text(textwrap.dedent("""\
        from flink_agents_py.api import OutputEvent

        def shout(event, ctx):
            ctx.send_event(OutputEvent(output=event.input["word"].upper()))
        """))
    (tmp_path / "agents.yaml").write_text(textwrap.dedent("""\
        # yaml-language-server: $schema=agents.schema.json
        agents:
          - name: shouter
            actions: [{name: shout, function: "shop_agents:shout", on: InputEvent}]
        """))
    (tmp_path / "broken.yaml").write_text(textwrap.dedent("""\
        agents:
          - name: shouter
            actions:
              - {name: shout, function: "shop_agents:shout", listen: InputEvent}
        """))
    (tmp_path / "run.py").write_text(textwrap.dedent("""\
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.yaml import YamlError, load_agent

        agent = load_agent("agents.yaml")
        env = AgentsExecutionEnvironment.local()
        print(env.from_list([{"key": "k", "word": "hi"}]).apply(agent).run().outputs)
        try:
            load_agent("broken.yaml")
        except YamlError as e:
            print(e)
        """))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "run.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr
    assert "['HI']" in proc.stdout
    assert "broken.yaml:4: agents[0].actions[0].listen: unknown key 'listen'" in proc.stdout
    assert "broken.yaml:4: agents[0].actions[0]: an action entry needs 'on'" in proc.stdout

    schema = subprocess.run([sys.executable, "-m", "flink_agents_py.yaml.schema"], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=90)
    assert schema.returncode == 0 and schema.stderr == "", schema.stderr
    assert schema.stdout == SCHEMA_PATH.read_text()


def test_the_schema_command_answers_help_and_refuses_unknown_arguments(tmp_path):
    # before: every argument was ignored, so --help printed the whole schema
    env = {**os.environ, "PYTHONPATH": str(pathlib.Path(__file__).resolve().parents[1])}

    def command(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "flink_agents_py.yaml.schema", *args],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90)

    helped = command("--help")
    assert helped.returncode == 0 and helped.stdout.startswith(
        "usage: python -m flink_agents_py.yaml.schema"), helped.stdout[:300]
    assert "JSON Schema of agents YAML documents" in helped.stdout
    wrong = command("out.json")
    assert wrong.returncode == 2 and "unrecognized arguments: out.json" in wrong.stderr
    assert command().stdout == SCHEMA_PATH.read_text()
