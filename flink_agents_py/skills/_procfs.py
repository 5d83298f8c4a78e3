"""What of the sandbox's ``/proc`` is hidden or read-only: files the kernel guards by mode only.

A job run as root runs its skill commands as uid 0 in the sandbox's user namespace, and that
uid is the host's root: every ``/proc`` file whose mode alone keeps others out (``0400
root``, no capability checked on read) opens for the command as it does for root on the
host. On Linux 6.x that is ``kpageflags``, ``kpagecount`` and ``kpagecgroup`` (the host's
physical pages: what Rowhammer-style attacks look for), ``slabinfo``, ``vmallocinfo``,
``pagetypeinfo`` (kernel heap layout, for kernel exploits), ``timer_list``, and
``tty/driver`` (serial line counters, a keystroke timing channel); and a file root may write
by its mode (``mtrr``, the ``pressure`` triggers) takes the command's writes. Which files a
kernel has varies, so the host's ``/proc`` is read (once per process) instead of trusting a
list: each entry outside the process folders and ``/proc/sys`` whose mode denies others
reading is hidden (a file by ``/dev/null``, read as "permission denied"; a folder by an
empty read-only tmpfs), and each file with a write bit is bound read-only. An entry the
host covers (a container runtime binds ``/dev/null`` over ``/proc/kcore`` and
``/proc/timer_list``, a tmpfs over ``/proc/acpi``: another file system, or not a regular
file) stays hidden: the sandbox's fresh procfs would show what is under it.

``/proc/keys`` and ``/proc/key-users`` are readable by anyone, but no namespace separates
them: ``/proc/keys`` lists every key the reader may view, the keys of the session keyring a
command inherits from the job included, with their descriptions (``krb_ccache:...``, a
user's name...). Both are hidden too (the keyring syscalls are refused by ``_seccomp``).
"""

from __future__ import annotations

import functools
import os
import stat

__all__ = ["proc_mask_args"]

_PROC = "/proc"
_SKIPPED = frozenset({"self", "thread-self", "sys", "irq", "bus"})  # bound read-only whole
_ALWAYS_HIDDEN = ("keys", "key-users")
_MAX_ENTRIES = 10_000  # the non-process part of /proc has a few hundred
_WRITE_BITS = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


def _scan(root: str) -> tuple[list[str], list[str], list[str]]:
    """(files to hide, folders to hide, files to bind read-only) below ``root``."""
    files: list[str] = []
    folders: list[str] = []
    read_only: list[str] = []
    todo, seen = [root], 0
    try:
        proc_dev = os.stat(root).st_dev
    except OSError:
        return files, folders, read_only
    while todo and seen < _MAX_ENTRIES:
        folder = todo.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if folder == root and (entry.name.isdigit() or entry.name in _SKIPPED):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            mode = st.st_mode
            if stat.S_ISLNK(mode):
                continue
            inside = f"{_PROC}{entry.path[len(root):]}"
            # masked by the host (a container's /dev/null or tmpfs over it): a fresh procfs,
            # the sandbox's, would show the real entry
            covered = st.st_dev != proc_dev or not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))
            hidden = covered or not mode & stat.S_IROTH or (folder == root
                                                           and entry.name in _ALWAYS_HIDDEN)
            if stat.S_ISDIR(mode) and hidden:
                folders.append(inside)
            elif stat.S_ISDIR(mode):
                todo.append(entry.path)
            elif hidden:
                files.append(inside)
            elif mode & _WRITE_BITS:
                read_only.append(inside)
    return sorted(files), sorted(folders), sorted(read_only)


@functools.lru_cache(maxsize=1)
def proc_mask_args(root: str = _PROC) -> tuple[str, ...]:
    """The bubblewrap arguments hiding and protecting parts of the sandbox's ``/proc``.

    Read from this host's ``/proc`` once per process; to be given after ``--proc /proc``.

    Args:
        root: the host's ``/proc`` (another folder in tests, shaped like it).

    Returns:
        ``--ro-bind /dev/null FILE`` for each hidden file, ``--tmpfs DIR --remount-ro DIR``
        for each hidden folder, ``--ro-bind FILE FILE`` for each file root may write.
    """
    files, folders, read_only = _scan(root)
    args: list[str] = []
    for path in files:
        args += ["--ro-bind", "/dev/null", path]
    for path in folders:
        args += ["--tmpfs", path, "--remount-ro", path]
    for path in read_only:
        args += ["--ro-bind", path, path]
    return tuple(args)
