"""One key's Flink keyed state, without Flink: the operator's own ``_FlinkKeyState`` over
dict-backed stand-ins of its ``ValueState`` and ``MapState`` handles.

The stand-ins hold exactly what the Flink operator stores (strings and integers, under the
state names of ``AgentOperator.open``), so a test can dump a key's state as a savepoint holds
it and restore it through the operator's own encoding and decoding.
"""

from __future__ import annotations

from typing import Any

from flink_agents_py.runtime import KeyState

__all__ = ["RUN", "MEMORY", "QUEUE", "HEAD", "TAIL", "FlinkKeyedState"]

RUN, MEMORY, QUEUE, HEAD, TAIL = (
    "agent-run", "agent-memory", "agent-queue", "agent-queue-head", "agent-queue-tail")
"""The operator's state descriptor names."""


class _Value:
    """A ``ValueState`` stand-in."""

    def __init__(self, store: dict[str, Any], name: str) -> None:
        self._store, self._name = store, name

    def value(self) -> Any:
        return self._store.get(self._name)

    def update(self, value: Any) -> None:
        self._store[self._name] = value

    def clear(self) -> None:
        self._store.pop(self._name, None)


class _Map:
    """A ``MapState`` stand-in."""

    def __init__(self, store: dict[str, Any], name: str) -> None:
        self._map: dict[int, str] = store.setdefault(name, {})

    def put(self, key: int, value: str) -> None:
        self._map[key] = value

    def get(self, key: int) -> str | None:
        return self._map.get(key)

    def remove(self, key: int) -> None:
        self._map.pop(key, None)


class FlinkKeyedState:
    """The keyed state of one key, as the Flink operator keeps it.

    Args:
        stored: what a savepoint holds for the key (``dump()`` output): the run and memory
            JSON strings, the queue entries by position (JSON strings), head and tail.
    """

    def __init__(self, stored: dict[str, Any] | None = None) -> None:
        self.store: dict[str, Any] = {}
        for name, value in (stored or {}).items():
            if name == QUEUE:
                self.store[QUEUE] = {int(k): v for k, v in value.items()}
            elif value is not None:
                self.store[name] = value
        self.store.setdefault(QUEUE, {})
        self._run_state = _Value(self.store, RUN)
        self._memory_state = _Value(self.store, MEMORY)
        self._queue_state = _Map(self.store, QUEUE)
        self._head_state = _Value(self.store, HEAD)
        self._tail_state = _Value(self.store, TAIL)

    def key_state(self) -> KeyState:
        """A new ``KeyState`` for one host callback (the operator makes one per callback)."""
        from flink_agents_py.flink._operator import _FlinkKeyState

        return _FlinkKeyState(self)  # type: ignore[arg-type]

    def dump(self) -> dict[str, Any]:
        """The stored values (JSON-ready: queue positions become strings)."""
        return {
            RUN: self.store.get(RUN),
            MEMORY: self.store.get(MEMORY),
            QUEUE: {str(k): v for k, v in sorted(self.store[QUEUE].items())},
            HEAD: self.store.get(HEAD),
            TAIL: self.store.get(TAIL),
        }
