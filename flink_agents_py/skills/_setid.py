"""The setuid/setgid bits a command left in a writable skill's folder, cleared after it.

Only needed where the seccomp filter (``_seccomp``) is not built: there the kernel refuses
the bits while the command runs.
"""

from __future__ import annotations

import logging
import os
import stat
from contextlib import closing
from itertools import islice
from pathlib import Path

from ._walk import walk_beneath

__all__ = ["MAX_SET_ID_WALK", "clear_set_id_bits"]

MAX_SET_ID_WALK = 100_000
"""The most entries of a writable skill's folder looked at for setuid/setgid bits after a
command, where no seccomp filter refuses them (200,000 empty files took 1.9 s)."""
_log = logging.getLogger(__name__)


def clear_set_id_bits(folder: int, shown: Path) -> None:
    """Clear the setuid/setgid bits of the files in a writable skill's folder.

    A command may ``chmod u+s`` a file it wrote there: on the host that file would run with
    the job user's rights (root's, for a job run as root) for anyone who can reach it. Only
    where no seccomp filter makes the kernel refuse the bits (an architecture it is not built
    for): walking a folder a command filled with millions of files took seconds after every
    command, so at most ``MAX_SET_ID_WALK`` entries are looked at. Run
    once the command's processes are gone; folders and files are opened relative to their
    parent's fd without following symlinks (``walk_beneath``: no recursion, a bounded number
    of fds, however deep the folder), so a folder swapped for a symlink by a command still
    running on the same skill never leads outside it.

    Args:
        folder: the folder's fd (not closed here).
        shown: its path, named in the log.
    """
    with closing(walk_beneath(folder)) as entries:
        for parts, dir_fd, name, is_dir in islice(entries, MAX_SET_ID_WALK):
            if is_dir:
                continue
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                             dir_fd=dir_fd)
            except OSError:
                continue  # a symlink, or gone
            try:
                mode = os.fstat(fd).st_mode
                if stat.S_ISREG(mode) and mode & (stat.S_ISUID | stat.S_ISGID):
                    os.fchmod(fd, stat.S_IMODE(mode) & ~(stat.S_ISUID | stat.S_ISGID))
            except OSError:
                _log.warning("could not clear the setuid/setgid bits of %s in a writable "
                             "skill's folder", shown.joinpath(*parts, name))
            finally:
                os.close(fd)
        if next(entries, None) is not None:
            _log.warning("a writable skill's folder %s has more than %d entries: the "
                         "setuid/setgid bits of the rest were not looked at", shown,
                         MAX_SET_ID_WALK)
