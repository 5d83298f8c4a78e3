"""The agent operator without a JVM: what its Python costs per record, and where it goes.

    python -m bench._op_harness [--kind chat|echo] [--records N] [--keys K] [--metrics]
                                [--profile] [--top 40]

Drives ``AgentOperator`` as a thread-mode TaskManager does, with fakes in place of Flink's
objects: per-key value and map state behind a keyed state backend whose current key the
operator can switch (so the pump and the key-group timers run as in thread mode), a timer
service whose processing-time timers fire in order on the wall clock, and a context. The
records go in one after another (each key's ``process_element``), timers fire as they fall
due, until every output has come out.

With ``--metrics`` the agent metrics are pushed to a fake Flink metric group
(``FakeMetricGroup``: counters, meters and distributions kept in Python, a distribution
taking its last value only, as thread mode's), so the figure includes the batched push; the
run fails when a scalar the group holds after ``close()`` differs from the operator's own.

Printed: the CPU time of the calling thread (``time.thread_time``: the operator's work, not
the I/O executor's) per record, for ``open()`` and for the records; with ``--profile``, the
Python calls per record and the top of a ``cProfile`` of the callbacks. The same code costs
about 1.9x as much in a TaskManager (2026-12-04: 181 us per chat here, 341-363 us there,
``bench._compare``'s steady-state row), for PyFlink's per-record handling, calls into Java
and an embedded interpreter; a change that lowers the figure here lowers it there, and it
is measured in seconds with ±3 % noise instead of minutes.

``--kind chat`` is ``bench._agents.SlowChatAgent`` (one chat per key through the built-in chat
action, 200 ms model latency, 256 in flight); ``--kind echo`` the echo agent.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import heapq
import pstats
import sys
import time
from typing import Any

__all__ = ["FakeHost", "FakeMetricGroup", "main"]


class _Backend:
    """A keyed state backend's Java face as ``KeySwitching`` uses it."""

    def __init__(self, host: FakeHost) -> None:
        self.host = host

    def getCurrentKey(self) -> Any:  # noqa: N802 - Flink's Java names
        return ("jkey", self.host.key)

    def setCurrentKey(self, jkey: Any) -> None:  # noqa: N802
        self.host.key = jkey[1]

    def getCurrentKeyGroupIndex(self) -> int:  # noqa: N802
        return hash(self.host.key) % 128

    def getKeys(self, name: str, namespace: Any) -> Any:  # noqa: N802
        return _Stream(list(self.host.states[name].keys_with_values()))


class _Stream:
    """``Stream<K>`` of ``getKeys``: an iterator and ``close``."""

    def __init__(self, keys: list[Any]) -> None:
        self._keys = keys

    def iterator(self) -> Any:
        return _Iterator(self._keys)

    def close(self) -> None:
        pass


class _Iterator:
    def __init__(self, keys: list[Any]) -> None:
        self._it, self._next = iter(keys), None

    def hasNext(self) -> bool:  # noqa: N802
        try:
            self._next = ("jkey", next(self._it))
        except StopIteration:
            return False
        return True

    def next(self) -> Any:
        return self._next


class _Value:
    """A ``ValueState`` of the current key."""

    def __init__(self, host: FakeHost) -> None:
        self.host, self.by_key = host, {}

    def value(self) -> Any:
        return self.by_key.get(self.host.key)

    def update(self, value: Any) -> None:
        self.by_key[self.host.key] = value

    def clear(self) -> None:
        self.by_key.pop(self.host.key, None)

    def keys_with_values(self) -> Any:
        return self.by_key.keys()


class _Map:
    """A ``MapState`` of the current key."""

    def __init__(self, host: FakeHost) -> None:
        self.host = host
        self.by_key: collections.defaultdict[Any, dict[Any, Any]] = \
            collections.defaultdict(dict)

    def get(self, k: Any) -> Any:
        return self.by_key[self.host.key].get(k)

    def put(self, k: Any, v: Any) -> None:
        self.by_key[self.host.key][k] = v

    def remove(self, k: Any) -> None:
        self.by_key[self.host.key].pop(k, None)

    def contains(self, k: Any) -> bool:
        return k in self.by_key[self.host.key]

    def is_empty(self) -> bool:
        return not self.by_key[self.host.key]

    def clear(self) -> None:
        self.by_key.pop(self.host.key, None)

    def keys_with_values(self) -> Any:
        return [k for k, m in self.by_key.items() if m]


