"""Clients bound to an event loop, closed on that loop before it closes.

An async SDK client (httpx underneath) holds connections of the loop that made it. Dropped
after its loop closed, its finalizer schedules ``aclose()`` on whatever loop runs then,
which fails with ``RuntimeError: Event loop is closed`` and prints "Task exception was
never retrieved". So whoever owns such clients registers here (``register_loop_owner``) and
whoever closes a loop first awaits ``close_loop_clients()`` on it.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, Protocol

__all__ = ["LoopOwner", "register_loop_owner", "close_loop_clients"]


class LoopOwner(Protocol):
    """Holds clients per event loop and closes the one of a loop on request."""

    async def aclose_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Close (and forget) the client of ``loop``, if any."""


_OWNERS: weakref.WeakSet[Any] = weakref.WeakSet()


def register_loop_owner(owner: LoopOwner) -> None:
    """Have ``close_loop_clients`` close ``owner``'s clients (held weakly)."""
    _OWNERS.add(owner)


async def close_loop_clients() -> None:
    """Close every registered owner's client of the running loop (errors ignored)."""
    loop = asyncio.get_running_loop()
    for owner in list(_OWNERS):
        try:
            await owner.aclose_loop(loop)
        except Exception:  # noqa: BLE001, S110 - closing is best effort
            pass
