"""Programs that run the program named in their arguments warn like a shell when allowed.

``setpriv sh -c ...``, ``choom -n 1000 -- sh ...``, ``setarch x86_64 sh ...``,
``ld.so ./sh``: an allow-list naming one of them lets the model run any program (contained
by the sandbox all the same), as ``env`` or ``xargs`` do; each warns
(``ShellEquivalentCommandWarning``) at configuration. Each case here also runs ``sh``
through it in the sandbox: the warning says what is true.
"""

from __future__ import annotations

import platform
import shutil
import warnings
from pathlib import Path

import pytest
from support.sandbox import require_bubblewrap

from flink_agents_py.skills import (
    SHELL_EQUIVALENT_COMMANDS,
    RunSkillCommandTool,
    ShellEquivalentCommandWarning,
    _commands,
)

SKILL_MD = "---\nname: run\ndescription: runs\n---\nRun.\n"
RUNS_SH = {  # program: a command running sh through it (relative words only)
    "setpriv": "setpriv sh -c 'echo ran-sh'",
    "choom": "choom -n 1000 -- sh -c 'echo ran-sh'",
    "setarch": f"setarch {platform.machine()} sh -c 'echo ran-sh'",
    "ld.so": "ld.so ./sh -c 'echo ran-sh'",  # ./sh: a symlink resolved inside the sandbox
}


@pytest.fixture()
def skills(tmp_path: Path) -> Path:
    """One skill ``run`` whose folder holds ``sh -> /bin/sh``."""
    skill = tmp_path / "skills" / "run"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD)
    (skill / "sh").symlink_to("/bin/sh")
    return tmp_path / "skills"


@pytest.mark.parametrize("program", sorted(RUNS_SH))
def test_allowing_a_program_runner_warns_and_it_does_run_sh(program, skills, monkeypatch):
    assert program in SHELL_EQUIVALENT_COMMANDS
    if shutil.which(program, path="/usr/sbin:/usr/bin:/sbin:/bin") is None:
        pytest.skip(f"{program} is not installed here")
    monkeypatch.setattr(_commands, "_warned", set())
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        tool = RunSkillCommandTool(paths=[str(skills)], allowed_commands=[program])
    said = [str(w.message) for w in seen if issubclass(w.category, ShellEquivalentCommandWarning)]
    assert said and f"['{program}'] can run other programs" in said[0], said
    require_bubblewrap()
    result = tool.run("run", RUNS_SH[program])
    assert result == {"exit_code": 0, "output": "ran-sh\n"}, result


@pytest.mark.parametrize(
    "program", ["wget", "gpg", "catchsegv", "entr", "newgrp", "vipe", "xdg-open", "mutt", "pypy3"]
)
def test_programs_starting_a_program_an_option_names_warn_too(program, skills, monkeypatch):
    # wget --use-askpass=<program>, gpg --agent-program=<program>: an allow-list naming
    # them let the model run any program with no warning
    monkeypatch.setattr(_commands, "_warned", set())
    monkeypatch.setattr(_commands, "resolve_program", lambda *a: "/usr/bin/true")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        RunSkillCommandTool(paths=[str(skills)], allowed_commands=[program])
    said = [str(w.message) for w in seen if issubclass(w.category, ShellEquivalentCommandWarning)]
    assert said and f"['{program}'] can run other programs" in said[0], said


def test_wget_does_run_the_program_its_askpass_option_names(skills):
    # what the warning says is true: 'id' is not allowed, wget runs it (in the sandbox)
    if shutil.which("wget", path="/usr/sbin:/usr/bin:/sbin:/bin") is None:
        pytest.skip("wget is not installed here")
    require_bubblewrap()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShellEquivalentCommandWarning)
        tool = RunSkillCommandTool(paths=[str(skills)], allowed_commands=["wget"])
    result = tool.run("run", "wget -q --use-askpass=id http://127.0.0.1:9/")
    assert "id: " in result["output"] and "Username for" in result["output"], result
