"""More quotes the framework cuts are masked before the cut.

A skill's file name the model asked for, a short-term memory path an action took from its
record, a line a reader could not parse (its error row's excerpt) and a key's ``repr`` were
each cut to a length before they were masked: a known secret standing across the cut was no
longer one the mask recognises, and its first part left with the message (into the tool
message the model reads, the error output). Each is now masked whole before it is cut
(``api.internal.cut_masked``), as ``tests/test_secret_cut_at_edge.py`` checks for others.
"""

from __future__ import annotations

import uuid

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    InputEvent,
    RunnerContext,
    action,
    register_secret,
)
from flink_agents_py.api.internal import shown_key
from flink_agents_py.io import excerpt
from flink_agents_py.skills import LoadSkillTool, SkillError


@pytest.fixture()
def secret() -> str:
    """A registered secret, unique to the test (no provider's key shape: known only)."""
    value = f"Cut{uuid.uuid4().hex}"
    register_secret(value)
    return value


def straddling(secret: str, limit: int) -> str:
    """Text whose cut at ``limit`` characters falls 10 characters into ``secret``."""
    filler = ("a word " * limit)[:limit - 11] + " "
    return filler + secret + " and after"


def assert_no_part(secret: str, text: str) -> None:
    assert secret[:10] not in text, text  # what a cut before the mask would leave


def test_a_skill_file_name_the_model_asked_for(tmp_path, secret):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: notes\ndescription: d\n---\nbody\n")
    tool = LoadSkillTool(paths=[str(folder)])
    with pytest.raises(SkillError) as err:
        tool.skill("notes").read_file(straddling(secret, 200))
    assert "has no file" in str(err.value)
    assert_no_part(secret, str(err.value))


def test_an_excerpt_of_a_line_in_an_error_row(secret):
    assert_no_part(secret, excerpt(straddling(secret, 100), 100) or "")


def test_a_keys_repr_in_an_error(secret):
    assert_no_part(secret, shown_key(straddling(secret, 199), 200))  # (its quote)


class _PathReader(Agent):
    @action(InputEvent)
    @staticmethod
    def read(event: InputEvent, ctx: RunnerContext) -> None:
        """Read the short-term memory path the record names."""
        ctx.short_term_memory.get(event.input["path"])


def test_a_memory_path_an_action_took_from_its_record(secret):
    path = straddling(secret, 200).replace(" ", "_") + ".."  # an empty name: refused
    res = AgentsExecutionEnvironment.local().from_list([{"key": "a", "path": path}]) \
        .apply(_PathReader()).run()
    [error] = res.errors
    assert "memory path must be dotted names" in error.message
    assert_no_part(secret, error.message)


def test_a_memory_path_naming_the_model_tag(secret):
    path = straddling(secret, 200).replace(" ", "_") + ".$model"
    res = AgentsExecutionEnvironment.local().from_list([{"key": "a", "path": path}]) \
        .apply(_PathReader()).run()
    [error] = res.errors
    assert "has a field named '$model'" in error.message
    assert_no_part(secret, error.message)


def test_a_skill_command_the_tool_refuses(tmp_path, secret):
    from flink_agents_py.skills import CommandRefusedError, RunSkillCommandTool

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: notes\ndescription: d\n---\nbody\n")
    tool = RunSkillCommandTool(paths=[str(folder)], allowed_commands=["echo"])
    command = straddling(secret, 100) + " ; " + "y" * 200  # its middle cut at 100
    with pytest.raises(CommandRefusedError) as err:
        tool.run("notes", command)
    assert "is not allowed" in str(err.value)
    assert_no_part(secret, str(err.value))


def test_a_skill_file_cut_at_its_bound(tmp_path, secret):
    from flink_agents_py.skills import MAX_FILE_CHARS

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: notes\ndescription: d\n---\nbody\n")
    (folder / "big.txt").write_text(straddling(secret, MAX_FILE_CHARS) + "z" * 1000)
    tool = LoadSkillTool(paths=[str(folder)])
    read = tool.skill("notes").read_file("big.txt")
    assert read["cut"]["kept_characters"] == MAX_FILE_CHARS
    assert_no_part(secret, read["text"])


def test_the_echoed_warning_of_an_error_record_left_out_of_a_table(secret, capsys):
    """``TypedOutputs``' echo prints on standard output, where no log filter masks: a
    secret in the record's key (under the cut) is masked there too."""
    from flink_agents_py.flink._typed_outputs import _log_unrouted

    _log_unrouted("to_table", {"key": f"customer {secret}", "seq": 1, "action": "go",
                               "error_type": "ValueError", "message": "bad"}, echo=True)
    printed = capsys.readouterr().out
    assert "an error record of the agent" in printed
    assert secret[:10] not in printed, printed
