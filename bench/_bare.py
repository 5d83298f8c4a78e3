"""Baselines: bare PyFlink ``KeyedProcessFunction`` classes doing the agent operator's
keyed-state work without the agent runtime, ``BareEcho`` for an echo (P2) and ``BareChat``
for a chat (P3).

Per record, like ``AgentOperator`` + ``AgentCore`` for an action with no I/O: queue the record
(JSON) in a ``MapState`` at the tail and bump the tail; read the (empty) in-flight run
``ValueState``; take the record back at the head (get, remove, bump the head); read the
short-term memory JSON ``ValueState``; emit ``{"key", "echo"}``; clear the run state and
write the memory back. Each state is read once; the agent operator reads head/tail a few
times per record (``_bounds`` is called by push, pop and ``queued``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
from pyflink.common import Types
from pyflink.datastream import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor

__all__ = ["BareEcho", "BareChat"]


class BareEcho(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self._run = runtime_context.get_state(ValueStateDescriptor("run", Types.STRING()))
        self._memory = runtime_context.get_state(ValueStateDescriptor("memory", Types.STRING()))
        self._queue = runtime_context.get_map_state(
            MapStateDescriptor("queue", Types.LONG(), Types.STRING()))
        self._head = runtime_context.get_state(ValueStateDescriptor("head", Types.LONG()))
        self._tail = runtime_context.get_state(ValueStateDescriptor("tail", Types.LONG()))

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        key = ctx.get_current_key()
        tail = self._tail.value() or 0
        self._queue.put(tail, orjson.dumps(value).decode())
        self._tail.update(tail + 1)
        self._run.value()
        head = self._head.value() or 0
        raw = self._queue.get(head)
        self._queue.remove(head)
        self._head.update(head + 1)
        record = orjson.loads(raw)
        raw_memory = self._memory.value()
        memory = orjson.loads(raw_memory) if raw_memory else {}
        yield {"key": key, "echo": record}
        self._run.clear()
        self._memory.update(orjson.dumps(memory).decode())


_DRAIN = 2**63 - 2**40  # an event-time timer only the final watermark fires


class BareChat(KeyedProcessFunction):
    """The floor of a durable chat on PyFlink thread mode: the least a hand-written function does.

    Per record, what any durable operator issuing one 200 ms call per record must do, written
    straight with no agent runtime: record the pending call (its input and request, JSON) in
    keyed state; start the call (``asyncio.sleep`` of ``latency_s``) on an event loop in a
    thread of its own, at most ``max_in_flight`` at once (the rest wait in a queue, as calls
    wait for an I/O slot); when calls complete, the loop's thread names their keys and one
    processing-time timer wakes the task thread, which switches the keyed state backend to
    each completed key (as ``KeySwitching``'s pump does), reads its pending call back, emits
    the output the agent's would (``{"key", "t", "error", "t_op"}``) and clears its state.

    It holds the agent operator's cyclic GC settings (``flink._gc``: the heap after ``open``
    frozen, young collections rare), as any function can; its input keeps PyFlink's own
    conversion of each row (the agent operator adopts a faster one, ``flink._fast_input``),
    so the floor is, if anything, a little high.

    Args:
        latency_s: the simulated call's latency in seconds.
        max_in_flight: calls in flight at once.
    """

    def __init__(self, latency_s: float = 0.2, max_in_flight: int = 256) -> None:
        self.latency_s = latency_s
        self.max_in_flight = max_in_flight

    def open(self, runtime_context: RuntimeContext) -> None:
        import asyncio
        import collections
        import threading

        from flink_agents_py.flink._gc import hold_gc_settings
        from flink_agents_py.flink._task_context import _switchable_backend

        hold_gc_settings(self)  # the agent operator's cyclic GC settings (``flink._gc``)
        self._run = runtime_context.get_state(ValueStateDescriptor("run", Types.STRING()))
        self._queued = runtime_context.get_state(ValueStateDescriptor("queued", Types.STRING()))
        self._backend = _switchable_backend(runtime_context)
        assert self._backend is not None, "BareChat runs in thread mode"
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, daemon=True, name="bare-io").start()
        self._ready: collections.deque[Any] = collections.deque()  # keys whose call ended
        self._waiting: collections.deque[tuple[Any, str]] = collections.deque()  # no slot yet
        self._jkeys: dict[Any, Any] = {}  # key -> its backend key
        self._starts: collections.deque[int] = collections.deque()  # in flight: start, ms
        self._timer_at: int | None = None
        self._drain_set = False

    def close(self) -> None:
        from flink_agents_py.flink._gc import release_gc_settings

        self._loop.call_soon_threadsafe(self._loop.stop)
        release_gc_settings(self)

    async def _call(self, key: Any, prompt: str) -> None:
        import asyncio

        await asyncio.sleep(self.latency_s)
        self._ready.append((key, f"re: {prompt}"))

    def _start(self, key: Any, prompt: str) -> None:
        import asyncio
        import time

        self._starts.append(time.time_ns() // 1_000_000)
        asyncio.run_coroutine_threadsafe(self._call(key, prompt), self._loop)

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        key = ctx.get_current_key()
        if key in self._jkeys:  # its call is in flight: the record waits in keyed state
            queued = self._queued.value()
            self._queued.update(orjson.dumps(
                [*(orjson.loads(queued) if queued else ()), value]).decode())
        else:
            self._jkeys[key] = self._backend.getCurrentKey()
            self._begin(key, value)
        if not self._drain_set:  # bounded input: the final watermark finishes the calls
            ctx.timer_service().register_event_time_timer(_DRAIN)
            self._drain_set = True
        yield from self._pump(key)
        self._arm(ctx)

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterator[Any]:
        if timestamp >= _DRAIN:
            import time

            while self._starts:
                time.sleep(0.001)
                yield from self._pump(ctx.get_current_key())
            return
        if self._timer_at is not None and timestamp >= self._timer_at:
            self._timer_at = None
        yield from self._pump(ctx.get_current_key())
        self._arm(ctx)

    def _begin(self, key: Any, value: Any) -> None:
        """Record the call of ``value`` in the current key's state; start it or queue it."""
        import time

        prompt = str(value["n"])
        self._run.update(orjson.dumps({"input": value, "t_op": time.time(), "call": {
            "model": "slow_model", "messages": [{"role": "user", "content": prompt}]}}).decode())
        if len(self._starts) < self.max_in_flight:
            self._start(key, prompt)
        else:
            self._waiting.append((key, prompt))

    def _pump(self, own: Any) -> Iterator[Any]:
        ready = self._ready
        if not ready:
            return
        backend, own_jkey, current = self._backend, None, own
        while ready:
            key, answer = ready.popleft()
            self._starts.popleft()  # (the calls take equal times: they end in order)
            if self._waiting:
                self._start(*self._waiting.popleft())
            jkey = self._jkeys[key]
            if key != current:
                if own_jkey is None:
                    own_jkey = backend.getCurrentKey()
                backend.setCurrentKey(jkey)
                current = key
            run = orjson.loads(self._run.value())
            yield {"key": key, "t": run["input"].get("t"), "error": None, "t_op": run["t_op"],
                   "answer": answer}
            queued = self._queued.value()
            if queued:  # the key's next record
                rest = orjson.loads(queued)
                if len(rest) > 1:
                    self._queued.update(orjson.dumps(rest[1:]).decode())
                else:
                    self._queued.clear()
                self._begin(key, rest[0])
            else:
                self._run.clear()
                del self._jkeys[key]
        if current != own:
            backend.setCurrentKey(own_jkey)

    def _arm(self, ctx: Any) -> None:
        """One processing-time timer while calls are in flight, for the next one's end."""
        import time

        if not self._starts:
            return
        now = time.time_ns() // 1_000_000
        at = now + 1 if self._ready else max(
            now + 1, self._starts[0] + int(self.latency_s * 1000) + 1)
        if self._timer_at is not None and self._timer_at <= at:
            return
        ctx.timer_service().register_processing_time_timer(at)
        self._timer_at = at
