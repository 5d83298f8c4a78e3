"""Errors of files a program reads name the file and the line.

Found by a user reading several files: a bad JSON line's error row said ``line 1: not JSON``
(which file?); a skill's broken front matter said ``invalid agents YAML ... SKILL.md front
matter:2`` (not an agents file, and line 2 of the front matter is line 3 of the file); a
Flink configuration file (``get_config(path)``, ``$FLINK_CONF_DIR``) that was not YAML said
``invalid agents YAML``, and one that was not UTF-8 raised a bare ``UnicodeDecodeError``
naming neither file nor line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.io import read_json_lines
from flink_agents_py.skills import SkillError, load_skills
from flink_agents_py.yaml import YamlError, load_agents

pytestmark = pytest.mark.timeout(120)


def test_a_bad_json_line_names_its_file_in_the_row_and_in_the_runner_s_error(tmp_path: Path):
    path = tmp_path.resolve() / "reviews.jsonl"
    path.write_text('{"key": "a"}\n{"key": \n')
    rows = [r.error for r in read_json_lines(path) if r.error is not None]
    assert rows == [
        {
            "kind": "error",
            "line": 1,
            "file": str(path),
            "value": '{"key": ',
            "error": "line 1: not JSON (unexpected end of data: line 1 column 9 (char 8))",
        }
    ]


def test_the_local_runner_s_error_of_a_bad_line_reads_the_same_wherever_the_file_is(tmp_path: Path):
    from flink_agents_py.api import Agent, InputEvent, OutputEvent, action

    class Echo(Agent):
        @action(InputEvent)
        @staticmethod
        def on_input(event, ctx):
            ctx.send_event(OutputEvent(output=event.input))

    path = tmp_path.resolve() / "in.jsonl"
    path.write_text('{"key": "a"}\nnot json\n')
    result = AgentsExecutionEnvironment.local().from_list(read_json_lines(path)).apply(Echo()).run()
    [error] = result.errors
    assert (error.source, error.error_type) == ("line 1", "BadRecordError")
    assert error.message.startswith("line 1: not JSON")
    assert str(path) not in error.message  # the same text (and rows) wherever the file is


def test_a_skill_s_broken_front_matter_names_skill_md_and_the_file_s_line(tmp_path: Path):
    skill = tmp_path / "skills" / "sum"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: sum\ndescription: [adds\n---\nAdd them.\n")
    with pytest.raises(SkillError) as raised:
        load_skills([tmp_path / "skills"])
    text = str(raised.value)
    assert "invalid skill front matter in " in text and "agents YAML" not in text
    assert f"{skill / 'SKILL.md'}:3: not valid YAML" in text  # the file's line 3


def test_a_flink_configuration_file_s_errors_name_it_and_the_line(tmp_path: Path):
    from flink_agents_py.compat import AgentsExecutionEnvironment as Theirs

    env = Theirs.get_execution_environment()
    broken = tmp_path / "config.yaml"
    broken.write_text("agent:\n  chat: [\n")
    with pytest.raises(YamlError) as raised:
        env.get_config(str(broken))
    assert str(raised.value).startswith(f"invalid Flink configuration YAML {broken} ")
    assert f"{broken}:3: not valid YAML" in str(raised.value)
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"agent:\n  x: \xff\n")
    with pytest.raises(YamlError) as raised:  # was a bare UnicodeDecodeError
        env.get_config(str(binary))
    assert str(raised.value).startswith(f"invalid Flink configuration YAML {binary} ")
    assert f"{binary}:2: byte 12 (column 6: 0xff) is not UTF-8" in str(raised.value)


def test_a_misspelt_key_of_an_agents_file_names_file_line_and_the_key_meant(tmp_path: Path):
    path = tmp_path / "agents.yaml"
    path.write_text("agents:\n  - name: a\n    actoins: []\n")
    with pytest.raises(YamlError) as raised:
        load_agents(path)
    assert f"{path}:3: agents[0].actoins: unknown key 'actoins' (did you mean 'actions'?)" in str(
        raised.value
    )
