"""A skill folder thousands of folders deep, or wide, never piles up fds or recursion.

A skill's folder is untrusted, and a writable skill's command shapes it at will: one
``mkdir -p a/a/a/...`` makes a chain 1,500 folders deep. ``os.fwalk`` recursed once per
level: ``load_skill`` failed with ``RecursionError``, and so did every later command of the
writable skill, for every key (its setuid bits are cleared after each command by a walk of
its folder), while holding one fd per level of the chain open in the operator's process.

A read-only skill's folder is shown to a command entry by entry, each bound by an fd: a
folder of thousands of files at its top opened as many fds at once, for every command, and
the operator's other threads (its sockets, its state) got ``EMFILE`` meanwhile.

A writable skill's folder filled with files (one ``seq 1000000 | xargs touch``) was walked
after every command to clear setuid bits the seccomp filter had already refused: 200,000
empty files took 1.9 s per command, out of its timeout, millions tens of seconds.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from support.sandbox import require_bubblewrap

from flink_agents_py.skills import LoadSkillTool, RunSkillCommandTool, _sandbox, _setid
from flink_agents_py.skills._seccomp import seccomp_program
from flink_agents_py.skills._setid import clear_set_id_bits
from flink_agents_py.skills._walk import MAX_HELD_FDS, walk_beneath

ROOT = Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else Path(sys.executable))
SKILL_MD = "---\nname: deep\ndescription: A skill folder nested very deep.\n---\nDig.\n"


@pytest.fixture()
def deep_tmp(tmp_path: Path) -> Iterator[Path]:
    """``tmp_path``, flattened when the test ends: ``shutil.rmtree`` recurses once per
    level, and pytest's clean-up of old temporary folders (every session's, on this
    machine) would fail on a chain thousands deep."""
    yield tmp_path
    queue = [tmp_path]
    while queue:  # every folder below tmp_path's children is moved up to tmp_path
        folder = queue.pop()
        for entry in os.scandir(folder):
            if entry.is_dir(follow_symlinks=False):
                moved = Path(entry.path)
                if folder != tmp_path:
                    moved = tmp_path / f"hoisted-{uuid.uuid4().hex}"
                    os.rename(entry.path, moved)
                queue.append(moved)


def skill_folder(tmp_path: Path) -> Path:
    """A skill folder ``skills/deep`` holding its ``SKILL.md`` only."""
    skill = tmp_path / "skills" / "deep"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD)
    return skill


def chain(top: Path, depth: int) -> list[str]:
    """Make ``top/d/d/.../d``, ``depth`` folders deep, through fds (no path grows long).

    Returns:
        The chain's path below ``top``, as names.
    """
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
        os.close(os.open("bottom.txt", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    return ["d"] * depth


def test_load_skill_lists_a_file_at_the_bottom_of_a_chain_thousands_deep(deep_tmp):
    skill = skill_folder(deep_tmp)
    names = chain(skill, 1500)
    listed = asyncio.run(LoadSkillTool(paths=[str(skill.parent)]).acall("deep"))["files"]
    assert listed == ["/".join([*names, "bottom.txt"])]


def test_a_writable_skills_command_making_a_deep_chain_leaves_its_later_commands_working(
        deep_tmp):
    require_bubblewrap()
    skill = skill_folder(deep_tmp)
    tool = RunSkillCommandTool(paths=[str(skill.parent)], allowed_commands=["mkdir", "echo"],
                               writable_skills=["deep"])
    made = tool.run("deep", "mkdir -p " + "a/" * 1500)
    assert made == {"exit_code": 0, "output": ""}
    assert tool.run("deep", "echo still-here") == {"exit_code": 0, "output": "still-here\n"}
    listed = asyncio.run(LoadSkillTool(paths=[str(skill.parent)]).acall("deep"))
    assert listed["files"] == []


def test_setuid_bits_are_cleared_below_the_fds_the_walk_holds_and_in_the_branches_after(
        tmp_path):
    """Deeper than the walk keeps fds for, folders are opened again from the nearest one
    it holds: a setuid file at the bottom of a deep chain, and one in a branch next to the
    chain's top walked after it, are both found (a host without the seccomp filter relies
    on this clearing)."""
    skill = skill_folder(tmp_path)
    deep = Path(skill, *chain(skill, 3 * MAX_HELD_FDS), "bottom.txt")
    (skill / "e").mkdir()
    late = skill / "e" / "late.txt"
    late.write_text("x")
    for f in (deep, late):
        f.chmod(0o6755)
    fd = os.open(skill, os.O_RDONLY | os.O_DIRECTORY)
    try:
        clear_set_id_bits(fd, skill)
    finally:
        os.close(fd)
    for f in (deep, late):
        assert stat.S_IMODE(f.stat().st_mode) == 0o755, f


def fds_below(folder: Path) -> int:
    """How many of this process's fds are open on ``folder`` or below it.

    Only those: the test process's other threads (left by earlier tests, the event loops
    and pools of the suite) open and close fds of their own while the walk runs, so a
    count of all fds moved by a few between two readings (1,013 against 1,017 in CI).
    """
    held = 0
    for entry in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(entry)
        except FileNotFoundError:  # closed since listed (the listing's own fd, or a thread's)
            continue
        if target == str(folder) or target.startswith(f"{folder}/"):
            held += 1
    return held


def test_a_walk_holds_a_bounded_number_of_fds_however_deep_the_folder(deep_tmp):
    skill = skill_folder(deep_tmp)
    chain(skill, 500)
    most = 0
    fd = os.open(skill, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with closing(walk_beneath(fd)) as entries:
            for parts, _, _, _ in entries:
                if len(parts) % 50 == 0:
                    most = max(most, fds_below(skill))
    finally:
        os.close(fd)
    assert 1 < most <= MAX_HELD_FDS + 4, most  # the top, the held ones, scandir's
    assert fds_below(skill) == 0


WIDE = """
import json, os, resource, sys, threading, warnings
from flink_agents_py.skills import RunSkillCommandTool
resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
warnings.simplefilter("ignore")
tool = RunSkillCommandTool(paths=[sys.argv[1]], allowed_commands=["ls", "wc", "touch"])
failed, done = [], threading.Event()

