"""The I/O executor hands submitted calls to its loop in batches: none is lost or reordered.

A host submits a call per record; the loop is woken for the first call of a burst and then
looks for more every millisecond while they keep coming (``IOExecutor.submit``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from flink_agents_py.runtime.core._executor import IOExecutor


def _collect(executor: IOExecutor, n: int, fn: Any, *, key: Any = None) -> list[tuple[bool, Any]]:
    done: list[tuple[bool, Any]] = []
    finished = threading.Event()
    lock = threading.Lock()

    def on_done(ok: bool, value: Any) -> None:
        with lock:
            done.append((ok, value))
            if len(done) == n:
                finished.set()

    for i in range(n):
        executor.submit(fn, (i,), {}, on_done, key=key)
    assert finished.wait(10), f"only {len(done)} of {n} calls completed"
    return done


async def _echo(i: int) -> int:
    await asyncio.sleep(0)
    return i


def test_every_call_of_bursts_and_lone_calls_runs_in_submission_order():
    executor = IOExecutor(max_in_flight=1)  # one slot: calls start in submission order
    started: list[int] = []

    async def record(i: int) -> int:
        started.append(i)
        return await _echo(i)

    try:
        got = _collect(executor, 500, record)  # a burst: the loop polls for the rest
        assert sorted(v for _, v in got) == list(range(500))
        assert started == list(range(500))
        time.sleep(0.05)  # the loop has gone quiet: the next call must wake it
        for _ in range(3):
            assert _collect(executor, 1, _echo) == [(True, 0)]
            time.sleep(0.01)
        assert executor.pending == 0 and executor.waiting == 0
    finally:
        executor.stop()


def test_calls_submitted_from_several_threads_all_complete():
    executor = IOExecutor(max_in_flight=8)
    results: list[int] = []
    lock = threading.Lock()
    all_done = threading.Event()
    total = 4 * 250

    def on_done(ok: bool, value: Any) -> None:
        assert ok
        with lock:
            results.append(value)
            if len(results) == total:
                all_done.set()

    def submitter(base: int) -> None:
        for i in range(250):
            executor.submit(_echo, (base + i,), {}, on_done, key=f"k{base + i}")
            if i % 50 == 0:
                time.sleep(0.003)  # gaps: polling may stop and start again

    try:
        threads = [threading.Thread(target=submitter, args=(b * 1000,)) for b in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all_done.wait(10), f"only {len(results)} of {total} calls completed"
        assert sorted(results) == sorted(b * 1000 + i for b in range(4) for i in range(250))
    finally:
        executor.stop()


def test_next_completion_of_any_call_follows_the_oldest_running_call():
    executor = IOExecutor(max_in_flight=4)

    async def slow(i: int) -> int:
        await asyncio.sleep(0.3)
        return i

    try:
        assert executor.next_completion_any_s() is None  # nothing running
        _collect(executor, 1, slow)  # one completed call: the executor knows how long
        done: list[Any] = []
        executor.submit(slow, (1,), {}, lambda ok, v: done.append(v), key="a")
        time.sleep(0.1)
        eta = executor.next_completion_any_s()
        assert eta is not None and 0.1 <= eta <= 0.25, eta
    finally:
        executor.stop()
