"""No file of a skill's folder, and none a command writes, is run in the sandbox.

The allow-list names programs; a skill folder is hostile and may ship executables and
scripts (``x.sh`` starting ``#!/bin/sh``). Programs no one would call a shell run the
program named in their arguments: ``run-parts d`` runs every executable of ``d``,
``logsave out ./x.sh`` and ``install -s --strip-program=./x.sh`` run ``./x.sh``. With
``allowed_commands=["run-parts"]`` a skill's own script ran (its interpreter from its
shebang). The kernel refuses it now: every mount under ``/skill`` and the writable tmpfs
(``/tmp``, ``/dev/shm``) are ``noexec``, so ``execve`` fails with ``EACCES`` and the dynamic
loader cannot map such a file (``ld.so ./program``). Those programs, which run any program
of ``/usr`` the model names, warn as shell equivalents too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
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

ROOT = Path(__file__).resolve().parents[1]
SKILL_MD = "---\nname: box\ndescription: a box of scripts\n---\nRun them.\n"
RUNNERS = {  # a command of an allowed program running the skill's own x.sh (or d/run)
    "run-parts": "run-parts d",
    "logsave": "logsave out.log ./x.sh",
    "install": "install -s --strip-program=./x.sh SKILL.md stripped",
}
USER_MODULE = """
import json, sys, warnings
from flink_agents_py.skills import RunSkillCommandTool
warnings.simplefilter("ignore")  # the runners warn as shell equivalents
runners = json.loads(sys.argv[1])
out = {}
for writable in ([], ["box"]):
    tool = RunSkillCommandTool(paths=["skills"], allowed_commands=sorted(runners),
                               writable_skills=writable)
    for program, command in runners.items():
        out[f"{program}{'-writable' if writable else ''}"] = tool.run("box", command)
