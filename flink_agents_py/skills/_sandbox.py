"""Runs a skill's command contained by the kernel: bubblewrap, rlimits, a streamed output.

The text rules of ``parse_command`` are a first filter only; containment comes from the
kernel, the way Flatpak and the coding-agent CLIs contain commands on Linux. A command
(a whole pipeline) runs in one bubblewrap (``bwrap``) sandbox:

- new user, PID, network, IPC, UTS and cgroup namespaces (``--unshare-all``): no network
  (a loopback of its own), no other process visible, every capability dropped (kept by
  ``_tmpfs``'s script only, to bound the tmpfs in files, until it runs the command);
- ``--die-with-parent`` and a PID namespace: killing the sandbox (at the timeout, or when
  this process dies) kills every process the command started;
- only ``/usr`` (with ``/bin``, ``/lib``... as on the host) read-only, a private ``/proc``
  (its files guarded by their mode only hidden or read-only: ``_procfs``), ``/dev`` and
  ``/tmp``; ``/etc`` holds only what programs need to start (the dynamic
  linker's cache, ``alternatives``, time zone) and a minimal ``passwd``/``group``: no
  host secrets, no home folders;
- the working directory ``/skill`` is a fresh, private tmpfs capped in size and files showing the
  skill's files read-only (a symlink in the folder resolves inside the sandbox, never on the
  host); a skill listed as writable gets its real folder bound read-write instead; nothing
  there, in ``/tmp`` or ``/dev/shm`` runs (``noexec``, ``_tmpfs``), and every socket, FIFO
  and device node of the folder's tree is covered (``_special``);
- an ``oom_score_adj`` of 1000 (``choom``): out of memory, the kernel kills the command's
  processes first, never the worker for them; and nice 19: busy, they get the CPU left over;
- per-process limits (``prlimit``, inside the sandbox): CPU seconds, address space, file
  size, open files, processes (counted per sandbox on Linux 5.14+), no core files; the
  kernel does not apply the process limit to root, so a job run as root puts each sandbox
  in a ``pids`` cgroup of its own instead, and a ``memory`` cgroup bounds the whole command's memory
  (``_cgroup``), where the host lets it make them;
- ``PATH`` is the system directories only, and every program the model names is resolved to
  an absolute path there before the sandbox starts;
- a pipeline runs inside the sandbox (``/bin/sh`` given only quoted words), so every stage
  reads the whole stream of the one before;
- the output is read as a stream: at most the cap is kept in memory, the rest is counted,
  and a note apart from the text says it was cut (``_output``).
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
import os
import shlex
import shutil
import stat
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..api import AgentsError
from ._cgroup import open_command_cgroup
from ._output import collect, render, stop
from ._procfs import proc_mask_args
from ._seccomp import seccomp_program
from ._setid import clear_set_id_bits
from ._special import TooManyEntriesError, special_file_covers
from ._tmpfs import BINDS_FSTAB, binds_fstab, bounded_tmpfs, remount_probe

__all__ = ["CommandRefusedError", "Limits", "PROBE_RETRY_S", "SandboxUnavailableError",
           "SYSTEM_PATH", "bubblewrap_installed", "bubblewrap_problem", "resolve_program",
           "run_pipeline"]

SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
"""The only directories programs are looked up in (host ``PATH`` is never used)."""

_ROOT_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_KEPT = ("alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime")
_WORKDIR = "/skill"
_USR_CONFIG = ("/usr/local/etc",)
"""Configuration folders inside ``/usr``, hidden by an empty read-only tmpfs: ``/usr/local``'s
own ``/etc``, where programs installed there keep their host-wide settings and the
credentials in them (npm's global ``npmrc`` with a registry ``_authToken``, a
``pip.conf`` with an index's password)."""
HOSTNAME = "sandbox"
"""The host name a command sees (``uname -n``): not the host's, which names the machine
inside its network."""
MAX_BOUND_ENTRIES = 64
"""The most entries at the top of a read-only skill's folder bound one by one (each by an
fd, over a private scratch); a folder with more is bound whole, read-only."""
OPEN_FILES = 256
"""The most files a process of a command holds open (``RLIMIT_NOFILE``). Each open socket or
pipe holds up to about 200 KiB of buffered data in kernel memory no other limit counts (the
job's own limit, inherited before, was 20,000 here: 4 GB per process)."""
OOM_SCORE_ADJ = 1000
"""The command's processes' ``oom_score_adj``: when the host runs out of memory, the kernel
kills them before any other process (the TaskManager's, the job's)."""
NICENESS = 19
"""The command's processes' nice value (the lowest priority): 64 processes spinning get
about the CPU of one normal process, the TaskManager's threads keep theirs."""
_PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus")
_log = logging.getLogger(__name__)
_INSTALL_HINT = ("install bubblewrap, on Linux (Debian/Ubuntu: apt-get install bubblewrap; "
                 "Fedora: dnf install bubblewrap; Arch: pacman -S bubblewrap), or pass "
                 "sandbox=\"none\" to trust the model like a shell user on this machine")


class CommandRefusedError(AgentsError):
    """A command a skill tool refused or stopped (the reason says which rule)."""


class SandboxUnavailableError(CommandRefusedError):
    """Bubblewrap is missing or cannot create its namespaces here (the text says what to do)."""


@dataclass(frozen=True)
class Limits:
    """Per-command resource limits (each process of the command gets them).

    Attributes:
        cpu_s: CPU seconds per process (``RLIMIT_CPU``; then SIGXCPU/SIGKILL).
        memory_mb: address space per process in MiB (``RLIMIT_AS``).
        file_mb: the largest file a process may write, in MiB (``RLIMIT_FSIZE``).
        processes: processes at once (``RLIMIT_NPROC``, counted in the sandbox's user
            namespace on Linux 5.14+; for root, whom the kernel exempts, a ``pids``
            cgroup's ``pids.max`` where one can be made; not applied with
            ``sandbox="none"``).
        scratch_mb: the size of the private working directory, in MiB (tmpfs).
        total_memory_mb: the memory of all of the command's processes together, the files
            they write in the sandbox's tmpfs included, in MiB (a ``memory`` cgroup: for a
            job run as root, where one can be made).
    """

    cpu_s: int
    memory_mb: int
    file_mb: int
    processes: int
    scratch_mb: int
    total_memory_mb: int = 2048


def _find(name: str) -> str | None:
    return shutil.which(name, path=os.pathsep.join(SYSTEM_PATH))


def _visible_roots() -> list[str]:
    roots = ["/usr"]
    roots += [d for d in _ROOT_DIRS if os.path.isdir(d) and not os.path.islink(d)]
    return roots


def resolve_program(name: str, skill_dirs: list[Path], contained: bool) -> str:
    """The absolute path of program ``name``, looked up in ``SYSTEM_PATH`` only.

    Args:
        name: a bare program name from the allow-list.
        skill_dirs: the skill folders; a program inside one is refused.
        contained: whether it will run in the sandbox (then it must be under ``/usr`` or
            another directory the sandbox shows).

    Returns:
        The path found (not the symlink's target, so a program named by ``argv[0]`` keeps
        its name).

    Raises:
        CommandRefusedError: when it is not installed there, or lives in a skill folder or
            outside what the sandbox shows.
    """
    found = _find(name)
    if found is None:
        raise CommandRefusedError(f"{name!r} is not installed (looked in "
                                  f"{os.pathsep.join(SYSTEM_PATH)})")
    real = os.path.realpath(found)
    for d in skill_dirs:
        root = os.path.realpath(d)
        if real == root or real.startswith(root.rstrip("/") + "/"):
            raise CommandRefusedError(f"{name!r} resolves into a skill's folder ({real})")
    if contained and not any(real.startswith(r + "/") for r in _visible_roots()):
        raise CommandRefusedError(f"{name!r} resolves to {real}, outside the directories "
                                  f"the sandbox shows ({', '.join(_visible_roots())})")
    return found


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for path in _USR_CONFIG:  # the host's settings (and secrets) kept under /usr
        if os.path.isdir(path) and not os.path.islink(path):
            args += ["--tmpfs", path, "--remount-ro", path]
    for d in _ROOT_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    # /proc/sys and /proc/sysrq-trigger read-only: bubblewrap leaves /proc/sys writable, and
    # a command run by root (uid 0 in its user namespace is the host's root) could set the
    # host's sysctls or reboot it (both check the file's owner only)
    args += ["--proc", "/proc"]
    for path in _PROC_READ_ONLY:
        if os.path.lexists(path):
            args += ["--ro-bind", path, path]
    # what only its mode guards (root-only files, for a job run as root) hidden or read-only
    args += proc_mask_args()
    args += ["--dev", "/dev", "--dir", "/etc"]
    for name in _ETC_KEPT:
        if os.path.lexists(f"/etc/{name}"):
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    return args


def _base_args(bwrap: str) -> list[str]:
    return [bwrap, "--unshare-all", "--unshare-user", "--cap-drop", "ALL", "--die-with-parent",
            "--new-session", "--hostname", HOSTNAME, *_system_binds()]


@dataclass(frozen=True)
class _Features:
    """What the installed bubblewrap supports beyond 0.4 (read from its ``--help``)."""

    size: bool = False  # --size for a tmpfs (0.8)
    bind_fd: bool = False  # --ro-bind-fd (0.5)
    disable_userns: bool = False  # --disable-userns (0.8)
    remount: bool = False  # a tmpfs can be bounded in files in the sandbox (_tmpfs)


def _probe_bubblewrap() -> tuple[str | None, _Features, bool]:
    """Probe bubblewrap now: does it run here, and what does it support.

    A result is for good when bubblewrap runs with every containment this host allows;
    a failure, or a remount refused, may pass (bwrap installed since, a sysctl or an
    AppArmor profile changed, a transient error) and is probed again later.

    Returns:
        (a problem, or None; the features; whether the result is for good).
    """
    bwrap = _find("bwrap")
    if bwrap is None:
        return f"bubblewrap (bwrap) is not installed: {_INSTALL_HINT}", _Features(), False
    true = _find("true") or "/usr/bin/true"
    try:
        probe = subprocess.run([*_base_args(bwrap), "--", true], capture_output=True,
                               timeout=30, check=False)
        helptext = subprocess.run([bwrap, "--help"], capture_output=True, timeout=30,
                                  check=False).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bubblewrap ({bwrap}) could not start: {e}; {_INSTALL_HINT}", _Features(), False
    if probe.returncode != 0:
        why = probe.stderr.decode(errors="replace").strip()[:300]
        return (f"bubblewrap ({bwrap}) cannot create its namespaces here ({why}): allow "
                f"unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; "
                f"on Ubuntu 24.04+ an AppArmor profile for bwrap, or "
                f"kernel.apparmor_restrict_unprivileged_userns=0; in a container, a "
                f"seccomp profile that allows them), or pass sandbox=\"none\" to trust "
                f"the model like a shell user"), _Features(), False
    bounding = remount_probe()
    remount = bounding is not None and subprocess.run(
        [*_base_args(bwrap), *bounding], capture_output=True, timeout=30,
        check=False).returncode == 0
    if bounding is not None and not remount:
        _warn_no_remount()
    return None, _Features(size=b"--size" in helptext, bind_fd=b"--ro-bind-fd" in helptext,
                           disable_userns=b"--disable-userns" in helptext,
                           remount=remount), bounding is None or remount


PROBE_RETRY_S = 60.0
"""How long a failed bubblewrap probe (not installed, no namespaces, the remount refused)
is kept before the next command probes again. Until then commands are refused (or run
without the file bound and ``noexec``) at no cost; after it, one command pays the probe
(about 10 ms) and, where bubblewrap now runs, every later one is contained by it. A
successful probe is kept for the process's life."""


class _Status:
    """The bubblewrap probe's result, kept for good once it succeeds.

    A failure is kept for ``PROBE_RETRY_S``; one probe runs at a time (others wait for its
    result, none starts another).
    """

    def __init__(self) -> None:
        self._clock = time.monotonic
        self._lock = threading.Lock()
        self._result: tuple[str | None, _Features] | None = None
        self._until = 0.0  # when a result not kept for good is probed again

    def __call__(self) -> tuple[str | None, _Features]:
        result = self._result
        if result is not None and self._clock() < self._until:
            return result
        with self._lock:
            if self._result is None or self._clock() >= self._until:
                problem, features, lasting = _probe_bubblewrap()
                self._result = (problem, features)
                self._until = math.inf if lasting else self._clock() + PROBE_RETRY_S
            return self._result

    def cache_clear(self) -> None:
        """Forget the result: the next command probes again."""
        with self._lock:
            self._result, self._until = None, 0.0


_bubblewrap_status = _Status()


def bubblewrap_installed() -> bool:
    """Whether ``bwrap`` is in ``SYSTEM_PATH`` (cheap: no probe).

    Returns:
        ``True`` when it is.
    """
    return _find("bwrap") is not None


def bubblewrap_problem() -> str | None:
    """Why commands cannot run in the sandbox here, or ``None`` when they can.

    ``bwrap`` is looked up in ``SYSTEM_PATH`` and started once with the sandbox's
    namespaces; a success is kept for the process's life, a failure for ``PROBE_RETRY_S``
    (then the next call or command probes again: bubblewrap installed or allowed since is
    used without a restart).

    Returns:
        ``None``, or the reason and what to install or change.
    """
    return _bubblewrap_status()[0]


@functools.lru_cache(maxsize=1)
def _warn_no_remount() -> None:  # once: the probe is made again while it is refused
    _log.warning("this host refuses a remount in the skill sandbox: its /tmp, /skill and "
                 "/dev/shm are bounded in size only, not in files, and a file there can be "
                 "run (not noexec)")


@functools.lru_cache(maxsize=1)
def _warn_no_limits() -> None:
    _log.warning("prlimit (util-linux) is not installed: skill commands run with "
                 "sandbox='none' get no CPU, memory, file or process limits (the timeout "
                 "holds)")


def _data_fd(data: str | bytes) -> int:
    # a memfd, not a pipe: a pipe's buffer (64 KiB) would block the write of a longer text
    # (the binds' fstab of 64 long names) with no reader yet
    raw = memoryview(data.encode() if isinstance(data, str) else data)
    fd = os.memfd_create("skill-sandbox-data", os.MFD_CLOEXEC)
    while raw:
        raw = raw[os.write(fd, raw):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _workdir_args(skill_dir: Path, folder: int, writable: bool, scratch_mb: int,
                  features: _Features, fds: list[int]) -> list[str]:
    """The binds of ``/skill``; opened entries' fds are appended to ``fds`` (to pass, close).

    The folder is the one loaded (``folder``, its fd), whatever ``skill_dir`` shows now.
    Each entry is opened from it without following a symlink and bound by its fd where
    bubblewrap can: an entry swapped for a symlink after it was looked at is never followed
    on the host. A folder with more than ``MAX_BOUND_ENTRIES`` entries at its top is
    bound whole instead, read-only, by the folder's fd (no scratch: a command writes in
    ``/tmp``).

    Returns:
        bwrap's arguments.
    """
    if writable and features.bind_fd:
        fds.append(os.dup(folder))
        return ["--bind-fd", str(fds[-1]), _WORKDIR]
    if writable:
        return ["--bind", str(skill_dir), _WORKDIR]
    with os.scandir(_pinned(folder)) as listing:
        if len(list(itertools.islice(listing, MAX_BOUND_ENTRIES + 1))) > MAX_BOUND_ENTRIES:
            # one fd, not one per entry: a folder of thousands of files would fill this
            # process's fd table (every thread's open failing) and the command's arguments
            if features.bind_fd:
                fds.append(os.dup(folder))
                return ["--ro-bind-fd", str(fds[-1]), _WORKDIR]
            return ["--ro-bind", str(skill_dir), _WORKDIR]
    args = (["--size", str(scratch_mb << 20)] if features.size else []) + ["--tmpfs", _WORKDIR]
    for entry in sorted(_pinned(folder).iterdir()):
        inside = f"{_WORKDIR}/{entry.name}"
        if entry.is_symlink():  # recreated: it resolves inside the sandbox, not on the host
            args += ["--symlink", os.readlink(entry), inside]
            continue
        if not features.bind_fd:
            if entry.is_dir() or entry.is_file():
                args += ["--ro-bind", str(skill_dir / entry.name), inside]
            continue
        try:
            fd = os.open(entry, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # gone since it was listed
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
            fds.append(fd)  # bubblewrap closes it once bound
            args += ["--ro-bind-fd", str(fd), inside]
        else:  # a FIFO, socket or device is never shown, and its fd never reaches the
            os.close(fd)  # command (its /proc/self/fd link would open the host's file)
    return args


def _limit_args(prlimit: str, limits: Limits, contained: bool) -> list[str]:
    args = [prlimit, f"--cpu={limits.cpu_s}:{limits.cpu_s + 1}",  # SIGXCPU, then SIGKILL
            f"--as={limits.memory_mb << 20}",
            f"--fsize={limits.file_mb << 20}", "--core=0", f"--nofile={OPEN_FILES}"]
    if contained:  # outside a user namespace the kernel counts all of the user's processes
        args.append(f"--nproc={limits.processes}")
    return [*args, "--"]


def _inner_command(stages: list[list[str]]) -> list[str]:
    if len(stages) == 1:
        return stages[0]
    sh = _find("sh") or "/bin/sh"
    return [sh, "-c", " | ".join(shlex.join(argv) for argv in stages)]


def _pinned(folder: int) -> Path:
    """A path of this process reaching the folder open as fd ``folder`` (never another)."""
    return Path(f"/proc/self/fd/{folder}")


def run_pipeline(stages: list[list[str]], *, skill_dir: Path, folder: int, writable: bool,
                 contained: bool,
                 limits: Limits, timeout_s: float,
                 max_output_chars: int) -> tuple[int, str, dict[str, Any]]:
    """Run a parsed pipeline (programs already absolute) and return its exit code and output.

    Args:
        stages: one argument list per stage, each program an absolute path.
        skill_dir: the skill's folder (shown read-only at ``/skill``, the working directory).
        folder: an fd of that folder, opened when it was checked to be the one loaded
            (``Skill.open_folder``; not closed here): what runs reaches that folder, even
            if ``skill_dir`` was swapped since.
        writable: bind the skill's folder read-write instead of the private scratch.
        contained: run in the bubblewrap sandbox; ``False`` (``sandbox="none"``) runs it on
            the host in the skill's folder, with the limits but no namespaces.
        limits: the per-process resource limits.
        timeout_s: the longest the whole pipeline may run, in seconds (wall clock).
        max_output_chars: the most characters of output returned.

    Returns:
        The last stage's exit code; its stdout then any stderr, cut at
        ``max_output_chars``; the framework's notes, apart from that text (``output_cut``:
        how much was kept of how much the command wrote; ``stopped``: the limit that
        ended it), so no output can pass for one.

    Raises:
        SandboxUnavailableError: when ``contained`` and bubblewrap cannot run here.
        CommandRefusedError: when the command runs past ``timeout_s`` (every process it
            started is killed first), or a helper program is missing.
    """
    prlimit = _find("prlimit")
    if prlimit is None and contained:
        raise CommandRefusedError("prlimit (util-linux) is not installed; it sets the "
                                  "command's resource limits")
    if prlimit is None:  # sandbox="none" where util-linux is absent (macOS): no limits
        _warn_no_limits()
        inner = _inner_command(stages)
    else:
        inner = [*_limit_args(prlimit, limits, contained), *_inner_command(stages)]
    choom = _find("choom")  # util-linux 2.33+: the kernel's OOM killer picks these first
    if choom is not None:
        inner = [choom, "-n", str(OOM_SCORE_ADJ), "--", *inner]
    nice = _find("nice")  # the lowest CPU priority: busy loops never starve the worker
    if nice is not None:
        inner = [nice, "-n", str(NICENESS), *inner]
    env = {"PATH": os.pathsep.join(SYSTEM_PATH), "LANG": "C.UTF-8"}
    argv: list[str] = inner
    fds: list[int] = []  # passed to bwrap, closed here once it started
    cwd = Path("/")  # contained: bwrap and the cgroup's shell never show the job's folder
    if not contained:  # the folder loaded, by its fd (kept open in the child)
        fds.append(os.dup(folder))
        cwd = Path(f"/proc/self/fd/{fds[-1]}")
    if contained:
        problem, features = _bubblewrap_status()
        if problem is not None:
            raise SandboxUnavailableError(problem)
    # root: the kernel skips RLIMIT_NPROC, a cgroup holds the sandbox (its 2 bwrap included)
    # and bounds the memory of all its processes together
    cgroup = (open_command_cgroup(limits.processes + 2, limits.total_memory_mb << 20)
              if contained else None)
    try:
        if contained:
            argv = _sandbox_args(inner, env, skill_dir, folder, writable, limits, features,
                                 fds)
            if cgroup is not None:
                argv = cgroup.wrap(argv)
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=cwd, env=env, pass_fds=fds,
                                start_new_session=True)
    except BaseException as e:
        if cgroup is not None:  # nothing runs in it: gone with the failed start
            cgroup.close()
        if isinstance(e, OSError):
            raise CommandRefusedError(f"the command could not start: {e}") from e
        raise
    finally:
        for fd in fds:
            os.close(fd)
    try:
        out, err, finished = collect(proc, time.monotonic() + timeout_s,
                                     max_output_chars * 4, contained)
    finally:
        stop(proc, contained)
        if cgroup is not None:
            cgroup.close()
        if writable and contained and seccomp_program() is None:  # the kernel did not refuse
            clear_set_id_bits(folder, skill_dir)
    if not finished:
        raise CommandRefusedError(f"the command ran past {timeout_s} s and was stopped "
                                  f"(every process it started was killed)")
    bounds = (f"CPU {limits.cpu_s} s, memory {limits.memory_mb} MiB, files "
              f"{limits.file_mb} MiB, {limits.processes} processes")
    return proc.returncode, *render(out, err, proc.returncode, max_output_chars, bounds)


def _sandbox_args(inner: list[str], env: dict[str, str], skill_dir: Path, folder: int,
                  writable: bool, limits: Limits, features: _Features, fds: list[int]) -> list[str]:
    """The ``bwrap`` command line running ``inner``; the fds it needs are added to ``fds``."""
    workdir = _workdir_args(skill_dir, folder, writable, limits.scratch_mb, features, fds)
    try:  # a socket or FIFO of the tree would reach the host process at its other end
        covers = special_file_covers(folder, _WORKDIR, "--tmpfs" not in workdir)
    except TooManyEntriesError as e:
        raise CommandRefusedError(str(e)) from e
    program = seccomp_program()  # no setuid/setgid bit set on any file, by the kernel
    caps: list[str] = []
    # each writable tmpfs bounded in files too (kernel memory its size does not count), then
    # every capability dropped; the filter refuses new user namespaces (--disable-userns
    # would nest one, where no remount is allowed)
    if program is not None and features.remount:
        tmpfs = ["/tmp", *([_WORKDIR] if "--tmpfs" in workdir else []),
                 *(["/dev/shm"] if features.size else [])]
        binds = _bind_points(workdir)
        caps, inner = bounded_tmpfs(inner, tmpfs, limits.scratch_mb, bool(binds))
        if caps and binds:  # the binds the script remounts noexec, in one mount -a
            fds.append(_data_fd(binds_fstab(binds)))
            caps += ["--ro-bind-data", str(fds[-1]), BINDS_FSTAB]
    uid, gid = (0, 0) if caps else (os.getuid(), os.getgid())  # the sandbox's user
    passwd = _data_fd("root:x:0:0:root:/tmp:/usr/sbin/nologin\n" + (
        f"sandbox:x:{uid}:{gid}:sandbox:/tmp:/usr/sbin/nologin\n" if uid else ""))
    fds.append(passwd)
    group = _data_fd("root:x:0:\n" + (f"sandbox:x:{gid}:\n" if gid else ""))
    fds.append(group)
    seccomp: list[str] = []
    if program is not None:
        fds.append(_data_fd(program))
        seccomp = ["--seccomp", str(fds[-1])]
    # no user namespace of its own: every capability inside one, and the kernel code behind
    nested = ["--disable-userns"] if features.disable_userns and not caps else []
    return [*_base_args(_find("bwrap") or "bwrap"), *caps, *seccomp, *nested,
            *(["--size", str(limits.scratch_mb << 20)] if features.size else []),
            "--tmpfs", "/tmp",
            "--ro-bind-data", str(passwd), "/etc/passwd",
            "--ro-bind-data", str(group), "/etc/group",
            *workdir, *covers, *_read_only_root(limits, features),
            "--chdir", _WORKDIR, "--clearenv", "--setenv", "HOME", "/tmp",
            *[a for k, v in env.items() for a in ("--setenv", k, v)], "--", *inner]


def _bind_points(workdir: list[str]) -> list[tuple[str, bool, int]]:
    """Each bind of ``_workdir_args``: where, whether read-write, its host mount's flags."""
    binds = []  # flags of each fd or path bound: an entry may be a host mount of its own
    for i, arg in enumerate(workdir):
        if arg in ("--bind-fd", "--ro-bind-fd"):
            flags = os.fstatvfs(int(workdir[i + 1])).f_flag
        elif arg in ("--bind", "--ro-bind"):
            flags = os.statvfs(workdir[i + 1]).f_flag
        else:
            continue
        binds.append((workdir[i + 2], arg in ("--bind", "--bind-fd"), flags))
    return binds


def _read_only_root(limits: Limits, features: _Features) -> list[str]:
    """Make the sandbox's root and ``/dev`` read-only, after every mount point is made.

    bubblewrap builds both as tmpfs with no size limit: writable, a command could fill
    ``/``, ``/etc`` or ``/dev/shm`` with RAM (``max_file_mb`` per file, any number of
    files) until the host runs out. Only ``/skill``, ``/tmp`` and a ``/dev/shm`` of
    ``max_scratch_mb`` (where bubblewrap sizes a tmpfs, 0.8+) stay writable.

    Returns:
        bwrap's arguments.
    """
    shm = (["--size", str(limits.scratch_mb << 20), "--tmpfs", "/dev/shm"] if features.size
           else [])
    return [*shm, "--remount-ro", "/dev", "--remount-ro", "/"]
