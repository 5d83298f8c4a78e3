"""``_FlinkKeyState``: one key's agent state in Flink keyed state, for one callback.

Keyed state holds, per key: the in-flight run (``RunState.to_stored()`` text), the short-term
memory (JSON), and the queue of inputs waiting behind the run (a ``MapState`` by position,
with a tail counter, the key's next input sequence number; the head is ``run.seq + 1`` of
the run in flight). A queued input is its JSON text, or, when the host knows where it was
read (``from_kafka``), ``SOURCE_MARK``, that place and ``SOURCE_MARK`` again before it (JSON
text never starts with that character). See the
operator's module docstring (``_operator``) for what a record costs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..api.internal import shown_key
from ..runtime import KeyState, RunState, StateFormatError, dumps_json, loads_json

if TYPE_CHECKING:
    from ._operator import AgentOperator

__all__ = ["_FlinkKeyState"]

_UNREAD: Any = object()

SOURCE_MARK = "\x1f"
"""Starts a queued input stored with where it was read (see the module docstring)."""

IDLE_KEYS = 10_000
"""How many idle keys' queue tails the operator remembers (``AgentOperator._idle``)."""


class _FlinkKeyState(KeyState):
    """The current key's state in Flink keyed state, for one callback.

    Each value is read at most once (lazily) and written back by ``flush`` only when it
    changed; inputs pushed during the callback stay in memory, so one pushed and popped in
    the same callback never reaches the ``MapState``. ``flush`` may be called more than once
    (the object stays valid for the rest of the callback).

    With ``runs`` (the operator's, by its current key), a busy key's run as last written to
    keyed state and its queue counters are kept in memory, so the callback that resumes the
    key neither reads the run's text and the counters from Flink again nor parses the run:
    keyed state changes only through ``flush``, in this process. An entry is taken out when
    read and put back by ``flush``, so a callback that fails before its flush leaves none
    behind (the key is then read from keyed state); a restored operator starts with none.
    Likewise (with ``runs``) the operator remembers the last ``IDLE_KEYS`` keys that went
    idle here, with the tail keyed state holds for them (``AgentOperator._idle``): a new input
    of such a key reads neither its run (it has none) nor its tail from Flink.
    """

    __slots__ = ("_op", "_runs", "_run", "_run_raw", "_memory", "_memory_raw", "_head",
                 "_tail", "_head_stored", "_tail_stored", "_pushed", "_sources",
                 "popped_source")

    def __init__(self, op: AgentOperator,
                 runs: dict[Any, tuple[Any, RunState, int, int]] | None = None) -> None:
        self._op = op
        self._runs = runs
        self._run: RunState | None = None
        self._run_raw: Any = _UNREAD
        self._memory: dict[str, Any] | None = None
        self._memory_raw: Any = _UNREAD
        self._head = self._tail = -1  # -1: not read yet
        self._head_stored: int | None = None  # None: unknown (the key had no run)
        self._tail_stored = 0
        self._pushed: dict[int, Any] = {}  # inputs pushed in this callback, not in state yet
        self._sources: dict[int, str] | None = None  # where pushed ones were read (if known)
        self.popped_source: str | None = None

    def _load_run(self) -> None:
        op = self._op
        runs = self._runs
        cached = runs.pop(op._key, None) if runs is not None else None
        if cached is not None:
            self._run_raw, self._run, head, tail = cached
            if tail >= 0:
                self._head = head
                self._tail = self._tail_stored = tail
        elif runs is not None and (idle := op._idle.pop(op._key, None)) is not None:
            self._run_raw = self._run = None  # idle in keyed state: no run, no queue
            self._head = self._tail = self._tail_stored = idle
        else:
            raw = op._run_state.value()
            self._run_raw = raw
            try:
                self._run = RunState.from_stored(raw) if raw else None
            except StateFormatError as e:  # damaged: the core reports it and drops the run
                self._run = None  # (``run = None``), so it is read once
                self._head_stored = e.seq + 1 if e.seq is not None else self._queue_head()
                raise
        if self._run is not None:  # the queue's head: the input after the run's own
            self._head_stored = self._run.seq + 1

    def _queue_head(self) -> int:
        """The first queued position, found from the tail (a damaged run's seq is unknown).

        Queued inputs are the positions just below the tail: the head is the lowest one of
        that unbroken stretch (the tail itself when none is queued).

        Returns:
            The head's position.
        """
        tail = self._op._tail_state.value() or 0
        head, queue = tail, self._op._queue_state
        while head > 0 and queue.get(head - 1) is not None:
            head -= 1
        return head

    @property
    def run(self) -> RunState | None:
        """The in-flight run (read from keyed state once)."""
        if self._run_raw is _UNREAD:
            self._load_run()
        return self._run

    @run.setter
    def run(self, value: RunState | None) -> None:
        if self._run_raw is _UNREAD:
            self._load_run()
        self._run = value

    @property
    def memory(self) -> dict[str, Any]:
        """The key's short-term memory (read from keyed state once, when first touched)."""
        if self._memory is None:
            raw = self._op._memory_state.value()
            self._memory_raw = raw
            self._memory = loads_json(raw) if raw else {}
        return self._memory

    @memory.setter
    def memory(self, value: dict[str, Any]) -> None:
        self._memory = value

    def _bounds(self) -> None:
        if self._tail >= 0:
            return
        if self._run_raw is _UNREAD:
            self._load_run()
            if self._tail >= 0:  # known with the run (the operator's cache)
                return
        tail = self._op._tail_state.value() or 0
        self._tail = self._tail_stored = tail
        if not self._run_raw:  # a key idle in state has no queue (see the module docstring)
            self._head = tail
        else:  # the run in flight was the last input taken from the queue
            assert self._head_stored is not None
            self._head = self._head_stored

    def push_input(self, record: Any, source: str | None = None) -> None:
        """Queue ``record`` (kept in memory until ``flush``), with where it was read."""
        if self._tail < 0:  # (``_bounds`` once per callback; checked here, not by a call)
            self._bounds()
        self._pushed[self._tail] = record
        if source is not None:
            if self._sources is None:
                self._sources = {}
            self._sources[self._tail] = source
        self._tail += 1

    def pop_input(self) -> tuple[int, Any] | None:
        """The oldest queued input as ``(seq, record)``, or ``None``."""
        if self._tail < 0:
            self._bounds()
        seq = self._head
        if seq >= self._tail:
            return None
        self._head = seq + 1
        if seq in self._pushed:
            sources = self._sources
            self.popped_source = sources.pop(seq, None) if sources is not None else None
            return seq, self._pushed.pop(seq)
        queue = self._op._queue_state
        raw = queue.get(seq)
        queue.remove(seq)
        if raw is None:
            key = self._op.keys.value(self._op._key)
            raise RuntimeError(f"input {seq} of key {shown_key(key)} is missing from the "
                               f"operator's queue state (head {seq}, tail {self._tail})")
        self.popped_source = None
        if raw.startswith(SOURCE_MARK):  # stored with where it was read
            self.popped_source, raw = raw[1:].split(SOURCE_MARK, 1)
        return seq, loads_json(raw)

    def queued(self) -> int:
        """How many inputs wait behind the in-flight run."""
        if self._tail < 0:
            self._bounds()
        return self._tail - self._head

    def flush(self) -> None:
        """Write back what changed: the run, the memory, the queue and its counters."""
        op = self._op
        if self._run_raw is not _UNREAD:
            if self._run is None:
                if self._run_raw:
                    op._run_state.clear()
                self._run_raw = None
            else:
                text = self._run.to_stored()
                if text != self._run_raw:
                    op._run_state.update(text)
                    self._run_raw = text
        if self._memory is not None and (self._memory or self._memory_raw):
            if not self._memory:  # all deleted: the key keeps no memory state (not "{}")
                op._memory_state.clear()
                self._memory_raw = None
            else:
                text = dumps_json(self._memory, sort_keys=False).decode()
                if text != self._memory_raw:
                    op._memory_state.update(text)
                    self._memory_raw = text
        if self._tail >= 0:
            sources = self._sources
            for seq, record in self._pushed.items():
                text = dumps_json(record, sort_keys=False).decode()
                if sources is not None and seq in sources:
                    text = f"{SOURCE_MARK}{sources.pop(seq)}{SOURCE_MARK}{text}"
                op._queue_state.put(seq, text)
            self._pushed.clear()
            if self._tail != self._tail_stored:
                op._tail_state.update(self._tail)
                self._tail_stored = self._tail
            if self._run is not None:  # ``run.seq + 1``, which keyed state holds already
                self._head_stored = self._head
        runs = self._runs
        if runs is None:
            return
        if self._run is not None:  # as in keyed state now (see the class docstring)
            runs[op._key] = (self._run_raw, self._run, self._head, self._tail)
            return
        runs.pop(op._key, None)
        if self._run_raw is None and 0 <= self._tail == self._head:  # idle, as keyed state is
            idle = op._idle
            if len(idle) >= IDLE_KEYS:
                idle.popitem(last=False)  # the key idle longest
            idle[op._key] = self._tail
