"""A value per live object, dropped with the object: the registries of the runtime's resources.

The runtime keeps one flow controller per chat model connection, one stand-in connection per
setup with its own ``chat`` and one spend ledger per setup with an agent budget. Those objects
are pydantic models, so neither hashable nor usable as ``weakref.WeakKeyDictionary`` keys: the
registry keys them by ``id`` and checks on each lookup that the weak reference still names the
same object (an ``id`` is reused once its object is gone).

The lock is re-entrant: the cyclic garbage collector runs a weak reference's callback at any
allocation, so also on a thread that holds the lock already (the callback takes it to drop
the entry); with a plain lock that thread would wait for itself for ever.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["PerObject"]

T = TypeVar("T")


class PerObject(Generic[T]):
    """A value per live object, made on first use and dropped when the object is collected.

    Thread-safe: lookups and insertions hold one re-entrant lock.
    """

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref[Any], T]] = {}
        self._lock = threading.RLock()

    def get(self, obj: Any) -> T | None:
        """The value made for ``obj``, or ``None`` when none was made (or it was dropped)."""
        with self._lock:
            entry = self._entries.get(id(obj))
        return entry[1] if entry is not None and entry[0]() is obj else None

    def get_or_make(self, obj: Any, make: Callable[[], T]) -> T:
        """The value of ``obj``, made by ``make()`` (under the lock) on its first use.

        Args:
            obj: any object that takes weak references.
            make: builds the value; called at most once per live object.

        Returns:
            The value kept for ``obj`` until ``obj`` is collected.
        """
        key = id(obj)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0]() is obj:
                return entry[1]
            value = make()
            self._entries[key] = (weakref.ref(obj, self._forgetter(key)), value)
            return value

    def _forgetter(self, key: int) -> Callable[[Any], None]:
        def forget(_: Any) -> None:
            with self._lock:
                current = self._entries.get(key)
                if current is not None and current[0]() is None:
                    del self._entries[key]

        return forget

    def __len__(self) -> int:
        """How many entries are kept (a collected object's entry is gone once its callback ran)."""
        with self._lock:
            return len(self._entries)
