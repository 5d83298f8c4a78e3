"""The agent operator's calls into Java per chat, counted and timed in a real TaskManager.

    python -m bench._java_calls [--chats 10000] [--keys 1000] [--max-in-flight 256]
                                [--json FILE]

Runs ``bench._flink_job``'s chat job (thread mode, parallelism 1, unbounded, the 200 ms
model) with this module loaded in the TaskManager's interpreter: it is imported there when
the job's stamping map is unpickled (before the agent operator opens) and then wraps, in
PyFlink's thread-mode classes, every call the operator makes into Java: keyed state
(``value``, ``update``, ``clear``, the queue's map state), timer registrations and
deletions, ``get_current_key`` and the keyed state backend's key switches (wrapped where
``KeySwitching`` takes the backend). Each wrapped call is counted and timed with the
calling thread's CPU clock, the wrapper's own two clock reads subtracted; so are the
operator's callbacks (``process_element``, ``on_timer``: PyFlink's operation, our Python and
its calls into Java, without what Flink does around them). The figures go to a JSON file
named by ``BENCH_JAVA_CALLS_OUT`` and are printed per chat, with:

- the operator thread's CPU per chat over the same job (``bench._threads``, ``cpu_op``):
  the difference to the callbacks' CPU is Flink's record handling outside Python (input and
  output records, timers firing, pemja's entry into Python, the chained stamping map's
  Python);
- a micro-benchmark taken inside the first ``process_element`` (thread CPU per call, 2,000
  calls each in a loop, on one key): what one call costs when nothing else runs between
  calls (warm caches), against the in-flow figure above.

With ``BENCH_JAVA_CALLS_LAYERS`` set, the table also has the layers inside the callbacks
(``layer.*``): the agent operator's callbacks and the core's entry points, so that a
callback splits into PyFlink's share (callback less operator), the host layer's (operator
less core) and the core's; the same wrappers time the operator driven by
``bench._op_harness`` (``time_layers``). The dump also names what could make the same
Python slower in the TaskManager's thread (``interpreter``: tracing, tracemalloc, flags, the
collector's settings, the threads).

Debug only: the wrappers cost the operator thread about a microsecond per call, so the
operator figure of such a run is above the plain job's.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["FAST_INPUT", "Counted", "install", "main", "time_layers"]

OUT_ENV = "BENCH_JAVA_CALLS_OUT"
"""The environment variable naming the JSON file the TaskManager writes the figures to."""

PROFILE_ENV = "BENCH_JAVA_CALLS_PROFILE"
"""When set, a file the TaskManager writes a ``cProfile`` of the operator's callbacks to
(``pstats`` format; the profiler costs the callbacks about 2x, so only the shares mean much)."""

LAYERS_ENV = "BENCH_JAVA_CALLS_LAYERS"
"""When set, also time the layers inside the callbacks (``time_layers``): the agent
operator's callbacks (our host layer, the core and the calls into Java within them) and the
core's entry points (``AgentCore.on_input``, ``advance``: the core and the keyed state calls
it makes), so that PyFlink's share of a callback is the callback less the operator's."""

OUTPUTS_ENV = "BENCH_JAVA_CALLS_OUTPUTS"
"""How many outputs the job makes: the figures are written at the last (and every 500
callbacks before)."""

_COUNTS: collections.Counter[str] = collections.Counter()
_CPU_NS: collections.Counter[str] = collections.Counter()
_SEEN: dict[str, Any] = {}  # the operator, a context, from the first wrapped calls
_clock = time.thread_time_ns
_CLOCK_NS = 0  # what two reads of the clock cost (subtracted from each call)
_DUMP_EVERY = 500  # callbacks
_STAMP = "bench.stamping map (chained, in the callbacks)"
FAST_INPUT = "pyflink.input record conversion (_fast_input)"
"""The agent operator's input converter's label (PyFlink's ``Row`` converter's otherwise)."""
_ITEMS = "callback items (returns to Java)"
_NOT_JAVA = ("callback.", "pyflink.", "bench.", "layer.")  # the labels of no Java call


def _timed(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        t0 = _clock()
        try:
            return fn(*args, **kwargs)
        finally:
            _CPU_NS[label] += _clock() - t0 - _CLOCK_NS
            _COUNTS[label] += 1

    return call


class _Backend:
    """The keyed state backend (a Java object), its calls counted."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._backend, name)
        return _timed(f"backend.{name}", target) if callable(target) else target


