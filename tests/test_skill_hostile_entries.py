"""A hostile skill folder's odd entries: symlink loops, names with control characters.

A skill folder is untrusted (a skill downloaded, or one a writable skill's command shapes):
what ``load_skill`` answers about it is a ``SkillError`` the model reads, never another
exception, and no file name in it forges a log line or drives the terminal reading the log.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from flink_agents_py.skills import LoadSkillTool, SkillError


def _skill(tmp_path: Path) -> Path:
    folder = tmp_path / "odd"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: odd\ndescription: d\n---\nhi\n")
    (folder / "notes.md").write_text("notes\n")
    return folder


@pytest.mark.parametrize("name", ["loop1", "loop1/x", "self"])
def test_a_symlink_loop_asked_for_is_a_skill_error_not_a_runtime_error(tmp_path, name):
    folder = _skill(tmp_path)
    (folder / "loop1").symlink_to("loop2")
    (folder / "loop2").symlink_to("loop1")
    (folder / "self").symlink_to("self")
    tool = LoadSkillTool(paths=[str(folder)])
    with pytest.raises(SkillError, match="has no file"):
        asyncio.run(tool.acall("odd", name))
    assert asyncio.run(tool.acall("odd", "notes.md")) == {"file": "notes.md", "text": "notes\n"}


def test_file_names_with_control_characters_are_escaped_in_the_error(tmp_path):
    folder = _skill(tmp_path)
    forged = "x\n2026-01-01 ERROR forged line"
    (folder / forged).write_text("a")
    (folder / "red\x1b[31mtext").write_text("b")
    tool = LoadSkillTool(paths=[str(folder)])
    with pytest.raises(SkillError) as caught:
        asyncio.run(tool.acall("odd", "missing.md"))
    text = str(caught.value)
    assert "\n" not in text and "\x1b" not in text, text
    assert repr(forged) in text and "notes.md" in text
    # the listing the model reads (JSON) keeps the names as they are
    assert forged in asyncio.run(tool.acall("odd"))["files"]
    assert os.path.exists(folder / forged)
