"""Mistakes in an agents document that passed, and are now named at their line."""

from __future__ import annotations

import pytest

from flink_agents_py.yaml import YamlError, load_agents, read_yaml

HEAD = """\
agents:
  - name: a
    actions:
      - {name: go, function: "support.yaml_helpers:start", on: [InputEvent]}
"""


@pytest.mark.parametrize(("pair", "written", "first", "reads"), [
    ("{1: x, 01: y}", "01", "1", "1 (int)"),
    ("{null: x, ~: y}", "~", "null", "nothing"),
    ("{1: x, true: y}", "true", "1", "True (bool)"),
    ("{0x10: x, 16: y}", "16", "0x10", "16 (int)"),
])
def test_two_keys_written_differently_that_read_as_one_are_a_duplicate(pair, written, first,
                                                                       reads):
    """Duplicates were found by the key's text only: ``{1: x, 01: y}`` read as ``{1: 'y'}``
    and ``x`` was lost without a word."""
    with pytest.raises(YamlError) as info:
        read_yaml(f"a:\n  b: {pair}\n", "doc.yaml")
    assert info.value.problems == [
        f"doc.yaml:2: a.b.{written}: duplicate key: {written!r} reads as {reads}, as "
        f"{first!r} at line 2 does, so one value would replace the other; keep one of them"]
    with pytest.raises(YamlError, match=rf"<string>:5: agents\[0\]\.config\.b\.{written}: "
                                        r"duplicate key"):
        load_agents(f"{HEAD}    config: {{b: {pair}}}\n")


def test_a_merge_key_overridden_by_the_mapping_is_not_a_duplicate():
    assert read_yaml("b: &b {x: 1}\na: {<<: *b, x: 2}\n") == {"b": {"x": 1}, "a": {"x": 2}}
    assert read_yaml("a: {1: x, '2': y, 3.5: z}\n") == {"a": {1: "x", "2": "y", 3.5: "z"}}


@pytest.mark.parametrize("cls", ["support.yaml_helpers:ReviewDone",
                                 "flink_agents_py.api:InputEvent"])
def test_an_action_naming_an_event_class_is_refused_at_its_function(cls):
    """An ``Event`` class takes ``*args``, so it passed the ``(event, ctx)`` check, and every
    record failed at run time with ``ReviewDone() takes at most 0 positional argument(s)``."""
    with pytest.raises(YamlError) as info:
        load_agents(HEAD.replace("support.yaml_helpers:start", cls))
    assert info.value.problems == [
        f"<string>:4: agents[0].actions[0].function: {cls!r} is a class, not a function: name "
        f"the function taking (event, ctx) that the action runs"]



def test_a_tool_name_that_is_not_a_string_is_one_problem():
    doc = HEAD + """\
    chat_model_connections:
      - {name: c, clazz: flink_agents_py.integrations.chat_models.ScriptedChatModel,
         function: "support.yaml_helpers:script"}
    chat_model_setups:
      - {name: m, connection: c, tools: [1]}
"""
    with pytest.raises(YamlError) as info:
        load_agents(doc)
    assert info.value.problems == [
        "<string>:9: agents[0].chat_model_setups[0].tools[0]: Input should be a valid string "
        "(for chat model setup ChatModelSetup)"]