def _wrap_method(cls: type, name: str, label: str) -> None:
    original = getattr(cls, name)

    def method(self: Any, *args: Any) -> Any:
        t0 = _clock()
        try:
            return original(self, *args)
        finally:
            _CPU_NS[label] += _clock() - t0 - _CLOCK_NS
            _COUNTS[label] += 1

    setattr(cls, name, method)


def _wrap_callback(cls: type, name: str) -> None:
    original = getattr(cls, name)

    def callback(self: Any, *args: Any) -> Iterator[Any]:
        if getattr(self._main_operation, "_on_timer_func", None) is None:
            yield from original(self, *args)  # not a keyed process function (a map)
            return
        _COUNTS[f"callback.{name}"] += 1
        _SEEN["thread"] = threading.get_ident()  # the operator's (``_wrap_convert``)
        if "interpreter" not in _SEEN:
            _SEEN["interpreter"] = _interpreter()
        prof = _SEEN.get("profile")
        t0, spent = _clock(), 0
        try:
            if prof is not None:
                prof.enable()
            for item in original(self, *args):
                spent += _clock() - t0
                if prof is not None:
                    prof.disable()
                _COUNTS[_ITEMS] += 1
                yield item
                if prof is not None:
                    prof.enable()
                t0 = _clock()
        finally:
            if prof is not None:
                prof.disable()
            spent += _clock() - t0
            _CPU_NS[f"callback.{name}"] += spent
        if "micro" not in _SEEN and name == "process_element" and "ctx" in _SEEN:
            counts, cpu = _COUNTS.copy(), _CPU_NS.copy()  # the micro-benchmark's calls
            _SEEN["micro"] = _micro()  # are left out of the counts
            _COUNTS.clear(), _CPU_NS.clear()
            _COUNTS.update(counts), _CPU_NS.update(cpu)
        done = _COUNTS["callback.process_element"] + _COUNTS["callback.on_timer"]
        if done % _DUMP_EVERY == 0:
            _dump()

    setattr(cls, name, callback)


def _interpreter() -> dict[str, Any]:
    """What could make the same Python slower in this thread: tracing, allocation tracking,
    the collector's and the GIL's settings, the other threads running Python."""
    import gc
    import sysconfig
    import tracemalloc

    return {
        "trace": repr(sys.gettrace()),
        "profile": repr(sys.getprofile()),
        "tracemalloc": tracemalloc.is_tracing(),
        "flags": repr(sys.flags),
        "gc_threshold": gc.get_threshold(),
        "gc_frozen": gc.get_freeze_count(),
        "switch_interval": sys.getswitchinterval(),
        "threads": [t.name for t in threading.enumerate()],
        "executable": sys.executable,
        "shared": sysconfig.get_config_var("Py_ENABLE_SHARED"),
        "version": sys.version,
    }


def _wrap_convert(cls: type, name: str, label: str) -> None:
    """Time PyFlink's converter ``cls.name`` when the agent operator's thread calls it.

    The upstream tasks' converters run on threads of their own (their calls are not
    counted); the agent operator's thread converts its input row and its outputs.
    """
    original = getattr(cls, name)

    def method(self: Any, value: Any) -> Any:
        if threading.get_ident() != _SEEN.get("thread"):
            return original(self, value)
        t0 = _clock()
        try:
            return original(self, value)
        finally:
            _CPU_NS[label] += _clock() - t0 - _CLOCK_NS
            _COUNTS[label] += 1

    setattr(cls, name, method)


