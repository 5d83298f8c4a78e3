"""Per-test probes: the call counts and gates a test's fakes share with the test.

A test's fakes (durable functions, tools, scripted models, remotes) run on executor threads
and are found by the runtime by name, so they cannot take pytest fixtures. They call the
module functions here instead (``count("fetch")``, ``wait("tool")``), which act on the
current test's ``Probes``. The autouse fixture ``probes`` (``tests/conftest.py``) installs a
new ``Probes`` before every test and opens all its gates after it, so no test resets
counters by hand and no executor thread stays blocked on a gate after its test.

    def slow_lookup(q: str) -> str:        # a fake
        count("lookup")
        wait("lookup")                     # until the test opens the gate
        return q

    def test_x(probes):
        ...
        probes.open("lookup")
        assert probes["lookup"] == 1
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Probes", "count", "current", "gate", "install", "note", "store", "wait"]

GATE = "gate"
"""The gate's name when a test has only one."""


class Probes:
    """Thread-safe call counts by name, and named gates (``threading.Event``, closed at
    first), for one test."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: collections.Counter[str] = collections.Counter()
        self._gates: dict[str, threading.Event] = {}
        self._notes: list[str] = []
        self._stores: dict[str, Any] = {}
        self._finished = False

    def count(self, name: str, n: int = 1) -> int:
        """Add ``n`` calls of ``name``.

        Returns:
            Its new count.
        """
        with self._lock:
            self._counts[name] += n
            return self._counts[name]

    def __getitem__(self, name: str) -> int:
        with self._lock:
            return self._counts[name]

    def counts(self) -> dict[str, int]:
        """The counts by name (a copy)."""
        with self._lock:
            return dict(self._counts)

    def reset(self, *names: str) -> None:
        """Set the counts of ``names`` (default: all) back to zero."""
        with self._lock:
            if not names:
                self._counts.clear()
            for name in names:
                self._counts.pop(name, None)

    def note(self, entry: str) -> None:
        """Append ``entry`` to the test's ordered log (``notes``)."""
        with self._lock:
            self._notes.append(entry)

    def notes(self) -> list[str]:
        """The entries ``note`` appended, in order (a copy)."""
        with self._lock:
            return list(self._notes)

    def store(self, name: str, factory: Callable[[], Any] = dict) -> Any:
        """The test's object ``name`` (made by ``factory`` on first use): per-test state a
        fake keeps, e.g. ``store("prepared", list).append(...)``."""
        with self._lock:
            if name not in self._stores:
                self._stores[name] = factory()
            return self._stores[name]

    def gate(self, name: str = GATE) -> threading.Event:
        """The gate ``name`` (made, closed, on first use; open once the test has finished)."""
        with self._lock:
            found = self._gates.get(name)
            if found is None:
                found = self._gates[name] = threading.Event()
                if self._finished:
                    found.set()
            return found

    def open(self, *names: str) -> None:
        """Open the gates ``names`` (default: the one gate)."""
        for name in names or (GATE,):
            self.gate(name).set()

    def close(self, *names: str) -> None:
        """Close the gates ``names`` again (default: the one gate)."""
        for name in names or (GATE,):
            self.gate(name).clear()

    def wait(self, name: str = GATE, timeout_s: float = 60) -> None:
        """Block until the gate ``name`` opens.

        Raises:
            AssertionError: when it stays closed for ``timeout_s`` seconds.
        """
        assert self.gate(name).wait(timeout_s), f"gate {name!r} never opened"

    def finish(self) -> None:
        """Open every gate, now and later (the test is over: release its threads)."""
        with self._lock:
            self._finished = True
            gates = list(self._gates.values())
        for g in gates:
            g.set()


_current = Probes()


def install() -> Probes:
    """Make a new ``Probes`` the current one (the ``probes`` fixture does, per test).

    Returns:
        The new probes.
    """
    global _current
    _current = Probes()
    return _current


def current() -> Probes:
    """The current test's probes."""
    return _current


def count(name: str, n: int = 1) -> int:
    """Count ``n`` calls of ``name`` in the current test's probes.

    Returns:
        Its new count.
    """
    return _current.count(name, n)


def gate(name: str = GATE) -> threading.Event:
    """The current test's gate ``name``."""
    return _current.gate(name)


def wait(name: str = GATE, timeout_s: float = 60) -> None:
    """Block until the current test's gate ``name`` opens (``AssertionError`` after
    ``timeout_s`` seconds)."""
    _current.wait(name, timeout_s)


def note(entry: str) -> None:
    """Append ``entry`` to the current test's ordered log."""
    _current.note(entry)


def store(name: str, factory: Callable[[], Any] = dict) -> Any:
    """The current test's object ``name`` (see ``Probes.store``)."""
    return _current.store(name, factory)
