"""The sockets, FIFOs and device nodes below a skill's folder, covered in its sandbox.

A Unix socket is reached by its path, whatever the network namespace: a command that
``connect``s to a socket file it can see talks to the host process listening on it. A
skill's folder is untrusted and may hold one (a hard link to a host service's socket, made
where the folder was unpacked, or a socket a host process binds there), and so may a FIFO
(whose host reader or writer the command would then talk to). The entries at the top of a
read-only skill's folder that are none of a file, a folder or a symlink are never bound;
but a folder bound into the sandbox shows its whole tree, and a folder bound whole (a
writable skill's, one of more than ``MAX_BOUND_ENTRIES`` entries) its top too. So the tree
is walked before each command (through fds, following no symlink: ``walk_beneath``), and
each such entry is covered by ``/dev/null`` in the sandbox: a ``connect`` to it fails with
``ECONNREFUSED``, an open with ``EACCES`` (a device on a ``nodev`` mount). A tree of more
than ``MAX_CHECKED_ENTRIES`` entries cannot be checked in bounded time: its command is
refused, naming the bound. A socket a command makes (in ``/tmp``, or in a writable skill's
folder) is its own and works; one a command left in a writable skill's folder is covered
in the commands after it.
"""

from __future__ import annotations

import os
import stat
from contextlib import closing

from ._walk import walk_beneath

__all__ = ["MAX_CHECKED_ENTRIES", "TooManyEntriesError", "special_file_covers"]

MAX_CHECKED_ENTRIES = 20_000
"""The most entries of a skill's folder looked at before a command (a tree of 20,000 files
took about 90 ms on a 2-core machine, a skill of a few files 0.3 ms); a command on a skill
whose folder holds more is refused."""
_SHOWN = (stat.S_ISREG, stat.S_ISDIR, stat.S_ISLNK)


class TooManyEntriesError(Exception):
    """The skill's folder holds more entries than ``MAX_CHECKED_ENTRIES``."""


def special_file_covers(folder: int, inside: str, top_bound: bool) -> list[str]:
    """The bubblewrap arguments covering every socket, FIFO and device node below ``folder``.

    Args:
        folder: the skill folder's fd (not closed here).
        inside: where the folder is shown in the sandbox (``/skill``).
        top_bound: whether the folder is bound whole (its top entries shown as they are);
            otherwise only the files and folders of its top are bound, one by one.

    Returns:
        ``--ro-bind /dev/null PATH`` for each, to give after the folder's binds.

    Raises:
        TooManyEntriesError: when the folder holds more than ``MAX_CHECKED_ENTRIES``
            entries (none of its tree is known to be free of them).
    """
    args: list[str] = []
    with closing(walk_beneath(folder)) as entries:
        for seen, (parts, dir_fd, name, is_dir) in enumerate(entries):
            if seen >= MAX_CHECKED_ENTRIES:
                raise TooManyEntriesError(
                    f"the skill's folder holds more than {MAX_CHECKED_ENTRIES} entries: it "
                    f"cannot be checked for sockets and FIFOs before the command runs"
                )
            if is_dir or (not parts and not top_bound):
                continue
            try:
                mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
            except OSError:
                continue  # gone since it was listed
            if not any(shown(mode) for shown in _SHOWN):
                args += ["--ro-bind", "/dev/null", "/".join((inside, *parts, name))]
    return args