class _Timers:
    """The timer service: processing-time timers on a heap; event time is not simulated."""

    def __init__(self, host: FakeHost) -> None:
        self.host = host

    def register_processing_time_timer(self, t: int) -> None:
        heapq.heappush(self.host.timers, (t, self.host.key))

    def register_event_time_timer(self, t: int) -> None:
        pass

    def delete_processing_time_timer(self, t: int) -> None:
        pass

    def delete_event_time_timer(self, t: int) -> None:
        pass


class _Counter:
    """A PyFlink ``Counter``: ``inc``/``dec``/``get_count``."""

    def __init__(self, root: FakeMetricGroup) -> None:
        self.root, self.count = root, 0

    def inc(self, n: int = 1) -> None:
        self.root.calls += 1
        self.count += n

    def dec(self, n: int = 1) -> None:
        self.count -= n

    def get_count(self) -> int:
        return self.count


class _Meter:
    """A PyFlink ``Meter``: ``mark_event``/``get_count``."""

    def __init__(self, root: FakeMetricGroup) -> None:
        self.root, self.count = root, 0

    def mark_event(self, value: int = 1) -> None:
        self.root.calls += 1
        self.count += value

    def get_count(self) -> int:
        return self.count


class _Distribution:
    """A PyFlink ``Distribution`` as thread mode's: only the last value is kept."""

    def __init__(self, root: FakeMetricGroup) -> None:
        self.root, self.updates = root, 0
        self.last: Any = None

    def update(self, value: Any) -> None:
        self.root.calls += 1
        self.updates += 1
        self.last = value


# The mirror tells thread mode (a distribution keeps its last value only) by the module of
# PyFlink's distribution class: this one is pushed to as thread mode's is.
_Distribution.__module__ = "pyflink.fn_execution.metrics.embedded.fake"


class FakeMetricGroup:
    """A PyFlink ``MetricGroup`` (``add_group``, ``counter``, ``gauge``, ``meter``,
    ``distribution``) keeping its metrics in Python, so ``--metrics`` runs the push to Flink.

    Attributes:
        metrics: every metric registered, by its scope (group names, then the metric's).
        calls: how many metric updates were made (each a call into Java on Flink).
    """

    def __init__(self, scope: tuple[str, ...] = (), root: FakeMetricGroup | None = None) -> None:
        self.scope = scope
        self.root = root or self
        self.metrics: dict[tuple[str, ...], Any] = {}
        self.calls = 0

    def add_group(self, name: str, extra: str | None = None) -> FakeMetricGroup:
        return FakeMetricGroup((*self.scope, name) + ((extra,) if extra is not None else ()),
                               self.root)

    def _register(self, name: str, metric: Any) -> Any:
        self.root.metrics[(*self.scope, name)] = metric
        return metric

    def counter(self, name: str) -> Any:
        return self._register(name, _Counter(self.root))

    def gauge(self, name: str, obj: Any) -> None:
        self._register(name, obj)

    def meter(self, name: str, time_span_in_seconds: int = 60) -> Any:
        return self._register(name, _Meter(self.root))

    def distribution(self, name: str) -> Any:
        return self._register(name, _Distribution(self.root))

    def value(self, *scope: str) -> Any:
        """A registered metric's count (a distribution's number of updates)."""
        m = self.root.metrics[scope]
        return m.updates if isinstance(m, _Distribution) else m.count


def pushed_mismatches(op: Any, group: FakeMetricGroup) -> list[str]:
    """The scalar agent metrics whose value in ``group`` differs from the operator's own.

    Returns:
        ``name: pushed != counted`` lines (none after the operator's close pushed the last).
    """
    snapshot = op.observability.snapshot()
    from flink_agents_py.observability._flink_mirror import _GAUGES, _SCALAR_COUNTERS

    out = []
    for name in (*_SCALAR_COUNTERS, *_GAUGES):
        pushed = group.value("flink_agents", name)
        if pushed != snapshot[name]:
            out.append(f"{name}: pushed {pushed} != counted {snapshot[name]}")
    return out


