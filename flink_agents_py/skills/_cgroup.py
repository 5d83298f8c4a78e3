"""Limits the kernel applies to root too: a ``pids`` and a ``memory`` cgroup per command.

``RLIMIT_NPROC`` (``prlimit --nproc``) is not applied to root: the kernel exempts its
real user from the count, so a skill command run by a job running as root (containers,
CI runners) could fork until the host runs out of process ids. The cgroup ``pids``
controller has no such exemption (Linux 4.3+, ``Documentation/admin-guide/cgroup-v2.rst``,
"PID"; and the v1 ``pids`` hierarchy): a fresh cgroup with ``pids.max`` set holds the
whole sandbox, threads included, and a fork past it fails with ``EAGAIN``.

``RLIMIT_AS`` bounds one process's memory only: a command's processes together (each up
to ``max_memory_mb``, and the files they write in the sandbox's tmpfs) could take the
host's memory until the kernel's OOM killer picks a victim, the TaskManager maybe. A fresh
``memory`` cgroup (``memory.max``, v1 ``memory.limit_in_bytes``; swap included where the
host accounts it) bounds the whole command; past it the kernel reclaims or kills inside
the cgroup only.

The sandbox's first process moves itself into the cgroups before ``exec``-ing bubblewrap
(``/bin/sh -c 'echo $$ > cgroup.procs ... && exec ...'``), so no process of the command is
ever outside them. Where a controller's cgroup cannot be made (no such controller, a
read-only ``/sys/fs/cgroup``, not root), the command goes without it and the log says why
once; the command then runs with the rlimits only (the timeout still ends it).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

__all__ = ["CommandCgroup", "open_command_cgroup"]

_log = logging.getLogger(__name__)
_MOUNTS = Path("/proc/self/mounts")
_OWN = Path("/proc/self/cgroup")
_PREFIX = "flink-agents-py-skill-"
_warned: set[tuple[str, str]] = set()
_moves: list[bool] = []  # [whether a process can move itself into one], once probed
# the shell moving itself into each cgroup ("$1".."$n" their cgroup.procs), then exec-ing
_MOVE = ('n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; '
         'n=$((n - 1)); done; exec "$@"')


def _warn_once(what: str, why: str) -> None:
    if (what, why) not in _warned:
        _warned.add((what, why))
        _log.warning("skill commands run by root get no %s: %s (the kernel does not apply "
                     "RLIMIT_NPROC to root, RLIMIT_AS bounds one process only; the "
                     "command's timeout still ends it)", what, why)


def _parent_dir(controller: str) -> Path | None:
    """The folder a new cgroup of ``controller`` goes in: this process's own or the root.

    v1 (a ``cgroup`` mount with the controller's option): under this process's cgroup in
    that hierarchy. v2 (``cgroup2`` whose root lists the controller in
    ``cgroup.subtree_control``): under the root, since a v2 cgroup holding processes cannot
    enable a controller for its children (the "no internal processes" rule).

    Returns:
        The folder, or ``None`` when neither is mounted.
    """
    try:
        mounts = [line.split() for line in _MOUNTS.read_text().splitlines()]
        own = [line.split(":", 2) for line in _OWN.read_text().splitlines()]
    except OSError:
        return None
    for fields in mounts:
        if len(fields) > 3 and fields[2] == "cgroup" and controller in fields[3].split(","):
            rel = next((path for _, ctrls, path in own if controller in ctrls.split(",")),
                       "/")
            return Path(fields[1]) / rel.lstrip("/")
    for fields in mounts:
        if len(fields) > 3 and fields[2] == "cgroup2":
            root = Path(fields[1])
            try:
                enabled = (root / "cgroup.subtree_control").read_text().split()
            except OSError:
                continue
            if controller in enabled:
                return root
    return None


class CommandCgroup:
    """One skill command's cgroups: made by ``open_command_cgroup``, gone by ``close``.

    Args:
        paths: the cgroups' folders (limits already written): one per v1 hierarchy, or
            one v2 cgroup holding both controllers.
    """

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run by a shell that first moves itself into the cgroups.

        Args:
            argv: the sandbox's command line (``bwrap ...``).

        Returns:
            ``/bin/sh -c '... echo $$ > <cgroup.procs> ... && exec "$@"' ...``: if a move
            fails the command does not run (its output says why).
        """
        return ["/bin/sh", "-c", _MOVE, "sh", str(len(self.paths)),
                *(str(p / "cgroup.procs") for p in self.paths), *argv]

    def close(self, timeout_s: float = 10.0) -> None:
        """Kill what is left in the cgroups and remove them.

        Polls until each cgroup is empty (at most ``timeout_s`` seconds in all), then
        removes its folder; a cgroup that does not empty in time is left behind and logged.

        Args:
            timeout_s: how long to wait for its processes to go, in seconds.
        """
        deadline = time.monotonic() + timeout_s
        for path in self.paths:
            _empty_and_remove(path, deadline)


def _empty_and_remove(path: Path, deadline: float) -> None:
    kill = path / "cgroup.kill"  # v2, Linux 5.14+
    while True:
        try:
            pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
        except OSError:
            return  # gone already
        if not pids:
            break
        if time.monotonic() > deadline:
            _log.warning("the skill command's cgroup %s still holds processes %s", path,
                         pids[:10])
            return
        try:
            if kill.exists():
                kill.write_text("1")
            else:
                for pid in pids:
                    os.kill(pid, signal.SIGKILL)
        except OSError:
            pass  # gone meanwhile
        time.sleep(0.01)  # poll: the kernel reaps them shortly
    try:
        path.rmdir()
    except OSError as e:
        _log.warning("could not remove the skill command's cgroup %s: %s", path, e)


def _limit_files(memory_bytes: int, v1: bool) -> list[tuple[str, str]]:
    if v1:  # swap after memory: memsw may not be below limit_in_bytes
        return [("memory.limit_in_bytes", str(memory_bytes)),
                ("memory.memsw.limit_in_bytes", str(memory_bytes))]
    return [("memory.max", str(memory_bytes)), ("memory.swap.max", "0")]


def _make(parent: Path, name: str, limits: list[tuple[str, str]], what: str) -> Path | None:
    path = parent / name
    shared = path.exists()  # v2: both controllers' limits in one folder
    try:
        if not shared:
            path.mkdir()
    except OSError as e:
        _warn_once(what, f"cannot make a cgroup in {parent} ({e.strerror})")
        return None
    for i, (file, value) in enumerate(limits):
        try:
            (path / file).write_text(value)
        except OSError as e:
            if i > 0 and not (path / file).exists():
                continue  # swap not accounted on this host
            _warn_once(what, f"cannot set {file} in {parent} ({e.strerror})")
            if not shared:
                try:
                    path.rmdir()
                except OSError:
                    pass
            return None
    return path


def _sweep_stale(parent: Path) -> None:
    """Remove the empty cgroups of ours left by a process that died mid-command.

    A worker killed while a command ran (``SIGKILL``, the OOM killer) never reached
    ``close``: its command's processes died with it (``--die-with-parent``), its cgroup
    folders stayed, one per such death. Each named by a process no longer alive and
    holding no process is removed (a live one, or one whose number was reused, is left).
    """
    try:
        entries = list(parent.glob(f"{_PREFIX}*"))
    except OSError:
        return
    for path in entries:
        owner = path.name[len(_PREFIX):].split("-", 1)[0]
        if not owner.isdigit() or int(owner) == os.getpid():
            continue
        try:
            os.kill(int(owner), 0)
            continue  # alive (or its number reused): not ours to judge
        except ProcessLookupError:
            pass
        except OSError:
            continue
        try:
            if not (path / "cgroup.procs").read_text().split():
                path.rmdir()
        except OSError:
            pass  # not empty, or gone meanwhile


def open_command_cgroup(processes: int, memory_bytes: int) -> CommandCgroup | None:
    """Fresh cgroups allowing ``processes`` tasks and ``memory_bytes``, where root can.

    Args:
        processes: ``pids.max`` (tasks at once: processes and threads).
        memory_bytes: the memory of all of the command's processes together (and of what
            they write in its tmpfs), swap included.

    The first one made in a process is tried once (a shell moving itself in, then
    ``/bin/true``): a host that lets root make cgroups but not move into them gets none.

    Returns:
        The cgroups; ``None`` when this process is not root or neither controller's cgroup
        can be made or entered (logged once with the reason).
    """
    if os.geteuid() != 0:
        return None  # RLIMIT_NPROC applies (and a normal user makes no cgroup)
    name = f"{_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
    made: list[Path] = []
    for controller, what, limits in (
            ("pids", "process limit", [("pids.max", str(processes))]),
            ("memory", "memory limit for a whole command", None)):
        parent = _parent_dir(controller)
        if parent is None:
            _warn_once(what, f"no cgroup {controller!r} controller is mounted")
            continue
        if not _moves:  # once per process: what dead workers left
            _sweep_stale(parent)
        v1 = not (parent / "cgroup.subtree_control").exists()
        path = _make(parent, name, limits or _limit_files(memory_bytes, v1), what)
        if path is not None and path not in made:
            made.append(path)
    if not made:
        return None
    cgroup = CommandCgroup(made)
    if not _moves:  # once per process: a host may let root make cgroups but not move into them
        try:
            moved = subprocess.run(cgroup.wrap(["/bin/true"]), capture_output=True, timeout=30,
                                   check=False)
            _moves.append(moved.returncode == 0)
            why = moved.stderr.decode(errors="replace").strip()
        except (OSError, subprocess.TimeoutExpired) as e:
            _moves.append(False)
            why = str(e)
        if not _moves[0]:
            _warn_once("process or memory limit",
                       f"a process cannot move itself into a cgroup of {made} ({why})")
    if not _moves[0]:
        cgroup.close()
        return None
    return cgroup
