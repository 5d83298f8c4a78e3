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
import warnings
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
try:  # /proc/keys lists the keys the reader may view, with their descriptions
    listed = "fa-test" in open("/proc/keys").read()
except OSError as e:
    listed = e.strerror
print("proc-keys", listed)
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


def test_proc_keys_does_not_list_the_jobs_session_keyring_in_a_command(tmp_path):
    """``/proc/keys`` is readable by anyone and belongs to no namespace: it lists the keys
    of the session keyring a command inherits from the job, with their descriptions (a
    Kerberos ticket's principal, a user's name), even with the keyring syscalls refused."""
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
    if "proc-keys True" not in str(host["output"]):
        pytest.skip(f"this kernel has no /proc/keys listing the key: {host['output']}")
    result = probe(tmp_path, "sandbox", calls)
    out = str(result["output"])
    assert result["exit_code"] == 0, out
    assert "proc-keys True" not in out and "proc-keys" in out, out



READ_PROC = """
import os, sys
for path in ("/" + name for name in sys.argv[1:]):  # an absolute argument is refused
    try:
        with open(path, "rb") as f:
            print(path, "read", len(f.read(4096)))
    except OSError as e:
        print(path, "refused", e.strerror)
"""


def test_proc_files_only_root_may_read_stay_closed_to_a_command_of_a_job_run_as_root(
        tmp_path):
    """A job run as root is uid 0 in the sandbox's user namespace, the host's root: the
    ``/proc`` files the kernel guards by their mode only (``kpageflags``, ``slabinfo``,
    ``vmallocinfo``, ``timer_list``...: physical page and kernel heap layouts) opened for
    the command as for root on the host."""
    require_bubblewrap()
    guarded = sorted(str(p) for p in Path("/proc").iterdir()
                     if not p.name.isdigit() and p.is_file() and not p.is_symlink()
                     and not p.stat().st_mode & 0o004 and p.stat().st_mode & 0o400)
    readable = [p for p in guarded if os.access(p, os.R_OK)]
    if not readable:
        pytest.skip("this test does not run as root (the kernel keeps others out of these "
                    "files by their mode already)")
    with open(readable[0], "rb") as f:
        f.read(1)  # the host's root reads them: the check can see a leak
    skill = tmp_path / "skills" / "box"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: box\ndescription: Reads /proc.\n---\n")
    (skill / "read.py").write_text(READ_PROC)
    from flink_agents_py.skills import RunSkillCommandTool, ShellEquivalentCommandWarning

    with warnings.catch_warnings():  # python3 runs programs: warned
        warnings.simplefilter("ignore", ShellEquivalentCommandWarning)
        tool = RunSkillCommandTool(paths=[str(tmp_path / "skills")],
                                   allowed_commands=["python3"])
    result = tool.run("box", "python3 read.py " + " ".join(p[1:] for p in readable))
    out = str(result["output"])
    assert result["exit_code"] == 0, out
    assert " read " not in out and out.count("refused") == len(readable), out


def test_the_proc_entries_hidden_or_made_read_only_are_read_from_the_hosts_modes(tmp_path):
    """Which files a kernel has varies: the host's ``/proc`` is read, not a list trusted.
    Here a folder shaped like it: root-only files and folders are hidden, ``keys`` (readable
    by all) too, and what the host covers (a container's ``/dev/null`` over ``kcore``); a
    file root may write is read-only; process folders are left alone."""
    from flink_agents_py.skills._procfs import proc_mask_args

    root = tmp_path / "proc"
    for path, mode in (("kpageflags", 0o400), ("keys", 0o444), ("cpuinfo", 0o444),
                       ("mtrr", 0o644), ("tty/driver/serial", 0o444),
                       ("fs/nfs/exports", 0o444), ("1234/environ", 0o400),
                       ("sys/kernel/x", 0o600)):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("x")
        (root / path).chmod(mode)
    (root / "tty" / "driver").chmod(0o500)
    (root / "self").symlink_to("1234")
    os.mkfifo(root / "kcore")  # not a regular file: covered by the host (a container's
    os.chmod(root / "kcore", 0o666)  # /dev/null), the sandbox's fresh procfs would not be
    args = list(proc_mask_args(str(root)))
    proc_mask_args.cache_clear()  # the next sandbox reads the real /proc again
    triples = list(zip(args, args[1:], args[2:], strict=False))
    assert ("--ro-bind", "/dev/null", "/proc/kpageflags") in triples, args
    assert ("--ro-bind", "/dev/null", "/proc/keys") in triples, args
    assert ("--ro-bind", "/dev/null", "/proc/kcore") in triples, args
    assert ("--tmpfs", "/proc/tty/driver", "--remount-ro") in triples, args
    assert ("--ro-bind", "/proc/mtrr", "/proc/mtrr") in triples, args
    assert not any(p in " ".join(args) for p in ("cpuinfo", "exports", "1234", "sys/")), args
    (root / "tty" / "driver").chmod(0o700)  # tmp_path is removed by the test run


