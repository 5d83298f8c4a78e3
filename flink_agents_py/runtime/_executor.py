"""The I/O executor: slow model and tool calls of all keys in flight at once.

A background thread runs an asyncio event loop. Async functions run on that loop; plain ones
in a thread pool. At most ``max_in_flight`` calls run at a time; more wait in submission order.
When a call ends, ``on_done`` is called on the executor's thread: it must only hand the
outcome over (the core queues it for the operator thread), never touch operator state.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["IOExecutor"]


class IOExecutor:
    """Runs calls off the operator thread.

    Args:
        max_in_flight: the most calls running at once (>= 1).
        name: a name for the thread (shown in thread dumps).
    """

    def __init__(self, max_in_flight: int = 32, name: str = "flink-agents-io") -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        self.max_in_flight = max_in_flight
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._sem: asyncio.Semaphore | None = None
        self._lock = threading.Lock()
        self.in_flight = 0
        self._pending = 0

    @property
    def pending(self) -> int:
        """Calls submitted whose ``on_done`` has not returned yet (running or waiting)."""
        return self._pending

    def start(self) -> None:
        """Start the loop thread (idempotent)."""
        with self._lock:
            if self._thread is not None:
                return
            ready = threading.Event()
            self._pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=self.max_in_flight, thread_name_prefix=f"{self._name}-worker"
            )

            def run() -> None:
                loop = asyncio.new_event_loop()
                asyncio.set_event_loop(loop)
                loop.set_default_executor(self._pool)  # type: ignore[arg-type]
                self._loop = loop
                self._sem = asyncio.Semaphore(self.max_in_flight)
                ready.set()
                loop.run_forever()
                pending = asyncio.all_tasks(loop)
                for task in pending:  # calls still running are abandoned, not awaited
                    task.cancel()
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
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
    ) -> None:
        """Run ``fn(*args, **kwargs)``; then call ``on_done(ok, result_or_exception)``.

        Thread-safe. Starts the executor on first use.
        """
        if self._loop is None:
            self.start()
        assert self._loop is not None
        with self._lock:
            self._pending += 1
        asyncio.run_coroutine_threadsafe(self._run(fn, args, kwargs, on_done), self._loop)

    async def _run(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
        on_done: Callable[[bool, Any], None],
    ) -> None:
        assert self._sem is not None and self._loop is not None
        async with self._sem:
            self.in_flight += 1
            try:
                if inspect.iscoroutinefunction(fn):
                    result = await fn(*args, **kwargs)
                else:
                    result = await self._loop.run_in_executor(
                        None, functools.partial(fn, *args, **kwargs)
                    )
                    if inspect.isawaitable(result):
                        result = await result
            except BaseException as e:  # noqa: BLE001 - every failure is an outcome
                ok, value = False, e
            else:
                ok, value = True, result
            finally:
                self.in_flight -= 1
        try:
            on_done(ok, value)
        finally:
            with self._lock:
                self._pending -= 1

    def stop(self) -> None:
        """Stop the loop and the thread pool; calls still running are abandoned."""
        with self._lock:
            loop, thread, pool = self._loop, self._thread, self._pool
            self._loop = self._thread = self._pool = None
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=5)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
