"""The sandbox's RAM file systems bounded in files too, before the command gets to run.

bubblewrap sizes a tmpfs (``--size``, 0.8+) but cannot bound its number of files, and a
tmpfs's inodes are kernel memory its size does not count: the kernel's default allows
about one per two pages of the host's RAM. One command making empty files in ``/tmp`` made
577,000 in 8 s and held 580 MB of kernel memory until it ended (each of ``/tmp``,
``/skill`` and ``/dev/shm`` as much again), where a job not run as root has no ``memory``
cgroup to bound it.

So the first program in the sandbox is a short shell script of ours, the only one run with
two capabilities in the sandbox's user namespace (``CAP_SYS_ADMIN`` to remount,
``CAP_SETPCAP`` to give them up): it remounts each writable tmpfs with ``nr_inodes`` (and
its size again, for a bubblewrap older than 0.8) and ``noexec``, remounts each bind of the
skill's folder or its entries ``noexec`` (no file a skill ships or a command writes is run,
whichever allowed program would run it), then ``setpriv`` drops every capability,
from the bounding set too, before the command is run (``exec``): the command has none, as
with ``--cap-drop ALL``. The sandbox's user is then uid 0 for every job (as it was for a
job run as root): for another uid, bubblewrap nests a second user namespace, from which
the mounts cannot be changed. Where ``mount`` or ``setpriv`` (util-linux) is missing, or the
host refuses the remount (probed once per process), no capability is kept and the tmpfs
stay bounded in size only (the log says so once).
"""

from __future__ import annotations

import functools
import logging
import os
import shlex
import shutil
from collections.abc import Sequence

__all__ = ["BINDS_FSTAB", "FILES_PER_MB", "atime_option", "binds_fstab", "bounded_tmpfs",
           "remount_probe"]

FILES_PER_MB = 256
"""Files (inodes: folders, links and mount points too) a writable tmpfs of the sandbox may
hold per MiB of its size: 16,384 for the default ``max_scratch_mb`` of 64, about 16 MB of
kernel memory."""
_SYSTEM = "/usr/sbin:/usr/bin:/sbin:/bin"
_SANDBOX_ROOT = ["--uid", "0", "--gid", "0"]
_log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1)
def _tools() -> tuple[str, str, str] | None:
    found = tuple(shutil.which(name, path=_SYSTEM) for name in ("sh", "mount", "setpriv"))
    if None in found:
        _log.warning("mount or setpriv (util-linux) is not installed: the skill sandbox's "
                     "/tmp, /skill and /dev/shm are bounded in size only, not in files "
                     "(each file costs kernel memory their size does not count), and a file "
                     "there or in the skill's folder can be run (not noexec)")
        return None
    return found  # type: ignore[return-value]


def _remount(mount: str, point: str, size_mb: int) -> list[str]:
    # the options given only (the ones bubblewrap mounted with name the job's uid, which
    # the sandbox's user namespace does not map), nosuid and nodev kept, noexec added
    return [mount, "--options-source=disable", "-o",
            f"remount,nosuid,nodev,noexec,size={size_mb << 20},"
            f"nr_inodes={size_mb * FILES_PER_MB}", point]


BINDS_FSTAB = "/etc/skill-binds.fstab"
"""Where the sandbox's remount script reads the binds it makes ``noexec`` (``binds_fstab``):
one ``mount -a`` remounts them all (a ``mount`` per bind took about 2 ms each)."""


def _mangled(path: str) -> str:
    # fstab's escapes: whitespace and backslashes as octal, as libmount reads them back
    return "".join(f"\\{ord(c):03o}" if c in " \t\n\\#" else c for c in path)