class FakeHost:
    """Flink's side of an ``AgentOperator`` in thread mode: runtime context, context, timers.

    Attributes:
        key: the current key (what the backend's ``setCurrentKey`` switches).
        states: the keyed states by name.
        timers: pending processing-time timers, ``(time in ms, key)``, a heap.
    """

    def __init__(self) -> None:
        self.key: Any = None
        self.states: dict[str, Any] = {}
        self.timers: list[tuple[int, Any]] = []
        self.backend = _Backend(self)
        self._timer_service = _Timers(self)
        self._keyed_state_backend = type("KSB", (), {})()
        self._keyed_state_backend._keyed_state_backend = self.backend
        self._key_converter = type("Conv", (), {"to_internal": staticmethod(lambda x: x)})()
        self.metric_group = FakeMetricGroup()

    # the RuntimeContext
    def get_state(self, descriptor: Any) -> Any:
        return self.states.setdefault(descriptor.name, _Value(self))

    def get_map_state(self, descriptor: Any) -> Any:
        return self.states.setdefault(descriptor.name, _Map(self))

    def get_metrics_group(self) -> Any:
        return self.metric_group

    def get_index_of_this_subtask(self) -> int:
        return 0

    def get_attempt_number(self) -> int:
        return 0

    def get_number_of_parallel_subtasks(self) -> int:
        return 1

    # the Context
    def get_current_key(self) -> Any:
        return self.key

    def timer_service(self) -> Any:
        return self._timer_service

    def timestamp(self) -> None:
        return None


def _drive(op: Any, host: FakeHost, records: list[tuple[Any, Any]], wanted: int) -> list[Any]:
    """Feed ``records`` (key, value), firing timers as they fall due, until ``wanted`` outs."""
    outs: list[Any] = []

    def fire(block: bool) -> None:
        while True:
            now = time.time_ns() // 1_000_000
            if host.timers and host.timers[0][0] <= now:
                t, host.key = heapq.heappop(host.timers)
                outs.extend(op.on_timer(t, host))
                continue
            if not block or len(outs) >= wanted:
                return
            time.sleep(max(0.0, (host.timers[0][0] - now) / 1000) if host.timers else 0.001)

    for key, value in records:
        host.key = key
        outs.extend(op.process_element(value, host))
        fire(block=False)
    fire(block=True)
    return outs


def main(argv: list[str] | None = None) -> int:
    """Run the harness once and print its figures (see the module docstring).

    Returns:
        0, or 1 when not every record gave its output.
    """
    ap = argparse.ArgumentParser(prog="python -m bench._op_harness")
    ap.add_argument("--kind", choices=("chat", "echo"), default="chat")
    ap.add_argument("--records", type=int, default=3000)
    ap.add_argument("--keys", type=int, default=0, help="default: one record per key")
    ap.add_argument("--metrics", action="store_true", help="the agent metrics on")
    ap.add_argument("--profile", action="store_true", help="cProfile the callbacks")
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args(argv)

    from flink_agents_py.flink._operator import AgentOperator
    from flink_agents_py.plan import AgentPlan

    from ._agents import EchoAgent, SlowChatAgent

    agent = SlowChatAgent() if args.kind == "chat" else EchoAgent()
    plan = AgentPlan.from_json(AgentPlan.from_agent(agent).to_json())  # as on Flink
    op = AgentOperator(plan, max_in_flight=256, metrics=args.metrics)
    host = FakeHost()
    t0 = time.thread_time()
    op.open(host)
    open_ms = (time.thread_time() - t0) * 1000
    keys = args.keys or args.records
    records = [(f"k{i % keys}", {"key": f"k{i % keys}", "n": i, "t": 0.0})
               for i in range(args.records)]
    prof = cProfile.Profile() if args.profile else None
    w0, t0 = time.time(), time.thread_time()
    if prof is not None:
        prof.enable()
    try:
        outs = _drive(op, host, records, args.records)
    finally:
        if prof is not None:
            prof.disable()
        cpu = time.thread_time() - t0
        op.close()
    n = args.records
    metrics = "on" if args.metrics else "off"
    wrong = pushed_mismatches(op, host.metric_group) if args.metrics else []
    print(f"{args.kind}: {n:,} records over {keys:,} keys, metrics {metrics}:"
          f" {len(outs):,} outputs in {time.time() - w0:.2f} s; operator thread CPU"
          f" {cpu / n * 1e6:.1f} us per record, open() {open_ms:.1f} ms; {dict(op.stats)}"
          + (f"; {host.metric_group.calls:,} metric updates pushed" if args.metrics else ""))
    if prof is not None:
        stats = pstats.Stats(prof, stream=sys.stdout)
        calls = sum(v[1] for v in stats.stats.values())  # type: ignore[attr-defined]
        print(f"Python calls per record (profiled): {calls / n:.0f}")
        stats.sort_stats("tottime").print_stats(args.top)
    for line in wrong:
        print(f"Flink metric group: {line}")
    return 0 if len(outs) >= n and not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
