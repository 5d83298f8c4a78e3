"""A process limit the kernel applies to root too: a ``pids`` cgroup per skill command.

``RLIMIT_NPROC`` (``prlimit --nproc``) is not applied to root: the kernel exempts its
real user from the count, so a skill command run by a job running as root (containers,
CI runners) could fork until the host runs out of process ids. The cgroup ``pids``
controller has no such exemption (Linux 4.3+, ``Documentation/admin-guide/cgroup-v2.rst``,
"PID"; and the v1 ``pids`` hierarchy): a fresh cgroup with ``pids.max`` set holds the
whole sandbox, threads included, and a fork past it fails with ``EAGAIN``.

The sandbox's first process moves itself into the cgroup before ``exec``-ing bubblewrap
(``/bin/sh -c 'echo $$ > cgroup.procs && exec ...'``), so no process of the command is
ever outside it. Where no ``pids`` cgroup can be made (no such controller, a read-only
``/sys/fs/cgroup``, not root), ``open_pids_cgroup`` returns ``None`` and says why once in
the log; the command then runs with the rlimits only (the timeout still ends it).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

__all__ = ["PidsCgroup", "open_pids_cgroup"]

_log = logging.getLogger(__name__)
_MOUNTS = Path("/proc/self/mounts")
_OWN = Path("/proc/self/cgroup")
_warned: set[str] = set()
_moves: list[bool] = []  # [whether a process can move itself into one], once probed


def _warn_once(why: str) -> None:
    if why not in _warned:
        _warned.add(why)
        _log.warning("skill commands run by root get no process limit: %s (the kernel does "
                     "not apply RLIMIT_NPROC to root; the command's timeout still ends it)",
                     why)


def _parent_dir() -> Path | None:
    """The folder a new ``pids`` cgroup goes in: this process's own (v1) or the root (v2).

    v1 (a ``cgroup`` mount with the ``pids`` option): under this process's cgroup in that
    hierarchy. v2 (``cgroup2`` whose root lists ``pids`` in ``cgroup.subtree_control``):
    under the root, since a v2 cgroup holding processes cannot enable a controller for its
    children (the "no internal processes" rule).

    Returns:
        The folder, or ``None`` when neither is mounted.
    """
    try:
        mounts = [line.split() for line in _MOUNTS.read_text().splitlines()]
        own = [line.split(":", 2) for line in _OWN.read_text().splitlines()]
    except OSError:
        return None
    for fields in mounts:
        if len(fields) > 3 and fields[2] == "cgroup" and "pids" in fields[3].split(","):
            rel = next((path for _, ctrls, path in own if "pids" in ctrls.split(",")), "/")
            return Path(fields[1]) / rel.lstrip("/")
    for fields in mounts:
        if len(fields) > 3 and fields[2] == "cgroup2":
            root = Path(fields[1])
            try:
                enabled = (root / "cgroup.subtree_control").read_text().split()
            except OSError:
                continue
            if "pids" in enabled:
                return root
    return None


class PidsCgroup:
    """One skill command's ``pids`` cgroup: made by ``open_pids_cgroup``, gone by ``close``.

    Args:
        path: the cgroup's folder (``pids.max`` already written).
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run by a shell that first moves itself into the cgroup.

        Args:
            argv: the sandbox's command line (``bwrap ...``).

        Returns:
            ``/bin/sh -c 'echo $$ > <cgroup.procs> && exec "$@"' ...``: if the move fails the
            command does not run (its output says why).
        """
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"',
                str(self.path / "cgroup.procs"), *argv]

    def close(self, timeout_s: float = 10.0) -> None:
        """Kill what is left in the cgroup and remove it.

        Polls until the cgroup is empty (at most ``timeout_s`` seconds), then removes its
        folder; a cgroup that does not empty in time is left behind and logged.

        Args:
            timeout_s: how long to wait for its processes to go, in seconds.
        """
        deadline = time.monotonic() + timeout_s
        kill = self.path / "cgroup.kill"  # v2, Linux 5.14+
        while True:
            try:
                pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
            except OSError:
                return  # gone already
            if not pids:
                break
            if time.monotonic() > deadline:
                _log.warning("the skill command's cgroup %s still holds processes %s",
                             self.path, pids[:10])
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
            self.path.rmdir()
        except OSError as e:
            _log.warning("could not remove the skill command's cgroup %s: %s", self.path, e)


def open_pids_cgroup(processes: int) -> PidsCgroup | None:
    """A fresh ``pids`` cgroup allowing ``processes`` tasks, when root can make one here.

    Args:
        processes: ``pids.max`` (tasks at once: processes and threads).

    The first one made in a process is tried once (a shell moving itself in, then
    ``/bin/true``): a host that lets root make cgroups but not move into them gets none.

    Returns:
        The cgroup; ``None`` when this process is not root or no ``pids`` cgroup can be
        made or entered (logged once with the reason).
    """
    if os.geteuid() != 0:
        return None  # RLIMIT_NPROC applies
    parent = _parent_dir()
    if parent is None:
        _warn_once("no cgroup 'pids' controller is mounted")
        return None
    path = parent / f"flink-agents-py-skill-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    try:
        path.mkdir()
    except OSError as e:
        _warn_once(f"cannot make a cgroup in {parent} ({e.strerror})")
        return None
    try:
        (path / "pids.max").write_text(str(processes))
    except OSError as e:
        _warn_once(f"cannot set pids.max in {parent} ({e.strerror})")
        try:
            path.rmdir()
        except OSError:
            pass
        return None
    cgroup = PidsCgroup(path)
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
            _warn_once(f"a process cannot move itself into a cgroup of {parent} ({why})")
    if not _moves[0]:
        cgroup.close()
        return None
    return cgroup
