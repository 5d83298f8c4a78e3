"""The P2 baseline: a bare PyFlink ``KeyedProcessFunction`` doing the agent operator's
keyed-state work for an echo, without the agent runtime.

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

__all__ = ["BareEcho"]


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