def _state_label(state: Any) -> str:
    op = _SEEN.get("operator")
    if op is not None:
        for label in ("run", "memory", "queue", "tail"):
            if getattr(op, f"_{label}_state", None) is state:
                return label
    return "other"


def _wrap_state_method(cls: type, name: str) -> None:
    original = getattr(cls, name)

    def method(self: Any, *args: Any) -> Any:
        t0 = _clock()
        try:
            return original(self, *args)
        finally:
            spent = _clock() - t0 - _CLOCK_NS
            label = f"{_state_label(self)}.{name}"
            _CPU_NS[label] += spent
            _COUNTS[label] += 1

    setattr(cls, name, method)


def install() -> None:
    """Wrap PyFlink's thread-mode state, timer and context classes, and the key backend."""
    global _CLOCK_NS
    if _SEEN.get("installed"):
        return
    _SEEN["installed"] = True
    if os.environ.get(PROFILE_ENV):
        import cProfile

        _SEEN["profile"] = cProfile.Profile()
    t0 = _clock()
    for _ in range(1000):
        _clock()
    _CLOCK_NS = (_clock() - t0) // 1000 * 2
    from pyflink.fn_execution.datastream.embedded import process_function, state_impl
    from pyflink.fn_execution.datastream.embedded.timerservice_impl import TimerServiceImpl
    from pyflink.fn_execution.embedded import converters, operations

    from flink_agents_py.flink import _fast_input, _switching

    for name in ("value", "update"):
        _wrap_state_method(state_impl.ValueStateImpl, name)
    _wrap_state_method(state_impl.StateImpl, "clear")
    for name in ("get", "put", "remove", "contains"):
        _wrap_state_method(state_impl.MapStateImpl, name)
    for name in (
        "register_processing_time_timer",
        "register_event_time_timer",
        "delete_processing_time_timer",
        "delete_event_time_timer",
    ):
        _wrap_method(TimerServiceImpl, name, f"timers.{name}")
    for cls in (
        process_function.InternalKeyedProcessFunctionContext,
        process_function.InternalKeyedProcessFunctionOnTimerContext,
    ):
        original = cls.get_current_key

        def get_current_key(self: Any, _original: Any = original) -> Any:
            _SEEN.setdefault("ctx", self)
            return _original(self)

        cls.get_current_key = get_current_key
        _wrap_method(cls, "get_current_key", "ctx.get_current_key")
    _wrap_convert(converters.RowDataConverter, "to_internal", "pyflink.input row conversion")
    _wrap_convert(_fast_input.RecordOfKeyedRow, "to_internal", FAST_INPUT)
    _wrap_convert(
        converters.PickleDataConverter,
        "to_external",
        "pyflink.output pickling (the stamping map's)",
    )
    _wrap_callback(operations.OneInputFunctionOperation, "process_element")
    _wrap_callback(operations.FunctionOperation, "on_timer")
    init = _switching.KeySwitching.__init__

    def switching_init(self: Any, op: Any, backend: Any) -> None:
        _SEEN["operator"] = op
        init(self, op, _Backend(backend))

    _switching.KeySwitching.__init__ = switching_init  # type: ignore[method-assign]
    if os.environ.get(LAYERS_ENV):
        time_layers()


def _timed_generator(cls: type, name: str, label: str) -> None:
    """Time the generator ``cls.name`` returns while it runs (not while its caller has an item)."""
    original = getattr(cls, name)

    def method(self: Any, *args: Any) -> Iterator[Any]:
        _COUNTS[label] += 1
        it = original(self, *args)
        while True:
            t0 = _clock()
            try:
                item = next(it)
            except StopIteration:
                _CPU_NS[label] += _clock() - t0 - _CLOCK_NS
                return
            _CPU_NS[label] += _clock() - t0 - _CLOCK_NS
            yield item

    setattr(cls, name, method)


