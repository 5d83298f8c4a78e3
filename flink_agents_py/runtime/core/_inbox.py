"""``Inbox``: completed I/O, per key, handed from executor threads to the host's thread."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._tasks import Delivery

if TYPE_CHECKING:
    from ..context._calls import DurableCall
    from ..recorder._execution import ActionExecution
    from ._executor import IOExecutor

__all__ = ["Inbox", "InboxQueries"]


class Inbox:
    """Thread-safe per-key lists of completed I/O (deliveries), with waiting.

    Executor threads ``put``; the host's thread ``take``s a key's deliveries when it
    advances the key, or waits for some to arrive.
    """

    def __init__(self) -> None:
        self._items: dict[Any, list[Any]] = {}
        self._lock = threading.RLock()  # ``take`` holds it directly (no Python-level enter)
        self._cond = threading.Condition(self._lock)

    def put(self, key: Any, item: Any) -> None:
        """Add a delivery for ``key`` and wake whoever waits (any thread)."""
        with self._cond:
            self._items.setdefault(key, []).append(item)
            self._cond.notify_all()

    def take(self, key: Any) -> list[Any]:
        """Remove and return ``key``'s deliveries, oldest first.

        Returns:
            The deliveries (empty when none).
        """
        with self._lock:
            return self._items.pop(key, [])

    def has(self, key: Any) -> bool:
        """Whether deliveries of ``key`` wait.

        Read without the lock: one ``dict.get`` is atomic, and a ``put`` racing with it is
        seen by the next look, as it would be after the lock.

        Returns:
            Whether some wait.
        """
        return bool(self._items.get(key))

    def wait_for(self, key: Any, timeout_s: float) -> bool:
        """Block until deliveries of ``key`` wait, or ``timeout_s`` passes.

        Returns:
            Whether some wait.
        """
        with self._cond:
            return self._cond.wait_for(lambda: bool(self._items.get(key)), timeout=timeout_s)

    def wait_any(self, timeout_s: float) -> bool:
        """Block until deliveries of any key wait, or ``timeout_s`` passes.

        Returns:
            Whether some wait.
        """
        with self._cond:
            return self._cond.wait_for(lambda: any(self._items.values()), timeout=timeout_s)


class InboxQueries:
    """``AgentCore``'s questions to its inbox of completed I/O (a host's wake-up checks).

    And the I/O it submits, whose outcomes the inbox receives (``_submit``).
    """

    _inbox: Inbox
    _live: dict[Any, dict[str, Any]]  # live action executions by key (``AgentCore``)
    _notify: Callable[[Any], None]
    executor: IOExecutor

    def _submit(self, key: Any, ctx: ActionExecution, call: DurableCall,
                fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Run ``fn`` on the I/O executor for ``ctx``'s action; deliver to its key's inbox."""
        call.running = True  # the action finishes only once its outcome is recorded

        def on_done(ok: bool, value: Any) -> None:
            self._inbox.put(key, Delivery(ctx, call, ok, value))
            self._notify(key)

        self.executor.submit(fn, args, kwargs, on_done, key=key, owner=ctx)

    def is_live(self, key: Any) -> bool:
        """Whether ``key`` has live action executions in this process (O(1))."""
        return bool(self._live.get(key))

    def has_deliveries(self, key: Any) -> bool:
        """Whether completed I/O of ``key`` waits to be applied by ``advance``."""
        return self._inbox.has(key)

    def wait_for(self, key: Any, timeout_s: float) -> bool:
        """Block until completed I/O of ``key`` waits or ``timeout_s`` passes; whether it does."""
        return self._inbox.wait_for(key, timeout_s)

    def wait_any(self, timeout_s: float) -> bool:
        """Block until completed I/O of any key waits or ``timeout_s`` passes; whether it does."""
        return self._inbox.wait_any(timeout_s)
