"""The I/O executor: slow model and tool calls of all keys in flight at once.

A background thread runs an asyncio event loop. Async functions run on that loop; plain ones
in a thread pool. At most ``max_in_flight`` calls run at a time; more wait for a slot.

Slots are shared between keys (``_slots.KeyShares``): one key holds at most
``max_in_flight_per_key`` of them (three quarters of ``max_in_flight`` unless set), and a
freed slot goes to the keys whose calls wait in turn, so a hot or hostile key's backlog does
not queue other keys' calls behind it. A key's own calls start in submission order.

When a call ends, ``on_done`` is called on the executor's thread: it must only hand the
outcome over (the core queues it for the operator thread), never touch operator state.

For the host's wake-ups the executor knows, per key, which calls are running and which still
wait for a slot, and how long calls of each function took (a moving average): from these,
``next_completion_s`` estimates when a key's next call will complete, so a host that must
poll a key (Flink's timers) polls it about then, not every millisecond. For backpressure,
``wait_waiting_below`` blocks the host until fewer calls wait for a slot.

A call that waits inside for something other than its own work (flow control holding a
throttled model call, a retry's backoff, a budget's hold, an async sub-agent's poll between
probes) gives its slot up meanwhile (``io_slot``, ``sleep_without_slot``), so one provider
that throttles does not keep every other call waiting; it still counts as waiting, so the
host's backpressure sees it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import threading
import time
from collections.abc import Callable
from types import FunctionType
from typing import Any

from ...api.internal import close_loop_clients
from ._slots import KeyShares
from ._stepper import DURABLE_FUNCTION, DURABLE_OWNER

__all__ = ["IOExecutor", "IOSlot", "given_up_slot", "io_slot", "sleep_without_slot"]

_EWMA_WEIGHT = 0.2
"""Weight of the newest call duration in the moving averages."""

_SUBMIT_POLL_S = 0.001
"""While calls keep being submitted, how often the loop looks for new ones, in seconds.

The first call of a burst wakes the loop (a write to its self-pipe, and the submitting
thread gives up the GIL); while more keep coming the loop looks for them this often instead,
so a host submitting a call per record does not wake it per record. A call thus starts at
most this much later; polling stops after ``_SUBMIT_IDLE_LOOKS`` looks in a row find
nothing."""

_SUBMIT_IDLE_LOOKS = 20
"""How many looks in a row must find no submission before the loop stops looking.

