"""``KeyShares``: the I/O executor's slots, shared between keys.

One key (a record's run: its actions' calls, its chats' tools, its sub-agents') holds at most
``per_key`` slots at once, so the slots left serve other keys' calls at once; and a freed
slot goes to the keys with calls waiting in turn (round robin), so a key's backlog takes one
slot per round instead of every slot until it is gone. A key's own calls take slots in the
order they asked. Without these a record asking for 64 calls of a slow tool queued every
other key's calls behind the 64 (a hostile or hot key stalled the subtask).

The share never stalls a key against itself: no call holds a slot while it waits for another
call of its key to start. A ``durable_execute`` made inside a durable call runs in its
caller's slot; a chat's tool calls and a sub-agent's calls are made by actions whose callers
are suspended in the run's state, holding no slot; waits and approvals hold none; calls that
wait for something else than their own work (flow control, spend budgets, a retry's backoff,
an async sub-agent's polls) give their slot up meanwhile (``IOSlot``). A deferred external
sub-agent's ``call()`` holds its slot while the remote works: its answer comes from outside
the executor.

Every method runs on the executor's loop, under the executor's lock (``wait_turn`` takes it).
"""

from __future__ import annotations

import asyncio
import collections
import threading
from typing import Any

__all__ = ["KeyShares", "per_key_slots"]


def per_key_slots(max_in_flight: int, max_in_flight_per_key: int | None) -> int:
    """The most slots one key holds: ``max_in_flight_per_key``, or its default.

    Args:
        max_in_flight: the executor's slots.
        max_in_flight_per_key: the option (``None``: three quarters of ``max_in_flight``,
            rounded up, so a quarter stays for other keys; more than ``max_in_flight``: all).

    Returns:
        The cap, between 1 and ``max_in_flight``.
    """
    if max_in_flight_per_key is None:
        return max_in_flight - max_in_flight // 4
    return max(1, min(max_in_flight, max_in_flight_per_key))


class _Share:
    """One key's part of the slots: how many it holds, its calls waiting for one.

    ``ready``: the key is in the round of keys served as slots free (it has calls waiting
    and held fewer slots than its cap when it joined).
    """

    __slots__ = ("held", "key", "queue", "ready")

    def __init__(self, key: Any) -> None:
        self.key = key
        self.held = 0
        self.queue: collections.deque[tuple[Any, asyncio.Future[None]]] = collections.deque()
        self.ready = False


class KeyShares:
    """The executor's slots: how many are free, each key's share, the keys served in turn.

    Args:
        max_in_flight: the slots.
        max_in_flight_per_key: the most slots one key holds (``per_key_slots``).
    """

    def __init__(self, max_in_flight: int, max_in_flight_per_key: int | None) -> None:
        self.per_key = per_key_slots(max_in_flight, max_in_flight_per_key)
        """The most slots one key holds."""
        self._free = max_in_flight
        self._shares: dict[Any, _Share] = {}
        self._round: collections.deque[_Share] = collections.deque()

    def take(
        self, key: Any, call: Any, loop: asyncio.AbstractEventLoop
    ) -> asyncio.Future[None] | None:
        """Take a slot for ``call`` of ``key`` now, or queue it behind the key's waiting calls.

        A slot is taken at once only when one is free, the key holds fewer than its cap and
        none of its calls waits (its calls start in order). A free slot while calls wait
        means each of those waits for its own key's cap.

        Args:
            key: the call's key.
            call: the call (identifies it while it waits).
            loop: the executor's loop (the future is made on it).

        Returns:
            ``None`` when the call holds a slot now, else the future that ``free`` hands
            it a slot by.
        """
        share = self._shares.get(key)
        if share is None:
            share = self._shares[key] = _Share(key)
        if self._free and share.held < self.per_key and not share.queue:
            self._free -= 1
            share.held += 1
            return None
        turn: asyncio.Future[None] = loop.create_future()
        share.queue.append((call, turn))
        if not share.ready and share.held < self.per_key:
            share.ready = True
            self._round.append(share)
        return turn

    async def wait_turn(
        self, key: Any, call: Any, turn: asyncio.Future[None], lock: threading.Lock
    ) -> None:
        """Wait until ``free`` hands ``call`` its slot (``turn`` from ``take``).

        Cancelled meanwhile, the call holds no slot: it leaves its key's queue, or gives the
        slot back when it was handed one as it was cancelled.

        Args:
            key: the call's key.
            call: the call.
            turn: the future ``take`` returned.
            lock: the executor's lock (taken to leave the queue).
        """
        try:
            await turn
        except BaseException:
            with lock:
                if turn.done() and not turn.cancelled():
                    self.free(key)
                else:
                    share = self._shares.get(key)
                    if share is not None:
                        share.queue = collections.deque(w for w in share.queue if w[0] is not call)
                        self._forget_if_idle(share)
            raise

    def free(self, key: Any) -> None:
        """A slot ``key`` held is free: hand the free slots to waiting calls, keys in turn.

        The keys served are those with calls waiting that hold fewer slots than their cap,
        in the order they came to wait; a key served goes to the back of the round while
        more of its calls wait.

        Args:
            key: the key whose call ended or gave its slot up.
        """
        share = self._shares[key]
        share.held -= 1
        self._free += 1
        if share.queue and not share.ready:  # it was at its cap
            share.ready = True
            self._round.append(share)
        rnd, cap = self._round, self.per_key
        while self._free and rnd:
            ready = rnd.popleft()
            ready.ready = False
            if not ready.queue:  # its waiting calls were cancelled
                self._forget_if_idle(ready)
                continue
            _call, turn = ready.queue.popleft()
            self._free -= 1
            ready.held += 1
            turn.set_result(None)
            if ready.queue and ready.held < cap:
                ready.ready = True
                rnd.append(ready)
        self._forget_if_idle(share)

    def _forget_if_idle(self, share: _Share) -> None:
        """Drop a key's share once it holds no slot, has no call waiting and is not in turn."""
        if (
            not share.held
            and not share.queue
            and not share.ready
            and self._shares.get(share.key) is share
        ):
            del self._shares[share.key]
