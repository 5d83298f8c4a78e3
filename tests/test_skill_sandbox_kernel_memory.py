"""Kernel memory a skill command holds is bounded, for a job with no cgroup too.

A job not run as root gets no ``memory`` cgroup per command, so what bounds a command's
memory is its rlimits and the sizes of its tmpfs. Kernel memory counted by neither grew
without bound: a file's inode in a tmpfs (about 1 KB each, not counted in the tmpfs's size:
577,000 empty files in ``/tmp`` in 8 s held 580 MB) and the data buffered in sockets and
pipes (about 200 KiB per socket, with the 20,000 open files the job itself may hold).

The first check runs as a user would: their own script, from a temporary directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import warnings
from pathlib import Path

import pytest
from support.sandbox import require_bubblewrap

from flink_agents_py.skills import RunSkillCommandTool, ShellEquivalentCommandWarning
from flink_agents_py.skills._seccomp import seccomp_program
from flink_agents_py.skills._tmpfs import FILES_PER_MB

ROOT = Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else Path(sys.executable))

FILL = """
import os, sys
for where in ("/tmp", "/dev/shm", "/skill"):
    made = 0
    try:
        while made < 200_000:
            os.close(os.open(f"{where}/f{made}", os.O_CREAT | os.O_WRONLY, 0o644))
            made += 1
        print(where, made, "no limit")
    except OSError as e:
        print(where, made, e.strerror)
"""

CAPS = """
caps = dict(line.split(":\\t") for line in open("/proc/self/status").read().splitlines()
            if line.startswith("Cap"))
print("caps", sorted(set(int(v, 16) for v in caps.values())))
"""
FILL += CAPS

USER_SCRIPT = """
import json, sys, warnings
from flink_agents_py.skills import RunSkillCommandTool
warnings.simplefilter("ignore")
tool = RunSkillCommandTool(paths=["skills"], allowed_commands=["python3"], max_scratch_mb=4)
print(json.dumps(tool.run("box", "python3 fill.py")))
"""


def skill(tmp_path: Path, name: str, text: str) -> Path:
    """A skill ``box`` holding ``name`` with ``text``; returns the skills' folder."""
    folder = tmp_path / "skills" / "box"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: box\ndescription: Holds memory.\n---\n")
    (folder / name).write_text(text)
    return tmp_path / "skills"


