"""What of the host a skill command could still name or read through ``/usr`` and ``uname``.

``/usr`` is bound whole, read-only, so programs start; ``/usr/local/etc`` inside it is the
``/etc`` of what was installed under ``/usr/local``: npm's global ``npmrc`` (where
``npm config set --location=global //registry/:_authToken=...`` writes), a ``pip.conf``
with an index's password. The sandbox shows it empty. The UTS namespace bubblewrap makes
copies the host's name, which names the machine inside its network; the sandbox names
itself instead.
"""

from __future__ import annotations

import os
import socket
import warnings
from pathlib import Path

import pytest
from support.sandbox import require_bubblewrap

from flink_agents_py.skills import RunSkillCommandTool

SKILL_MD = "---\nname: look\ndescription: looks around\n---\nLook around.\n"


def tool_for(tmp_path: Path, allowed: list[str]) -> RunSkillCommandTool:
    """A tool over one skill ``look`` whose folder holds ``conf -> /usr/local/etc``."""
    skill = tmp_path / "skills" / "look"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD)
    (skill / "conf").symlink_to("/usr/local/etc")  # resolved inside the sandbox
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return RunSkillCommandTool(paths=[str(tmp_path / "skills")], allowed_commands=allowed)


def test_usr_local_etc_is_empty_in_a_command(tmp_path):
    require_bubblewrap()
    host = Path("/usr/local/etc")
    if not host.is_dir() or host.is_symlink() or not any(host.iterdir()):
        pytest.skip("this host has nothing in /usr/local/etc to hide")
    tool = tool_for(tmp_path, ["ls", "touch"])
    listed = tool.run("look", "ls -A conf/")
    assert listed == {"exit_code": 0, "output": ""}, listed
    # read-only too: nothing a command writes there is kept for another
    made = tool.run("look", "touch conf/x")
    assert made["exit_code"] != 0 and "Read-only" in made["output"], made


def test_a_command_sees_the_sandboxs_host_name_not_the_hosts(tmp_path):
    require_bubblewrap()
    tool = tool_for(tmp_path, ["uname"])
    seen = tool.run("look", "uname -n")
    assert seen["exit_code"] == 0, seen
    assert seen["output"].strip() == "sandbox"
    assert seen["output"].strip() != socket.gethostname() or os.uname().nodename == "sandbox"