def binds_fstab(binds: Sequence[tuple[str, bool, int]]) -> str:
    """The fstab remounting each bind ``noexec`` (for ``mount -a --fstab``).

    A bind's read-only and atime flags are locked in the sandbox's user namespace: each is
    given as the host's mount has them (a remount naming none would change them and fail).

    Args:
        binds: (where it is bound, whether read-write, the ``statvfs`` flags of the host
            mount bound).

    Returns:
        Its text, one line per bind.
    """
    lines = []
    for point, writable, flags in binds:
        rw = "rw" if writable and not flags & os.ST_RDONLY else "ro"
        lines.append(f"none {_mangled(point)} none remount,bind,{rw},nosuid,nodev,noexec,"
                     f"{atime_option(flags)} 0 0\n")
    return "".join(lines)


def atime_option(flags: int) -> str:
    """The ``mount`` option keeping a mount's access-time behaviour (from ``statvfs``).

    Args:
        flags: ``os.statvfs(...).f_flag`` of the folder bound.

    Returns:
        ``noatime``, ``relatime`` or ``strictatime``, with ``,nodiratime`` where set.
    """
    option = ("noatime" if flags & os.ST_NOATIME else
              "relatime" if flags & os.ST_RELATIME else "strictatime")
    return option + (",nodiratime" if flags & os.ST_NODIRATIME else "")


def remount_probe() -> list[str] | None:
    """The arguments, after bubblewrap's own, of a sandbox that only bounds a tmpfs in files.

    Returns:
        They, or ``None`` where ``mount`` or ``setpriv`` is missing. The sandbox exits 0
        where the remount works (a security module may refuse mounts in a user namespace,
        an older ``mount`` the options).
    """
    tools = _tools()
    if tools is None:
        return None
    return [*_SANDBOX_ROOT, "--cap-add", "CAP_SYS_ADMIN", "--tmpfs", "/tmp", "--",
            *_remount(tools[1], "/tmp", 1)]


def bounded_tmpfs(inner: list[str], mount_points: list[str], size_mb: int,
                  binds: bool = False) -> tuple[list[str], list[str]]:
    """The extra bubblewrap arguments and the command line bounding ``mount_points`` first.

    Every mount a command can write or a skill's files show (the tmpfs, and ``binds``) is
    made ``noexec`` by the same script: no file of a skill's folder, and none a command
    writes, is run (``execve`` fails with ``EACCES``, the dynamic loader cannot map it),
    whichever allowed program would run it (``run-parts``, ``logsave``, a
    ``--diff-program`` or ``--strip-program`` option).

    Args:
        inner: the command line to run once the tmpfs are bounded (no capability left).
        mount_points: the sandbox's writable tmpfs.
        size_mb: the size of each, in MiB.
        binds: whether the skill's folder or entries bound under ``/skill`` are
            remounted ``noexec`` too, as ``BINDS_FSTAB`` lists them (``binds_fstab``,
            given to the sandbox by the caller).

    Returns:
        (arguments for bubblewrap, given after ``--cap-drop ALL``: the command runs as uid
        0 of the sandbox's user namespace, which is the job's user, so that bubblewrap
        makes no nested namespace the mounts cannot be changed from; the command line to
        run in the sandbox instead of ``inner``). Unchanged (none; ``inner``) where the
        tools are missing.
    """
    tools = _tools()
    if tools is None or not mount_points:
        return [], inner
    sh, mount, setpriv = tools
    failed = shlex.quote("the sandbox could not bound the files of its tmpfs")
    failed_bind = shlex.quote("the sandbox could not make the skill's files not executable")
    script = "".join(f"{shlex.join(_remount(mount, p, size_mb))} || {{ echo {failed} >&2; "
                     f"exit 125; }}\n" for p in mount_points)
    if binds:
        script += (f"{shlex.join([mount, '-a', '--fstab', BINDS_FSTAB])} || {{ echo "
                   f"{failed_bind} >&2; exit 125; }}\n")
    script += (f"exec {setpriv} --bounding-set=-all --inh-caps=-all --ambient-caps=-all "
               f"--no-new-privs -- \"$@\"\n")
    return ([*_SANDBOX_ROOT, "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"],
            [sh, "-c", script, "sh", *inner])