ATTACK_SURFACE = {"x86_64": {"perf_event_open": 298, "bpf": 321, "userfaultfd": 323},
                  "aarch64": {"perf_event_open": 241, "bpf": 280, "userfaultfd": 282}}

SURFACE_PROBE = """
import ctypes, errno, json, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
attr = (ctypes.c_uint8 * 128)()  # this process, user space only
attr[0], attr[4] = 1, 128  # PERF_TYPE_SOFTWARE (config 0: cpu-clock), size
attr[40] = 1 | 1 << 5 | 1 << 6  # disabled, exclude_kernel, exclude_hv
args = {"perf_event_open": (attr, 0, -1, -1, 0), "bpf": (0, None, 0),
        "userfaultfd": (1,)}  # UFFD_USER_MODE_ONLY
for name, nr in json.loads(sys.argv[1]).items():
    got = libc.syscall(nr, *args[name])
    print(name, errno.errorcode.get(ctypes.get_errno(), "-") if got < 0 else "ok")
"""


def test_perf_events_bpf_and_userfaultfd_are_absent_in_a_command(tmp_path):
    """Kernel code no skill command needs, where local privilege escalations are found (the
    eBPF verifier, userfaultfd's pauses) or the host's other processes are measured (CPU
    counters): a command of a job run as root is the host's root, a kernel bug reached is
    the host's. The calls fail with ``ENOSYS``; this process, outside, gets other answers."""
    require_bubblewrap()
    calls = ATTACK_SURFACE.get(platform.machine())
    if calls is None:
        pytest.skip(f"the seccomp filter is not built for {platform.machine()}")
    skill = tmp_path / "skills" / "box"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: box\ndescription: Probes the kernel.\n---\n")
    (skill / "probe.py").write_text(SURFACE_PROBE)
    host = subprocess.run([sys.executable, str(skill / "probe.py"), json.dumps(calls)],
                          capture_output=True, text=True, check=True, timeout=60).stdout
    assert any(f"{name} ENOSYS" not in host for name in calls), host  # the check can fail
    from flink_agents_py.skills import RunSkillCommandTool, ShellEquivalentCommandWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShellEquivalentCommandWarning)
        tool = RunSkillCommandTool(paths=[str(tmp_path / "skills")],
                                   allowed_commands=["python3"])
    result = tool.run("box", "python3 probe.py '" + json.dumps(calls) + "'")
    out = str(result["output"])
    assert result["exit_code"] == 0, out
    assert all(f"{name} ENOSYS" in out for name in calls), (host, out)


HOLD_PROBE = """
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
chunk = b"x" * (1 << 20)
try:  # twice the address space the command is allowed, in memfds of 32 MiB
    fds = [os.memfd_create("m") for _ in range(int(sys.argv[1]) // 32)]
    for fd in fds:
        for _ in range(32):
            os.write(fd, chunk)
    print("memfd held", len(fds) * 32, "MiB")
except OSError as e:
    print("memfd", errno.errorcode[e.errno])
IPC_PRIVATE, IPC_CREAT, IPC_RMID = 0, 0o1000, 0
seg = libc.shmget(IPC_PRIVATE, 1 << 20, IPC_CREAT | 0o600)
print("shmget", "ok" if seg >= 0 else errno.errorcode[ctypes.get_errno()])
if seg >= 0:
    libc.shmctl(seg, IPC_RMID, None)
queue = libc.msgget(IPC_PRIVATE, IPC_CREAT | 0o600)  # 16 KiB of messages each, 32,000 of them
print("msgget", "ok" if queue >= 0 else errno.errorcode[ctypes.get_errno()])
if queue >= 0:
    libc.msgctl(queue, IPC_RMID, None)
sems = libc.semget(IPC_PRIVATE, 1000, IPC_CREAT | 0o600)
print("semget", "ok" if sems >= 0 else errno.errorcode[ctypes.get_errno()])
if sems >= 0:
    libc.semctl(sems, 0, IPC_RMID)
"""


