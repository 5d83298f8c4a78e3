"""Local-runner measurements (P1 and the local half of P3). No PyFlink."""

from __future__ import annotations

import asyncio
import collections
import os
import sys
import time
from typing import Any

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    ChatModelSetup,
    ResourceDescriptor,
    chat_model_connection,
    chat_model_setup,
)

from ._agents import LATENCY_S, EchoAgent, SlowChatAgent, SlowChatModel

__all__ = ["echo_records", "time_agent_echo", "time_asyncio_echo", "time_local_chats",
           "InstantChatAgent", "cpu_per_local_chat"]


def echo_records(n: int, keys: int) -> list[dict[str, Any]]:
    return [{"key": f"k{i % keys}", "n": i} for i in range(n)]


def _key_of(r: dict[str, Any]) -> Any:
    return r["key"]


def time_agent_echo(records: list[dict[str, Any]]) -> float:
    """Seconds for the local runner to run ``EchoAgent`` over ``records`` (plan compiled before)."""
    job = AgentsExecutionEnvironment.local().from_list(records, key_selector=_key_of)
    job.apply(EchoAgent())
    t = time.perf_counter()
    res = job.run()
    dt = time.perf_counter() - t
    if len(res.outputs) != len(records) or res.errors:
        raise RuntimeError(f"echo agent: {len(res.outputs)} outputs, {len(res.errors)} errors "
                           f"for {len(records)} records")
    return dt


async def _echo(key: Any, record: Any) -> dict[str, Any]:
    return {"key": key, "echo": record}


async def _asyncio_echo(records: list[dict[str, Any]]) -> list[Any]:
    """The baseline: per-key FIFO queues, one asyncio task per run, one run per key at a time."""
    queues: dict[Any, collections.deque[Any]] = {}
    running: set[Any] = set()
    outputs: list[Any] = []
    done = asyncio.get_running_loop().create_future()
    remaining = len(records)

    def start(key: Any, record: Any) -> None:
        running.add(key)
        asyncio.get_running_loop().create_task(run(key, record))

    async def run(key: Any, record: Any) -> None:
        nonlocal remaining
        outputs.append(await _echo(key, record))
        remaining -= 1
        q = queues[key]
        if q:
            start(key, q.popleft())
        else:
            running.discard(key)
        if remaining == 0:
            done.set_result(None)

    for record in records:
        key = _key_of(record)
        q = queues.get(key)
        if q is None:
            q = queues[key] = collections.deque()
        if key in running:
            q.append(record)
        else:
            start(key, record)
        await asyncio.sleep(0)  # let runs proceed while input arrives, as a stream consumer would
    if remaining:
        await done
    return outputs


def time_asyncio_echo(records: list[dict[str, Any]]) -> float:
    """Seconds for the plain-asyncio baseline over ``records``."""
    loop = asyncio.new_event_loop()
    try:
        t = time.perf_counter()
        outputs = loop.run_until_complete(_asyncio_echo(records))
        dt = time.perf_counter() - t
    finally:
        loop.close()
    if len(outputs) != len(records):
        raise RuntimeError(f"asyncio baseline: {len(outputs)} outputs for {len(records)} records")
    return dt


def time_local_chats(keys: int, limit: int, inputs_per_key: int = 1) -> dict[str, Any]:
    """Run ``SlowChatAgent`` on ``keys`` keys (``inputs_per_key`` inputs each) with
    ``max_in_flight=limit``."""
    records = [{"key": f"k{i % keys}", "n": i} for i in range(keys * inputs_per_key)]
    job = AgentsExecutionEnvironment.local(max_in_flight=limit).from_list(records,
                                                                           key_selector=_key_of)
    job.apply(SlowChatAgent())
    t = time.perf_counter()
    res = job.run()
    dt = time.perf_counter() - t
    failed = len(res.errors) + sum(1 for o in res.outputs if o.get("error"))
    if len(res.outputs) != len(records) or failed:
        raise RuntimeError(f"slow chat agent: {len(res.outputs)} outputs, {failed} failures "
                           f"for {len(records)} records")
    return {"wall_s": dt, "count": len(res.outputs), "latency_s": LATENCY_S}


class InstantChatAgent(SlowChatAgent):
    """``SlowChatAgent`` (P3's shape) with a model that answers at once: the core's cost per call.

    Input -> ``ChatRequestEvent`` -> the built-in chat action (one durable model call) ->
    ``ChatResponseEvent`` -> output, with sensory memory written and read, as on Flink.
    """

    @chat_model_connection
    @staticmethod
    def slow_connection() -> ResourceDescriptor:
        return ResourceDescriptor(SlowChatModel, latency_s=0.0)

    @chat_model_setup
    @staticmethod
    def slow_model() -> ResourceDescriptor:
        return ResourceDescriptor(ChatModelSetup, connection="slow_connection")


def cpu_per_local_chat(n: int, keys: int) -> dict[str, float]:
    """CPU per chat of the local runner running ``InstantChatAgent`` over ``n`` inputs.

    Args:
        n: inputs (one chat each).
        keys: distinct keys they spread over.

    Returns:
        ``process_us``: the process's CPU per chat (the I/O executor's thread included);
        ``thread_us``: the calling (operator) thread's alone; both in microseconds.
    """
    records = [{"key": f"k{i % keys}", "n": i} for i in range(n)]
    job = AgentsExecutionEnvironment.local().from_list(records, key_selector=_key_of)
    job.apply(InstantChatAgent())
    p, t = time.process_time(), time.thread_time()
    res = job.run()
    p, t = time.process_time() - p, time.thread_time() - t
    failed = len(res.errors) + sum(1 for o in res.outputs if o.get("error"))
    if len(res.outputs) != n or failed:
        raise RuntimeError(f"instant chat agent: {len(res.outputs)} outputs, {failed} failures "
                           f"for {n} inputs")
    return {"process_us": p / n * 1e6, "thread_us": t / n * 1e6}


if __name__ == "__main__":  # python -m bench._local [inputs] [keys] [repeats]
    args = [int(a) for a in sys.argv[1:]]
    n, keys, repeats = (args + [5000, 100, 5][len(args):])[:3]
    cpu_per_local_chat(min(n, 500), keys)  # warm imports and caches
    runs = [cpu_per_local_chat(n, keys) for _ in range(repeats)]
    print(f"local chat core (instant model, {n} inputs, {keys} keys, best of {repeats}): "
          f"{min(r['process_us'] for r in runs):.1f} us CPU per chat (process), "
          f"{min(r['thread_us'] for r in runs):.1f} us (operator thread); "
          f"load average {os.getloadavg()[0]:.2f}")
