"""CPython's cyclic GC tuned for the agent operator while it runs (process-wide, reversible).

In thread mode a TaskManager runs every Python function of its slots in one interpreter, so
these settings are the interpreter's: held from the first agent operator's ``open`` until
the last one's ``close`` (see ``docs/how-to/limits.md``).
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["heap_frozen", "hold_gc_settings", "release_gc_settings"]

_GC_YOUNG_THRESHOLD = 50_000
"""CPython's generation-0 collection threshold while an operator runs (default 700): the
operator allocates many short-lived containers per call, and with thousands of runs in
flight each young collection finds most of them still alive. CPython counts allocations
net of the young objects freed, and the objects of runs that complete are freed: with this
threshold the count rarely reaches it (one young collection in 10,000 chats of the 200 ms
model at 10,000 keys, against 35-38 at 10,000, which cost 18 ms each and collected nothing).
At most this many container objects of cyclic garbage wait for a collection."""

_gc_lock = threading.Lock()
_gc_holders: set[int] = set()  # operators of this interpreter holding the GC settings
_gc_saved: list[tuple[int, ...]] = []  # the thresholds to restore, while held


def hold_gc_settings(holder: object) -> None:
    """Tune CPython's cyclic GC for the operator while ``holder`` runs (process-wide).

    The objects alive after ``open`` (the interpreter's modules, PyFlink's and pydantic's,
    the plan and its resources) are long-lived, yet every full collection would traverse
    them again while the operator allocates per call: they are frozen (``gc.freeze``), after
    collecting the young generations (the garbage ``open`` and its imports just made). The
    oldest generation is not collected first: on a MiniCluster that took about 100 ms of
    ``open`` (the first inputs waited for it) and found nothing; what garbage it holds is
    kept until the last holder unfreezes the heap, then collected as usual. Young collections run
    every ``_GC_YOUNG_THRESHOLD`` allocations instead of 700. Measured on the 200 ms model
    at 10,000 keys (``bench._compare --only chat --full``): the GC took 123-127 us per call
    across the TaskManager's interpreter before, 50-63 with the freeze alone, 18 with both
    (threshold 10,000); with the threshold at 50,000, 3-4 us against 33-71 at 10,000 in the
    same session (``bench._flink_job``, unbounded, one run each, on a loaded machine).

    Both are undone by ``release_gc_settings`` of the last holder in this interpreter.
    Nothing is changed when the collector is disabled (``gc.disable()``) at ``open``.

    Args:
        holder: the operator (by identity; holding twice counts once).
    """
    if not gc.isenabled():  # the process manages its collector itself: leave it alone
        return
    with _gc_lock:
        if not _gc_holders:
            gc.collect(1)
            gc.freeze()
            old = gc.get_threshold()
            _gc_saved[:] = [old]
            if old[0] < _GC_YOUNG_THRESHOLD:
                gc.set_threshold(_GC_YOUNG_THRESHOLD, *old[1:])
        _gc_holders.add(id(holder))


def release_gc_settings(holder: object) -> None:
    """Undo ``hold_gc_settings`` for ``holder`` (a no-op when it holds nothing).

    The last holder unfreezes the heap and puts the previous thresholds back (unless
    something else changed them meanwhile).
    """
    with _gc_lock:
        if id(holder) not in _gc_holders:
            return
        _gc_holders.discard(id(holder))
        if _gc_holders:
            return
        gc.unfreeze()
        if _gc_saved:
            old = _gc_saved.pop()
            if gc.get_threshold()[0] == max(old[0], _GC_YOUNG_THRESHOLD):
                gc.set_threshold(*old)


@contextlib.contextmanager
def heap_frozen() -> Iterator[None]:
    """Run the block with the objects alive now frozen (``gc.freeze``), unfrozen after it.

    For a block that imports many modules into a process already holding many objects: each
    full collection it causes then looks at the block's new objects only, not again at every
    object the process held before. Creating the first PyFlink environment imports Beam and
    pandas (1,268 modules) into a client that holds this package's classes: three full
    collections there took 148 ms of CPU against 66 ms for a program of PyFlink alone
    (2026-12-06). After the block every object is collectable as before; what was garbage
    at its start is collected by the next collection after it.

    Nothing is frozen when the collector is disabled or the heap is frozen already (by the
    process itself, or by an agent operator holding the GC settings), and nothing is
    unfrozen while an agent operator of this interpreter holds them (its release unfreezes).
    """
    froze = gc.isenabled() and not gc.get_freeze_count()
    if froze:
        gc.freeze()
    try:
        yield
    finally:
        if froze:
            with _gc_lock:
                if not _gc_holders:
                    gc.unfreeze()