def neighbour():  # another thread of the operator, opening files while the commands run
    while not done.is_set():
        try:
            os.close(os.open("/dev/null", os.O_RDONLY))
        except OSError as e:
            failed.append(e.strerror)

thread = threading.Thread(target=neighbour)
thread.start()
try:
    results = [tool.run("deep", "ls | wc -l"), tool.run("deep", "touch f0")]
finally:
    done.set()
    thread.join()
print(json.dumps({"results": results, "failed": sorted(set(failed))}))
"""


def test_a_folder_of_thousands_of_files_starves_no_thread_of_fds(tmp_path):
    """With the fd limit at 256 (1,024 is common), a skill of 1,000 files at its top: each
    command sees all of them, read-only, and another thread's opens never fail."""
    require_bubblewrap()
    skill = skill_folder(tmp_path)
    for i in range(1000):
        (skill / f"f{i}").write_text("x")
    (tmp_path / "wide.py").write_text(WIDE)
    done = subprocess.run([PYTHON, "wide.py", str(skill.parent)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})  # this tree's code
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["failed"] == [], report
    listed, touched = report["results"]
    assert listed == {"exit_code": 0, "output": "1001\n"}, listed  # the files and SKILL.md
    assert touched["exit_code"] != 0 and "Read-only file system" in touched["output"], touched


def counting_walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The entries each set-id clean-up walk looked at, one count per walk."""
    counts: list[int] = []

    def counted(folder: int, *args: int) -> Iterator[tuple[tuple[str, ...], int, str, bool]]:
        counts.append(0)
        for entry in walk_beneath(folder, *args):
            counts[-1] += 1
            yield entry

    monkeypatch.setattr(_setid, "walk_beneath", counted)
    return counts


def many_files(skill: Path, count: int) -> None:
    """``count`` empty files in ``skill/many``."""
    (skill / "many").mkdir()
    fd = os.open(skill / "many", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(count):
            os.close(os.open(str(i), os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
    finally:
        os.close(fd)


def test_a_writable_skill_full_of_files_is_not_walked_after_each_command(tmp_path,
                                                                         monkeypatch):
    """Where the seccomp filter makes the kernel refuse setuid/setgid bits, nothing is left
    to clear: no command pays for the number of files in the folder."""
    require_bubblewrap()
    if seccomp_program() is None:
        pytest.skip("no seccomp filter is built for this architecture")
    skill = skill_folder(tmp_path)
    many_files(skill, 5_000)
    counts = counting_walks(monkeypatch)
    tool = RunSkillCommandTool(paths=[str(skill.parent)], allowed_commands=["chmod", "echo"],
                               writable_skills=["deep"])
    assert tool.run("deep", "echo ok") == {"exit_code": 0, "output": "ok\n"}
    refused = tool.run("deep", "chmod u+s many/1")
    assert refused["exit_code"] != 0 and "not permitted" in refused["output"], refused
    assert counts == []
    assert not (skill / "many" / "1").stat().st_mode & stat.S_ISUID


def test_without_the_seccomp_filter_the_clean_up_walk_stops_at_its_bound_and_says_so(
        tmp_path, monkeypatch, caplog):
    """On an architecture the filter is not built for, the bits are cleared after the
    command, looking at ``MAX_SET_ID_WALK`` entries at most (a warning names the folder)."""
    require_bubblewrap()
    skill = skill_folder(tmp_path)
    many_files(skill, 300)
    made = skill / "made-setuid"
    made.write_text("x")
    monkeypatch.setattr(_sandbox, "seccomp_program", lambda: None)
    monkeypatch.setattr(_setid, "MAX_SET_ID_WALK", 100)
    counts = counting_walks(monkeypatch)
    tool = RunSkillCommandTool(paths=[str(skill.parent)], allowed_commands=["chmod"],
                               writable_skills=["deep"])
    assert tool.run("deep", "chmod u+s made-setuid")["exit_code"] == 0
    assert len(counts) == 1 and counts[0] <= 101, counts
    assert "more than 100 entries" in caplog.text and str(skill) in caplog.text