def test_a_command_holds_no_memory_past_its_limits_in_memfds_or_system_v_segments(tmp_path):
    """A memfd or a System V segment holds memory in no sized tmpfs and, once unmapped, in
    no process's address space: each process of a command could hold any amount, past
    ``max_memory_mb``, until the host ran out (a job not run as root has no ``memory``
    cgroup bounding the command). System V message queues and semaphore sets are kernel
    memory no rlimit bounds (about 500 MB of messages per IPC namespace by default). All
    are absent (``ENOSYS``); the test sees them work outside, and ``shm_open`` (a file in
    the capped ``/dev/shm``) still works inside."""
    require_bubblewrap()
    if platform.machine() not in ATTACK_SURFACE:
        pytest.skip(f"the seccomp filter is not built for {platform.machine()}")
    skill = tmp_path / "skills" / "box"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: box\ndescription: Holds memory.\n---\n")
    (skill / "hold.py").write_text(HOLD_PROBE)
    host = subprocess.run([sys.executable, str(skill / "hold.py"), "64"], capture_output=True,
                          text=True, check=True, timeout=60).stdout
    assert all(f"{call} ok" in host for call in ("shmget", "msgget", "semget")), host
    assert "memfd held 64 MiB" in host, host  # the check can fail
    from flink_agents_py.skills import RunSkillCommandTool, ShellEquivalentCommandWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShellEquivalentCommandWarning)
        tool = RunSkillCommandTool(paths=[str(tmp_path / "skills")],
                                   allowed_commands=["python3"], max_memory_mb=128)
    result = tool.run("box", "python3 hold.py 256")
    out = str(result["output"])
    assert all(f"{call} ENOSYS" in out for call in ("memfd", "shmget", "msgget", "semget")), out
    shared = tool.run("box", "python3 -c 'from multiprocessing.shared_memory import "
                             "SharedMemory as S; m = S(create=True, size=4096); "
                             "print(m.size); m.close(); m.unlink()'")
    assert shared["exit_code"] == 0 and "4096" in shared["output"], shared


STOP_INIT = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = libc.syscall.restype = ctypes.c_long
PTRACE_ATTACH = 16  # sends init a SIGSTOP, which outlives this tracer
attached = libc.ptrace(PTRACE_ATTACH, 1, None, None)
print("ptrace", errno.errorcode.get(ctypes.get_errno(), "-") if attached < 0 else "ok")
buf = ctypes.create_string_buffer(64)
local = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 64)
remote = (ctypes.c_void_p * 2)(0x400000, 64)
got = libc.process_vm_readv(1, local, 1, remote, 1, 0)
print("process_vm_readv", errno.errorcode.get(ctypes.get_errno(), "-") if got < 0 else "ok")
"""


def test_a_command_that_stops_the_sandboxs_init_ends_when_it_ends(tmp_path):
    """bubblewrap's init (pid 1 of the sandbox) runs as the command's user and ends the
    sandbox when the command ends. A command attached to it with ``ptrace`` and stopped it,
    then exited: the sandbox, and whatever the command left running in it, lived on until
    the timeout, holding the tool call all that time. ``ptrace`` and ``process_vm_readv``
    (reading another process's memory) are absent (``ENOSYS``), so the call ends with the
    command, long before its timeout."""
    require_bubblewrap()
    if platform.machine() not in ATTACK_SURFACE:
        pytest.skip(f"the seccomp filter is not built for {platform.machine()}")
    skill = tmp_path / "skills" / "box"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: box\ndescription: Stops its init.\n---\n")
    (skill / "stop.py").write_text(STOP_INIT)
    from flink_agents_py.skills import RunSkillCommandTool, ShellEquivalentCommandWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShellEquivalentCommandWarning)
        tool = RunSkillCommandTool(paths=[str(tmp_path / "skills")],
                                   allowed_commands=["python3"], timeout_s=30)
    result = tool.run("box", "python3 stop.py")  # raises, past 30 s, when init is stopped
    out = str(result["output"])
    assert result["exit_code"] == 0, out
    assert "ptrace ENOSYS" in out and "process_vm_readv ENOSYS" in out, out