print(json.dumps(out))
"""


def _contained_fully() -> None:
    """Skip where the sandbox cannot remount (no seccomp filter or a host refusing it)."""
    require_bubblewrap()
    from flink_agents_py.skills import _sandbox, _seccomp

    if _seccomp.seccomp_program() is None or not _sandbox._bubblewrap_status()[1].remount:
        pytest.skip("the sandbox's mounts cannot be remounted here (noexec is not set)")


def _skill(folder: Path) -> Path:
    skill = folder / "skills" / "box"
    (skill / "d").mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD)
    for script in (skill / "x.sh", skill / "d" / "run"):
        script.write_text("#!/bin/sh\necho skill-script-ran\n")
        script.chmod(0o755)
    return skill


def test_a_skills_own_script_never_runs_through_an_allowed_program_user_module():
    """A user's module, in a folder outside the repository, allows ``run-parts``,
    ``logsave`` and ``install``, for a read-only and a writable skill: none runs the
    skill's executable script (``Permission denied``, or ``run-parts`` finding nothing to
    run), and the commands otherwise work (``logsave`` writes its log)."""
    _contained_fully()
    runners = {
        p: c for p, c in RUNNERS.items() if shutil.which(p, path="/usr/sbin:/usr/bin:/sbin:/bin")
    }
    if not runners:
        pytest.skip("none of run-parts, logsave, install is installed")
    work = Path(tempfile.mkdtemp(prefix="flink-agents-py-noexec-"))
    try:
        skill = _skill(work)
        (work / "run_scripts.py").write_text(USER_MODULE)
        proc = subprocess.run(
            [sys.executable, "run_scripts.py", json.dumps(runners)],
            cwd=work,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        results = json.loads(proc.stdout.strip().splitlines()[-1])
        assert len(results) == 2 * len(runners)
        for name, result in results.items():
            assert "skill-script-ran" not in result["output"], (name, result)
            if not name.startswith("run-parts"):  # run-parts skips what it cannot run
                assert "Permission denied" in result["output"], (name, result)
        if "logsave" in runners:  # the writable skill's log stays: logsave itself ran
            assert "./x.sh" in (skill / "out.log").read_text()
    finally:
        shutil.rmtree(work)


WRITES_AND_RUNS = """\
cp /usr/bin/true /tmp/t && /tmp/t; echo tmp=$?
cp /usr/bin/true /dev/shm/t && /dev/shm/t; echo shm=$?
cp /usr/bin/true ./t && ./t; echo skill=$?
for l in /lib64/ld-linux-x86-64.so.2 /lib/ld-linux-aarch64.so.1; do [ -e $l ] && ld=$l; done
cp /usr/bin/true /tmp/l && $ld /tmp/l; echo loader=$?
/usr/bin/true; echo system=$?
for l in /usr/lib/*/libm.so.6 /lib64/libm.so.6; do [ -e $l ] && cp $l /tmp/p.so; done
LD_PRELOAD=/tmp/p.so /usr/bin/true
"""


@pytest.mark.parametrize("writable", [False, True])
def test_a_program_a_command_writes_never_runs(tmp_path, writable):
    """A command that can copy a file and run one (``sh``) writes a program to ``/tmp``,
    ``/dev/shm`` and ``/skill`` (a writable skill's real folder, too): none runs, not even
    through the dynamic loader, and a library copied to ``/tmp`` is not preloaded
    (``LD_PRELOAD``); a program of ``/usr`` still does."""
    _contained_fully()
    skill = _skill(tmp_path)
    (skill / "run.sh").write_text(WRITES_AND_RUNS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShellEquivalentCommandWarning)
        tool = RunSkillCommandTool(
            paths=[str(tmp_path / "skills")],
            allowed_commands=["sh"],
            writable_skills=["box"] if writable else [],
        )
    result = tool.run("box", "sh run.sh")
    codes = dict(
        line.split("=")
        for line in result["output"].splitlines()
        if line.split("=")[0] in ("tmp", "shm", "skill", "loader", "system")
    )
    assert codes.get("system") == "0", result
    for place in ("tmp", "shm", "skill"):
        assert codes.get(place) == "126", (place, result)  # found, not executable
    assert codes.get("loader") != "0" and "failed to map" in result["output"], result
    # a library a command wrote is not loaded either (LD_PRELOAD given by env or a shell)
    assert "'/tmp/p.so' from LD_PRELOAD cannot be preloaded" in result["output"], result


NEW_RUNNERS = {  # program: a command running sh (or the skill's script text) through it
    "run-parts": "run-parts --arg=s.txt sh-only",
    "logsave": "logsave out sh s.txt",
    "install": "install -s --strip-program=sh s.txt copied",
    "rbash": "rbash s.txt",
}


@pytest.mark.parametrize("program", sorted(NEW_RUNNERS))
def test_programs_that_run_a_program_they_are_given_warn_and_do_run_it(
    program, tmp_path, monkeypatch
):
    """Each warns as a shell equivalent at configuration, and runs ``sh`` (a system program,
    not the skill's) in the sandbox: the warning says what is true."""
    assert program in SHELL_EQUIVALENT_COMMANDS
    if shutil.which(program, path="/usr/sbin:/usr/bin:/sbin:/bin") is None:
        pytest.skip(f"{program} is not installed here")
    skill = _skill(tmp_path)
    (skill / "s.txt").write_text("echo ran-sh\n")
    (skill / "sh-only").mkdir()
    (skill / "sh-only" / "sh").symlink_to("/bin/sh")
    monkeypatch.setattr(_commands, "_warned", set())
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        tool = RunSkillCommandTool(paths=[str(tmp_path / "skills")], allowed_commands=[program])
    said = [str(w.message) for w in seen if issubclass(w.category, ShellEquivalentCommandWarning)]
    assert said and f"['{program}'] can run other programs" in said[0], said
    require_bubblewrap()
    result = tool.run("box", NEW_RUNNERS[program])
    assert result["output"].startswith("ran-sh\n"), result


@pytest.mark.parametrize(
    "name",
    ["pdb3", "pydoc3", "python3.12", "wish8.6", "ksh93", "convert", "gs", "exiftool", "view"],
)
def test_versioned_interpreter_names_warn(name, tmp_path, monkeypatch):
    """``pdb3 x.py`` and ``pydoc3 ./x.py`` run Python code, versioned names count;
    ImageMagick reads ``'|cmd'`` as a command, Ghostscript ``%pipe%``, exiftool's ``-if``
    is Perl, ``view`` is vim."""
    _skill(tmp_path)
    monkeypatch.setattr(_commands, "_warned", set())
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        RunSkillCommandTool(paths=[str(tmp_path / "skills")], allowed_commands=[name])
    assert any(issubclass(w.category, ShellEquivalentCommandWarning) for w in seen)


def test_a_skill_folder_bound_whole_is_not_executable_either(tmp_path):
    """A folder with more entries than ``MAX_BOUND_ENTRIES`` is bound whole (one mount, no
    scratch): its script does not run either."""
    _contained_fully()
    from flink_agents_py.skills._sandbox import MAX_BOUND_ENTRIES

    if shutil.which("logsave", path="/usr/sbin:/usr/bin:/sbin:/bin") is None:
        pytest.skip("logsave is not installed")
    skill = _skill(tmp_path)
    for i in range(MAX_BOUND_ENTRIES + 1):
        (skill / f"f{i}").write_text(f"{i}\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShellEquivalentCommandWarning)
        tool = RunSkillCommandTool(
            paths=[str(tmp_path / "skills")], allowed_commands=["logsave", "cat"]
        )
    result = tool.run("box", "logsave -a out.log ./x.sh")
    assert "skill-script-ran" not in result["output"], result
    assert "Permission denied" in result["output"], result
    assert tool.run("box", f"cat f{MAX_BOUND_ENTRIES}")["output"] == f"{MAX_BOUND_ENTRIES}\n"


def test_an_entry_that_is_a_mount_of_its_own_keeps_its_flags_and_runs(tmp_path):
    """The remount adding ``noexec`` must name a bind's locked flags as its host mount has
    them: an entry that is a mount point of its own (``noatime``, the folder's mount is not)
    still shows, and the command runs."""
    _contained_fully()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    skill = _skill(tmp_path)
    (skill / "own").mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "noatime,size=1m", "tmpfs", str(skill / "own")],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr!r}")
    try:
        (skill / "own" / "f").write_text("on its own mount\n")
        tool = RunSkillCommandTool(paths=[str(tmp_path / "skills")], allowed_commands=["cat"])
        assert tool.run("box", "cat own/f") == {"exit_code": 0, "output": "on its own mount\n"}
    finally:
        subprocess.run(["umount", str(skill / "own")], check=False)


@pytest.mark.parametrize("names", ["odd", "long"])
def test_entries_of_any_name_are_remounted_in_one_go(tmp_path, names):
    """The binds are remounted from one fstab, where a name is escaped as libmount reads it
    back: spaces, tabs, newlines, backslashes, ``#``; and 63 names of 255 bytes (an fstab
    over a pipe's 64 KiB, given by a memfd: a pipe's write would block with no reader)."""
    _contained_fully()
    skill = _skill(tmp_path)
    if names == "odd":
        chosen = ["a b", "tab\there", "new\nline", "back\\slash", "#hash", "e\\040f"]
    else:
        chosen = [f"{i:02d}" + " " * 253 for i in range(63)]
    for name in chosen:
        (skill / name).write_text("#!/bin/sh\necho skill-script-ran\n")
        (skill / name).chmod(0o755)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShellEquivalentCommandWarning)
        tool = RunSkillCommandTool(paths=[str(tmp_path / "skills")], allowed_commands=["sh"])
    (skill / "all.sh").write_text('for f in ./*; do "$f"; done 2>&1 | sort | uniq -c\n')
    result = tool.run("box", "sh all.sh")
    assert result["exit_code"] == 0 and "skill-script-ran" not in result["output"], result
    # each script and d/ refused: Permission denied, one line each
    assert "Permission denied" in result["output"], result