_DEPTH = [0]  # the core's entry points running on this stack (the outermost is timed)


def _timed_outermost(cls: type, name: str, label: str) -> None:
    original = getattr(cls, name)

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _DEPTH[0]:
            return original(self, *args, **kwargs)
        _DEPTH[0] += 1
        t0 = _clock()
        try:
            return original(self, *args, **kwargs)
        finally:
            _CPU_NS[label] += _clock() - t0 - _CLOCK_NS
            _COUNTS[label] += 1
            _DEPTH[0] -= 1

    setattr(cls, name, method)


def time_layers() -> None:
    """Time the agent operator's callbacks and the core's entry points (``LAYERS_ENV``).

    Called in the TaskManager by ``install`` and, for the same figures without Flink, by
    whoever drives the operator in a plain interpreter (``bench._op_harness``).
    """
    from flink_agents_py.flink._operator import AgentOperator
    from flink_agents_py.runtime.core._core import AgentCore

    if _SEEN.get("layers"):
        return
    _SEEN["layers"] = True
    for name in ("process_element", "on_timer"):
        _timed_generator(AgentOperator, name, f"layer.operator.{name}")
    for name in ("on_input", "advance"):
        _timed_outermost(AgentCore, name, f"layer.core.{name}")


def _micro(n: int = 2000) -> dict[str, float]:
    """Thread CPU per call, ``n`` calls in a loop each, on the current key (left as found)."""
    op, ctx = _SEEN.get("operator"), _SEEN["ctx"]
    if op is None:
        return {}
    out: dict[str, float] = {}
    clock = time.thread_time_ns

    def each(label: str, fn: Callable[[], Any]) -> None:
        t0 = clock()
        for _ in range(n):
            fn()
        out[label] = (clock() - t0) / n / 1000

    run, tail, timers = op._run_state, op._tail_state, ctx.timer_service()
    saved_run, saved_tail = run._state.value(), tail._state.value()
    text = "x" * 760  # about a chat's run text
    far = 2**62
    each("a Python call (for scale)", lambda: None)
    each("tail value", tail.value)
    each("tail update", lambda: tail.update(7))
    each("run update (760 chars)", lambda: run.update(text))
    each("run value (760 chars)", run.value)
    each("run clear", run.clear)
    each("run value (none)", run.value)
    each("timer register (the same one)", lambda: timers.register_processing_time_timer(far))
    each("timer delete", lambda: timers.delete_processing_time_timer(far))
    each("get_current_key", ctx.get_current_key)
    switch = op._switch
    if switch is not None:
        backend = switch.backend._backend
        jkey = backend.getCurrentKey()
        each("backend getCurrentKey", backend.getCurrentKey)
        each("backend setCurrentKey (the same key)", lambda: backend.setCurrentKey(jkey))
    run._state.update(saved_run) if saved_run is not None else run._state.clear()
    tail._state.update(saved_tail) if saved_tail is not None else tail._state.clear()
    return out


def _dump() -> None:
    path = os.environ.get(OUT_ENV)
    if not path:
        return
    op = _SEEN.get("operator")
    data = {
        "counts": dict(_COUNTS),
        "cpu_ns": dict(_CPU_NS),
        "clock_ns": _CLOCK_NS,
        "stats": dict(op.stats) if op is not None else {},
        "micro": _SEEN.get("micro"),
        "interpreter": _SEEN.get("interpreter"),
    }
    tmp = path + ".tmp"
    Path(tmp).write_text(json.dumps(data))
    os.replace(tmp, path)
    prof, where = _SEEN.get("profile"), os.environ.get(PROFILE_ENV)
    if prof is not None and where:
        prof.dump_stats(where)


