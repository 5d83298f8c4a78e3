"""Kernel state no namespace separates stays out of a skill command's reach.

bubblewrap's namespaces separate mounts, processes, network, IPC and users; the kernel's
keyrings and its log belong to none of them. A command inherits the session keyring of the
process that started it (the operator's), where the job user's session may keep secrets
(``keyctl padd user ... @s``, Kerberos tickets, file system keys), and a user namespace whose
uid maps to the key's owner reads them whole. The sandbox's seccomp filter refuses the
keyring calls and ``syslog`` (``ENOSYS``, as a kernel built without them answers).

Each check runs in a child Python process with a session keyring of its own, so the test
leaves nothing in the keyring of the session running it.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.sandbox import require_bubblewrap

ROOT = Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else Path(sys.executable))
SECRET = "host-keyring-secret-5b1f0c"

# x86_64 and aarch64 numbers (the architectures the seccomp filter is built for)
CALLS = {"x86_64": {"add_key": 248, "keyctl": 250, "syslog": 103},
         "aarch64": {"add_key": 217, "keyctl": 219, "syslog": 116}}

PROBE = """
import ctypes, errno, json, sys
calls = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
KEYCTL_SEARCH, KEYCTL_READ, SESSION = 10, 11, -3
found = libc.syscall(calls["keyctl"], KEYCTL_SEARCH, SESSION, b"user", b"fa-test", 0)
print("search", found, errno.errorcode.get(ctypes.get_errno(), "-"))
if found > 0:
    buf = ctypes.create_string_buffer(256)
    n = libc.syscall(calls["keyctl"], KEYCTL_READ, found, buf, 256)
    print("read", buf.raw[:max(n, 0)].decode())
size = libc.syscall(calls["syslog"], 10, None, 0)  # SYSLOG_ACTION_SIZE_BUFFER
print("syslog", size, errno.errorcode.get(ctypes.get_errno(), "-"))
"""

RUNNER = """
import ctypes, json, subprocess, sys, warnings
from flink_agents_py.skills import RunSkillCommandTool
where, folder, calls = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
KEYCTL_JOIN_SESSION_KEYRING, SESSION = 1, -3
# a session keyring of this process's own: the test's session keyring is left as it was
assert libc.syscall(calls["keyctl"], KEYCTL_JOIN_SESSION_KEYRING, None) > 0, ctypes.get_errno()
secret = sys.argv[4].encode()
assert libc.syscall(calls["add_key"], b"user", b"fa-test", secret, len(secret), SESSION) > 0
if where == "host":  # the probe run by this process directly: it sees the key
    probe = subprocess.run([sys.executable, folder + "/box/probe.py", sys.argv[3]],
                           capture_output=True, text=True, check=True)
    print(json.dumps({"exit_code": probe.returncode, "output": probe.stdout}))
else:
    warnings.simplefilter("ignore")
    tool = RunSkillCommandTool(paths=[folder], allowed_commands=["python3"])
    print(json.dumps(tool.run("box", "python3 probe.py '" + sys.argv[3] + "'")))
"""


def probe(tmp_path: Path, where: str, calls: dict[str, int]) -> dict[str, object]:
    """The probe's result, run ``where`` (``host`` or ``sandbox``) by a child process
    whose session keyring holds ``SECRET``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this tree's code
    done = subprocess.run([PYTHON, "runner.py", where, str(tmp_path / "skills"),
                           json.dumps(calls), SECRET], cwd=tmp_path, capture_output=True,
                          text=True, env=env, timeout=120, check=False)
    if done.returncode != 0 and "AssertionError" in done.stderr and where == "host":
        pytest.skip(f"this kernel keeps no keyrings for the test: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert isinstance(result, dict)
    return result


def test_a_command_reads_neither_the_session_keyring_nor_the_kernel_log(tmp_path):
    require_bubblewrap()
    calls = CALLS.get(platform.machine())
    if calls is None:
        pytest.skip(f"the seccomp filter is not built for {platform.machine()}")
    skill = tmp_path / "skills" / "box"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: box\ndescription: Probes the kernel.\n---\n")
    (skill / "probe.py").write_text(PROBE)
    (tmp_path / "runner.py").write_text(textwrap.dedent(RUNNER))
    host = probe(tmp_path, "host", calls)
    assert f"read {SECRET}" in str(host["output"]), host  # the check can see a leak
    result = probe(tmp_path, "sandbox", calls)
    out = str(result["output"])
    assert result["exit_code"] == 0, out
    assert SECRET not in out, out
    assert "search -1 ENOSYS" in out and "syslog -1 ENOSYS" in out, out