@pytest.mark.parametrize("user", ["nobody", "job user"])
def test_a_command_makes_at_most_its_bound_of_files_in_each_ram_file_system(user):
    """``/tmp``, ``/dev/shm`` and ``/skill``'s scratch each take at most ``max_scratch_mb``
    × ``FILES_PER_MB`` files (inodes are kernel memory their size does not count), and the
    command holds no capability (the remount is done before it runs). A job not run as
    root, which has no ``memory`` cgroup, is the one this bound is for (run as ``nobody``
    where the tests run as root)."""
    require_bubblewrap()
    if seccomp_program() is None:
        pytest.skip("no seccomp filter here: the tmpfs are bounded in size only")
    as_nobody = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    if user == "nobody" and os.getuid() != 0:
        pytest.skip("the tests do not run as root: the job user's run is the normal user's")
    work = Path(tempfile.mkdtemp(prefix="flink-agents-py-inodes-"))  # readable by nobody
    try:
        skill(work, "fill.py", FILL)
        (work / "user_job.py").write_text(textwrap.dedent(USER_SCRIPT))
        for p in [work, *work.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        done = subprocess.run([*(as_nobody if user == "nobody" else []), PYTHON,
                               "user_job.py"], cwd=work, capture_output=True, text=True,
                              timeout=120, check=False,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        shutil.rmtree(work)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    out = result["output"]
    assert result["exit_code"] == 0, out
    bound = 4 * FILES_PER_MB
    for where in ("/tmp", "/dev/shm", "/skill"):
        line = next(ln for ln in out.splitlines() if ln.startswith(where + " "))
        made, why = int(line.split()[1]), line.split(" ", 2)[2]
        assert made <= bound and why == "No space left on device", out
    assert "caps [0]" in out, out  # every capability set empty


SOCKETS = """
import resource, socket
print("limit", resource.getrlimit(resource.RLIMIT_NOFILE))
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (100_000, 100_000))
    print("raised")
except (OSError, ValueError):
    print("not raised")
held = []
try:
    while len(held) < 100_000:
        held += socket.socketpair()
except OSError as e:
    print("stopped", len(held), e.strerror)
"""


def test_a_command_holds_a_bounded_number_of_sockets_and_pipes(tmp_path):
    """Each open socket holds up to about 200 KiB of buffered data in kernel memory: a
    process of a command opens at most ``OPEN_FILES`` files (``RLIMIT_NOFILE``), and cannot
    raise it."""
    require_bubblewrap()
    from flink_agents_py.skills._sandbox import OPEN_FILES

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShellEquivalentCommandWarning)
        tool = RunSkillCommandTool(paths=[str(skill(tmp_path, "sockets.py", SOCKETS))],
                                   allowed_commands=["python3"])
    result = tool.run("box", "python3 sockets.py")
    out = str(result["output"])
    assert f"limit ({OPEN_FILES}, {OPEN_FILES})" in out and "not raised" in out, out
    stopped = next(ln for ln in out.splitlines() if ln.startswith("stopped"))
    assert int(stopped.split()[1]) <= OPEN_FILES and "Too many open files" in stopped, out


def test_where_the_host_refuses_the_remount_commands_run_bounded_in_size_only(
        tmp_path, monkeypatch, caplog):
    """A host whose security module refuses mounts in a user namespace still runs skill
    commands (the log says the tmpfs are bounded in size only), with no capability."""
    require_bubblewrap()
    from flink_agents_py.skills import _sandbox

    false = _sandbox.resolve_program("false", [], contained=True)
    monkeypatch.setattr(_sandbox, "remount_probe", lambda: ["--", false])
    _sandbox._bubblewrap_status.cache_clear()
    _sandbox._warn_no_remount.cache_clear()  # said once per process
    try:
        tool = RunSkillCommandTool(paths=[str(skill(tmp_path, "caps.py", CAPS))],
                                   allowed_commands=["python3"])
        result = tool.run("box", "python3 caps.py")
    finally:
        _sandbox._bubblewrap_status.cache_clear()  # the next sandbox probes this host again
    out = str(result["output"])
    assert result["exit_code"] == 0 and "caps [0]" in out, out
    assert "bounded in size only" in caplog.text


FAMILIES = """
import socket
a, b = socket.socketpair()
a.sendall(b"x")
print("unix", b.recv(1).decode())
for family in ("AF_INET", "AF_INET6", "AF_NETLINK", "AF_PACKET"):
    kind = socket.SOCK_RAW if family == "AF_NETLINK" else socket.SOCK_DGRAM
    try:
        socket.socket(getattr(socket, family), kind).close()
        print(family, "made")
    except OSError as e:
        print(family, e.strerror)
"""


def test_a_command_makes_unix_sockets_only(tmp_path):
    """TCP and UDP buffers count against the host's ``tcp_mem``/``udp_mem``, which every
    network namespace shares: a command filling its own loopback's sockets (256 open files
    of a few MB each, per process) pushed the host's TCP, the TaskManager's connections
    included, into memory pressure. The sandbox has no network: only Unix sockets are made,
    other families fail as on a kernel without them (netlink and packet sockets too)."""
    require_bubblewrap()
    if seccomp_program() is None:
        pytest.skip("no seccomp filter is built for this architecture")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShellEquivalentCommandWarning)
        tool = RunSkillCommandTool(paths=[str(skill(tmp_path, "families.py", FAMILIES))],
                                   allowed_commands=["python3"])
    result = tool.run("box", "python3 families.py")
    out = str(result["output"])
    assert result["exit_code"] == 0 and "unix x" in out, out
    for family in ("AF_INET", "AF_INET6", "AF_NETLINK", "AF_PACKET"):
        assert f"{family} Address family not supported by protocol" in out, out