class Counted:
    """A map function that stands for ``fn``; unpickling it in a worker installs the wrappers.

    Args:
        fn: the function to call.
    """

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __call__(self, value: Any) -> Any:
        t0 = _clock()
        out = self.fn(value)
        _CPU_NS[_STAMP] += _clock() - t0 - _CLOCK_NS
        _COUNTS[_STAMP] += 1
        _COUNTS["outputs"] += 1
        if str(_COUNTS["outputs"]) == os.environ.get(OUTPUTS_ENV):  # the job's last output
            _dump()
        return out

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if os.environ.get(OUT_ENV):
            install()


def _table(data: dict[str, Any], job: dict[str, Any]) -> str:
    counts, cpu = data["counts"], data["cpu_ns"]
    chats = counts.get("callback.process_element", 0)
    if not chats:
        return "no callbacks counted"
    lines = [
        f"{chats:,} chats (process_element callbacks); operator stats {data['stats']}",
        f"{'call':44s} {'per chat':>9s} {'us each':>8s} {'us/chat':>8s}",
    ]
    java = other = 0.0
    for label in sorted(counts, key=lambda k: -cpu.get(k, 0)):
        n = counts[label]
        if label in ("outputs", _ITEMS):
            continue
        us = cpu.get(label, 0) / 1000
        if not label.startswith(_NOT_JAVA):
            java += us / chats
        elif not label.startswith(("callback.", "layer.")):  # (layers: inside the callbacks)
            other += us / chats
        lines.append(f"{label:44s} {n / chats:9.3f} {us / n:8.2f} {us / chats:8.1f}")
    lines.append(f"{_ITEMS:44s} {counts.get(_ITEMS, 0) / chats:9.3f}")
    op = (job.get("cpu_op") or {}).get("thread_us_per_out")
    lines.append(f"{'calls into Java, together':44s} {'':9s} {'':8s} {java:8.1f}")
    callbacks = sum(cpu.get(k, 0) for k in cpu if k.startswith("callback.")) / 1000 / chats
    lines.append(
        f"{'callbacks less Java, conversions, stamping':44s} {'':9s} {'':8s} "
        f"{callbacks - java - other:8.1f}"
    )
    if op:
        lines.append(f"{'operator thread (bench._threads, cpu_op)':44s} {'':9s} {'':8s} {op:8.1f}")
    lines.append(
        f"(each timed call includes a wrapper; {data['clock_ns']} ns of clock reads "
        "subtracted per call)"
    )
    for label, us in (data.get("micro") or {}).items():
        lines.append(f"micro, one call: {label:40s} {us:6.2f} us")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the chat job with the wrappers and print the table (see the module docstring).

    Returns:
        0, or 1 when the job failed or wrote no figures.
    """
    ap = argparse.ArgumentParser(prog="python -m bench._java_calls")
    ap.add_argument("--chats", type=int, default=10_000)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--max-in-flight", type=int, default=256)
    ap.add_argument("--json", help="also write the figures (and the job's) to this file")
    args = ap.parse_args(argv)
    from .__main__ import run_flink_job

    with tempfile.TemporaryDirectory(prefix="bench-java-calls-") as tmp:
        out = Path(tmp) / "calls.json"
        os.environ[OUT_ENV], os.environ[OUTPUTS_ENV] = str(out), str(args.chats)
        try:
            job = run_flink_job(
                {
                    "kind": "chat",
                    "mode": "thread",
                    "parallelism": 1,
                    "records": args.chats,
                    "keys": args.keys,
                    "max_in_flight": args.max_in_flight,
                    "unbounded": True,
                    "java_calls": True,
                }
            )
        finally:
            del os.environ[OUT_ENV], os.environ[OUTPUTS_ENV]
        if "error" in job or not out.exists():
            print(f"job failed: {job.get('error', 'no figures written')[-2000:]}")
            return 1
        data = json.loads(out.read_text())
        print(_table(data, job))
        if args.json:
            Path(args.json).write_text(json.dumps({**data, "job": job}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
