"""A walk of a skill's folder through fds: no recursion, a bounded number of open fds.

A skill's folder is untrusted, and a writable skill's command shapes it at will:
``mkdir -p a/a/a/...`` makes a chain thousands of folders deep in one call. ``os.fwalk``
recurses once per level and keeps one fd open per level: such a chain raised
``RecursionError`` out of ``load_skill`` and out of every later command of the writable
skill (its setuid bits are cleared after each one), and held an fd per level meanwhile.

``walk_beneath`` walks depth first with a list for a stack. It keeps open the fds of at
most ``MAX_HELD_FDS`` folders, the deepest ones of the path walked; a folder whose
parent's fd is no longer held is opened again from the nearest one that is, one component
at a time. Every folder is opened relative to its parent's fd with ``O_NOFOLLOW``: a
symlink is an entry, never followed, and a folder swapped for one while the walk runs (by
a command running on the same writable skill) is skipped, never left for the host.
"""

from __future__ import annotations

import os
from collections.abc import Generator

__all__ = ["MAX_HELD_FDS", "walk_beneath"]

MAX_HELD_FDS = 16
"""The most folder fds a walk keeps open at once (besides the one listed)."""
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_below(base: int, names: tuple[str, ...]) -> int:
    """Open the folder ``names...`` below folder fd ``base``, following no symlink.

    Returns:
        A new fd, or ``-1`` when a component is gone, a symlink or not a folder.
    """
    fd = base
    try:
        for name in names or (".",):
            opened = os.open(name, _DIR_FLAGS, dir_fd=fd)
            if fd != base:
                os.close(fd)
            fd = opened
    except OSError:
        if fd != base:
            os.close(fd)
        return -1
    return fd


def walk_beneath(folder: int, held_fds: int = MAX_HELD_FDS
                 ) -> Generator[tuple[tuple[str, ...], int, str, bool], None, None]:
    """Every entry below folder fd ``folder``, depth first, each folder's entries in turn.

    Close the iterator (``contextlib.closing``) when stopping early: it closes the fds it
    holds.

    Args:
        folder: the folder's fd (not closed here).
        held_fds: the most folder fds kept open at once.

    Yields:
        ``(parts, dir_fd, name, is_dir)``: the path of the entry's folder below ``folder``
        (``()`` for the folder itself), that folder's fd (valid until the next entry is
        asked for), the entry's name, and whether it is a folder (a symlink is not).
    """
    held: list[tuple[tuple[str, ...], int]] = []  # the deepest folders of the path walked
    todo: list[tuple[str, ...]] = [()]
    try:
        while todo:
            parts = todo.pop()
            while held and parts[:len(held[-1][0])] != held[-1][0]:
                os.close(held.pop()[1])  # not an ancestor of the next folder
            base, prefix = held[-1][1] if held else folder, held[-1][0] if held else ()
            fd = _open_below(base, parts[len(prefix):])
            if fd < 0:
                continue  # gone, or swapped for a symlink, since it was listed
            held.append((parts, fd))
            if len(held) > held_fds:
                os.close(held.pop(0)[1])
            subfolders: list[str] = []
            try:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        is_dir = entry.is_dir(follow_symlinks=False)
                        yield parts, fd, entry.name, is_dir
                        if is_dir:
                            subfolders.append(entry.name)
            except OSError:
                pass  # unreadable, or gone while listed
            todo.extend((*parts, name) for name in reversed(subfolders))
    finally:
        for _, fd in held:
            os.close(fd)
