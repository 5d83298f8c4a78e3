"""A gate for async durable calls (P4, P5): calls wait on the executor's event loop, without a
thread or a poll each, until the benchmark opens the gate from its own thread."""

from __future__ import annotations

import asyncio
import threading

__all__ = ["Gate"]


class Gate:
    """``await gate.wait()`` inside a call blocks until ``open()``; ``close()`` re-arms it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = threading.Event()
        self._events: dict[asyncio.AbstractEventLoop, asyncio.Event] = {}

    def close(self) -> None:
        """Make later ``wait`` calls block."""
        with self._lock:
            self._open.clear()

    def open(self) -> None:
        """Release every waiting call, and let later ones through."""
        with self._lock:
            self._open.set()
            events, self._events = self._events, {}
        for loop, event in events.items():
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # that loop is closed: nothing waits on it
                pass

    async def wait(self) -> None:
        """Return once the gate is open."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._open.is_set():
                return
            event = self._events.get(loop)
            if event is None:
                event = self._events[loop] = asyncio.Event()
        await event.wait()