A host whose calls come a few milliseconds apart (each record's call submitted as slots
free up) then wakes the loop once, not once per call: the write to the loop's self-pipe, and
handing it the GIL, cost the submitting thread more than the loop's looks cost the loop's
thread (at most this many after the last call of a burst)."""


_UNTRACKED: Any = object()
"""``submit``'s ``key`` when a call belongs to no record key. A sentinel, not ``None``: ``None``
is a record key like any other (``AgentsExecutionEnvironment`` keys records by any value)."""


class _Call:
    """One submitted call: its key, what it runs, its place in line, when it started."""

    __slots__ = ("given_up", "key", "name", "order", "owner", "started", "task")

    def __init__(self, key: Any, name: str, order: int, owner: Any = None) -> None:
        self.key = key
        self.name = name
        self.order = order
        self.owner = owner  # the action execution that made it (``DURABLE_OWNER``)
        self.started: float | None = None
        self.task: asyncio.Task[Any] | None = None  # the task running it, once started
        self.given_up = False  # its slot is given up (``IOSlot``)


_SLOT: contextvars.ContextVar[tuple[IOExecutor, _Call] | None] = contextvars.ContextVar(
    "flink_agents_io_slot", default=None)
"""The executor and call whose slot the running async function holds."""


class IOSlot:
    """The I/O executor slot of the call running now, which it may give up while it waits.

    Valid only in the task that runs the call (``io_slot``), on the executor's loop.
    """

    def __init__(self, executor: IOExecutor, call: _Call) -> None:
        self._executor = executor
        self._call = call

    @property
    def given_up(self) -> bool:
        """Whether the slot is given up (``give_up`` without ``take_back`` since)."""
        return self._call.given_up

    def give_up(self) -> None:
        """Free the slot for other calls; the call counts as waiting until ``take_back``."""
        if not self._call.given_up:
            self._executor._give_up(self._call)

    async def take_back(self) -> None:
        """Wait for a slot again (behind calls already waiting for one)."""
        if self._call.given_up:
            await self._executor._take_back(self._call)


def io_slot() -> IOSlot | None:
    """The slot of the executor call running in this task, to give up while it waits.

    Returns:
        The slot, or ``None`` outside an async call of an ``IOExecutor`` (a test's own
        loop, a thread, a task the call started).
    """
    found = _SLOT.get()
    if found is None:
        return None
    executor, call = found
    if call.task is None or asyncio.current_task() is not call.task:
        return None
    return IOSlot(executor, call)


def given_up_slot(slot: IOSlot | None) -> IOSlot | None:
    """Give up the running call's slot (``slot``, or ``io_slot()`` when not found yet).

    For a call about to wait for something other than its own work (a held throttled call,
    a budget waiting for calls in flight): other calls run in its slot meanwhile.

    Returns:
        The slot, to take back before the call goes on (``None``: outside an executor call).
    """
    slot = slot if slot is not None else io_slot()
    if slot is not None:
        slot.give_up()
    return slot


async def sleep_without_slot(seconds: float) -> None:
    """``asyncio.sleep``, the running executor call's slot given up meanwhile (``io_slot``).

    For a call that waits for time to pass (a backoff, a budget's window): other calls run
    in its slot meanwhile, and it counts as waiting (backpressure).

    Args:
        seconds: how long to sleep.
    """
    slot = io_slot()
    if slot is None:
        await asyncio.sleep(seconds)
        return
    slot.give_up()
    try:
        await asyncio.sleep(seconds)
    finally:
        await slot.take_back()


class _Raised:
    """A ``StopIteration`` a function raised in a worker thread, carried back as a value."""

    __slots__ = ("error",)

    def __init__(self, error: StopIteration) -> None:
        self.error = error


def _in_thread(name: str, fn: Callable[..., Any], args: tuple[Any, ...],
               kwargs: dict[str, Any], owner: Any = None) -> Any:
    """Run a plain function in a worker thread, handing a ``StopIteration`` back as ``_Raised``.

    ``DURABLE_FUNCTION`` says ``name`` meanwhile (a durable call made by the function is part
    of its call), and ``DURABLE_OWNER`` the action execution that made the call.

    asyncio cannot set ``StopIteration`` on a future (it would end the generator awaiting
    it): copied from the thread's future, it raised a ``TypeError`` in a loop callback
    instead, and the call never completed. A function ending with ``next(...)`` on an empty
    iterator is ordinary code, so its failure is an outcome like any other.

    Returns:
        What ``fn`` returned, or ``_Raised`` holding the ``StopIteration`` it raised.
    """
    inside = DURABLE_FUNCTION.set(name)
    owned = DURABLE_OWNER.set(owner)
    try:
        return fn(*args, **kwargs)
    except StopIteration as e:
        return _Raised(e)
    finally:
        DURABLE_OWNER.reset(owned)
        DURABLE_FUNCTION.reset(inside)


def _name_of(fn: Callable[..., Any]) -> str:
    target = fn.func if isinstance(fn, functools.partial) else fn
    return getattr(target, "__qualname__", None) or type(target).__qualname__


class IOExecutor:
    """Runs calls off the operator thread.

    Args:
        max_in_flight: the most calls running at once (>= 1).
        name: a name for the thread (shown in thread dumps).
        max_in_flight_per_key: the most calls of one key running at once (``None``: three
            quarters of ``max_in_flight``; see ``_slots.per_key_slots``).

    Raises:
        ValueError: when ``max_in_flight`` or ``max_in_flight_per_key`` is below 1.
    """

    def __init__(self, max_in_flight: int = 32, name: str = "flink-agents-io",
                 max_in_flight_per_key: int | None = None) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        if max_in_flight_per_key is not None and max_in_flight_per_key < 1:
            raise ValueError(f"max_in_flight_per_key must be >= 1, got {max_in_flight_per_key}")
        self.max_in_flight = max_in_flight
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self.slots = KeyShares(max_in_flight, max_in_flight_per_key)
        """The slots and how keys share them (used under the lock, on the loop)."""
        self._lock = threading.Lock()
        self._started_cond = threading.Condition(self._lock)
        self.in_flight = 0
        self.pending = 0
        """Calls submitted whose ``on_done`` has not returned yet (running or waiting): read
        once or twice per record by a host, so a plain attribute (set under the lock)."""
        self._waiting = 0
        self._held = 0  # calls that gave their slot up and have not taken one back
        self._submitted = 0
        self._n_started = 0
        self._by_key: dict[Any, list[_Call]] = {}
        self._running: dict[_Call, None] = {}  # in start order: the first started first
        self._avg_s: dict[str, float] = {}
        self._avg_all_s: float | None = None
        self._submissions: list[tuple[Any, ...]] = []  # handed to the loop in batches
        self._polling = False  # the loop looks for submissions every _SUBMIT_POLL_S
        self._idle_looks = 0  # looks in a row that found no submission
        self._wake_below = 0  # a host waits in ``wait_waiting_below`` for fewer waiting calls

    @property
    def waiting(self) -> int:
        """Calls submitted that wait for a slot: not started yet, or gave their slot up."""
        return self._waiting + self._held

    def start(self) -> None:
        """Start the loop thread (idempotent)."""
        with self._lock:
            if self._thread is not None:
                return
            ready = threading.Event()
            pool = self._pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=self.max_in_flight, thread_name_prefix=f"{self._name}-worker"
            )

            def run() -> None:
                loop = asyncio.new_event_loop()
                asyncio.set_event_loop(loop)
                loop.set_default_executor(pool)
                self._loop = loop
                ready.set()
                loop.run_forever()
                pending = asyncio.all_tasks(loop)
                for task in pending:  # calls still running are abandoned, not awaited
                    task.cancel()
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                loop.run_until_complete(close_loop_clients())  # SDK clients: on their loop
                loop.close()

            self._thread = threading.Thread(target=run, name=self._name, daemon=True)
            self._thread.start()
            ready.wait()

    def submit(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        on_done: Callable[[bool, Any], None],
        *,
        key: Any = _UNTRACKED,
        owner: Any = None,
    ) -> None:
        """Run ``fn(*args, **kwargs)``; then call ``on_done(ok, result_or_exception)``.

        Thread-safe. Starts the executor on first use.

        Args:
            fn: a plain or async function.
            args: its positional arguments.
            kwargs: its keyword arguments.
            on_done: called on the executor's thread with the outcome.
            key: the record key the call belongs to (for ``has_calls`` and
                ``next_completion_s``; any value, ``None`` included); omitted: not tracked
                by key.
            owner: the action execution making the call (``DURABLE_OWNER`` while it runs).
        """
        if self._loop is None:
            self.start()
        assert self._loop is not None
        with self._lock:
            self.pending += 1
            self._waiting += 1
            call = _Call(key, fn.__qualname__ if type(fn) is FunctionType and fn.__qualname__
                         else _name_of(fn), self._submitted, owner)  # (a function's: inline)
            self._submitted += 1
            if key is not _UNTRACKED:
                self._by_key.setdefault(key, []).append(call)
            wake = not self._submissions and not self._polling
            self._submissions.append((fn, args, kwargs, on_done, call))
        if wake:  # else the loop is woken already, or looks for submissions soon
            self._loop.call_soon_threadsafe(self._start_submitted)

    def _start_submitted(self) -> None:
        """On the loop: start a task for every call submitted since the last batch."""
        with self._lock:
            batch, self._submissions = self._submissions, []
            # more may follow: look again soon, until a few looks in a row found nothing
            self._idle_looks = 0 if batch else self._idle_looks + 1
            polling = self._polling = self._idle_looks < _SUBMIT_IDLE_LOOKS
        loop = self._loop
        if loop is None:  # stopped meanwhile
            return
        for fn, args, kwargs, on_done, call in batch:
            loop.create_task(self._run(fn, args, kwargs, on_done, call))
        if polling:
            loop.call_later(_SUBMIT_POLL_S, self._start_submitted)

    async def _run(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
        on_done: Callable[[bool, Any], None], call: _Call,
    ) -> None:
        assert self._loop is not None
        with self._lock:
            turn = self.slots.take(call.key, call, self._loop)
        if turn is not None:
            await self.slots.wait_turn(call.key, call, turn, self._lock)
        with self._lock:
            self.in_flight += 1
            self._waiting -= 1
            self._n_started += 1
            call.started = time.monotonic()
            self._running[call] = None
            self._wake_host()
        # the function's own code, and an awaitable a plain callable gives back (a
        # lambda calling an async function, an object with an async ``__call__``), run
        # inside the durable call: a durable call made there is part of it (``_nested``)
        inside = DURABLE_FUNCTION.set(call.name)
        owned = DURABLE_OWNER.set(call.owner)
        slot = _SLOT.set((self, call))
        call.task = asyncio.current_task()
        try:
            if inspect.iscoroutinefunction(fn):
                result = await fn(*args, **kwargs)
            else:
                result = await self._loop.run_in_executor(
                    None, functools.partial(_in_thread, call.name, fn, args, kwargs,
                                            call.owner)
                )
                if inspect.isawaitable(result):
                    result = await result
        except BaseException as e:  # noqa: BLE001 - every failure is an outcome
            ok, value = False, e
        else:
            ok, value = (False, result.error) if isinstance(result, _Raised) \
                else (True, result)
        finally:
            _SLOT.reset(slot)
            call.task = None  # (no cycle through the task left behind)
            DURABLE_OWNER.reset(owned)
            DURABLE_FUNCTION.reset(inside)
            with self._lock:
                if call.given_up:  # cancelled while taking a slot back: holds none
                    self._held -= 1
                else:
                    self.in_flight -= 1
                    self._running.pop(call, None)
                    self.slots.free(call.key)
                took = time.monotonic() - call.started
                prev = self._avg_s.get(call.name)
                self._avg_s[call.name] = took if prev is None else (
                    prev + _EWMA_WEIGHT * (took - prev))
                avg = self._avg_all_s
                self._avg_all_s = took if avg is None else avg + _EWMA_WEIGHT * (took - avg)
        try:
            on_done(ok, value)
        finally:
            with self._lock:
                self.pending -= 1
                if call.key is not _UNTRACKED:  # after on_done: the outcome is in the inbox by now
                    calls = self._by_key.get(call.key)
                    if calls is not None:
                        calls.remove(call)
                        if not calls:
                            del self._by_key[call.key]

    def _wake_host(self) -> None:
        """Wake the host's ``wait_waiting_below`` once its bound is met (under the lock)."""
        if self._waiting + self._held < self._wake_below:
            self._wake_below = 0
            self._started_cond.notify_all()

    def _give_up(self, call: _Call) -> None:
        """``IOSlot.give_up``: the call's slot goes to the next call waiting for one."""
        with self._lock:
            call.given_up = True
            self.in_flight -= 1
            self._held += 1
            self._running.pop(call, None)
            self.slots.free(call.key)

    async def _take_back(self, call: _Call) -> None:
        """``IOSlot.take_back``: wait for a slot again, then count the call as running again.

        It waits behind its key's waiting calls, in turn with other keys (``KeyShares``).
        """
        assert self._loop is not None
        with self._lock:
            turn = self.slots.take(call.key, call, self._loop)
        if turn is not None:
            await self.slots.wait_turn(call.key, call, turn, self._lock)
        with self._lock:
            call.given_up = False
            self.in_flight += 1
            self._held -= 1
            self._running[call] = None
            self._wake_host()

    def has_calls(self, key: Any) -> bool:
        """Whether calls of ``key`` were submitted whose ``on_done`` has not returned (O(1)).

        A call's key is forgotten only after its ``on_done`` returned, so once this is
        ``False`` every outcome of ``key`` has been handed over (to the core's inbox).

        Returns:
            Whether some are running or waiting for a slot.
        """
        return key in self._by_key  # one dict look-up: atomic without the lock

    def next_completion_s(self, key: Any, now: float | None = None) -> float | None:
        """An estimate of the seconds until the next call of ``key`` completes.

        A running call is expected to take as long as recent calls of the same function
        (a moving average); a waiting call to start once the calls ahead of it have freed
        slots at that rate, then to take as long: the calls submitted before it, or, when
        fewer, a call of each key waiting for each of its own key's calls up to it (slots
        go to keys in turn). ``0.0`` when a call has run past its expected duration.

        Args:
            key: a key given to ``submit``.
            now: ``time.monotonic()`` (taken when not given).

        Returns:
            The estimate, or ``None`` when ``key`` has no calls or no call has completed yet
            (nothing to estimate from).
        """
        now = time.monotonic() if now is None else now
        with self._lock:
            calls = self._by_key.get(key)
            if not calls or self._avg_all_s is None:
                return None
            best: float | None = None
            free = self.max_in_flight - self.in_flight
            keys = len(self._by_key)  # at most this many keys are served in turn before it
            mine = 0  # calls of this key waiting ahead of ``c``
            for c in calls:
                avg = self._avg_s.get(c.name, self._avg_all_s)
                if c.started is not None:
                    eta = max(0.0, c.started + avg - now)
                else:  # starts once the calls ahead of it took the free slots and more
                    ahead = max(0, min(c.order - self._n_started, (mine + 1) * keys - 1))
                    mine += 1
                    freed = ahead - free + 1  # running calls that must end first
                    # a little early rather than late: the next look re-estimates
                    eta = avg + 0.9 * max(0, freed) * self._avg_all_s / self.max_in_flight
                best = eta if best is None else min(best, eta)
            return best

    def next_completion_any_s(self, now: float | None = None) -> float | None:
        """An estimate of the seconds until the next call of any key completes (O(1)).

        The call that started first among those running is taken to end first, after as
        long as recent calls of its function took (a moving average).

        Args:
            now: ``time.monotonic()`` (taken when not given).

        Returns:
            The estimate (``0.0`` when that call has run past its expected duration), or
            ``None`` when no call runs or none has completed yet.
        """
        now = time.monotonic() if now is None else now
        with self._lock:
            if not self._running or self._avg_all_s is None:
                return None
            first = next(iter(self._running))
            avg = self._avg_s.get(first.name, self._avg_all_s)
            started = first.started if first.started is not None else now
            return max(0.0, started + avg - now)

    def wait_waiting_below(self, limit: int, timeout_s: float) -> bool:
        """Block until fewer than ``limit`` calls wait for a slot, or ``timeout_s`` passes.

        The executor wakes the host only once the bound is met, not at every call that starts
        (one thread waits at a time: the host's).

        Args:
            limit: the bound (>= 1).
            timeout_s: the longest wait, in seconds.

        Returns:
            Whether fewer than ``limit`` calls wait now.
        """
        with self._started_cond:
            if self._waiting + self._held < limit:
                return True
            self._wake_below = limit
            try:
                return self._started_cond.wait_for(
                    lambda: self._waiting + self._held < limit, timeout=timeout_s)
            finally:
                self._wake_below = 0

    def stop(self) -> None:
        """Stop the loop and the thread pool; calls still running are abandoned."""
        with self._lock:
            loop, thread, pool = self._loop, self._thread, self._pool
            self._loop = self._thread = self._pool = None
            self._by_key.clear()
            self._running.clear()
            self._submissions = []
            self._polling = False
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=5)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
