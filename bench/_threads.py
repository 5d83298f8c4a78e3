"""CPU time per thread of a running process, sampled from ``/proc/<pid>/task/*/stat``.

Used inside a Flink benchmark job (``bench._flink_job``) to measure the CPU of the operator
thread: in thread mode the Python function runs in the task thread of the JVM, so the
busiest JVM thread over the measured window is the keyed operator's (its chained stamping map
included, the same for ours and the bare function). Linux only; elsewhere the figures are
``None``.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["ThreadSampler", "child_java_pid"]


def child_java_pid(parent: int | None = None) -> int | None:
    """The pid of a ``java`` process descending from ``parent`` (default: this process)."""
    root = os.getpid() if parent is None else parent
    parents: dict[int, tuple[int, str]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1: stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        parents[int(d.name)] = (ppid, comm)
    for pid, (_, comm) in parents.items():
        if comm != "java":
            continue
        p = pid
        for _ in range(16):
            p = parents.get(p, (1, ""))[0]
            if p == root:
                return pid
            if p <= 1:
                break
    return None


def _threads(pid: int) -> dict[int, tuple[str, int]]:
    """tid -> (thread name, utime + stime in clock ticks)."""
    out: dict[int, tuple[str, int]] = {}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for t in tasks:
        try:
            stat = (t / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1: stat.rindex(")")]
        rest = stat[stat.rindex(")") + 2:].split()
        out[int(t.name)] = (name, int(rest[11]) + int(rest[12]))
    return out


class ThreadSampler:
    """Samples every thread's CPU time of ``pid`` every ``interval_s`` in a daemon thread.

    Args:
        pid: the process to watch (the JVM running the job).
        interval_s: seconds between samples.
    """

    def __init__(self, pid: int, interval_s: float = 0.25) -> None:
        self.pid = pid
        self.interval_s = interval_s
        self.hz = os.sysconf("SC_CLK_TCK")
        self.samples: list[tuple[float, dict[int, tuple[str, int]]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-thread-sampler",
                                        daemon=True)

    def start(self) -> ThreadSampler:
        """Start sampling; returns ``self``."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Take a last sample and stop."""
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        # stamped after the read: a sample stamped at or before an output was read while the
        # thread that stamped the output was still alive (a thread that exits leaves /proc)
        threads = _threads(self.pid)
        self.samples.append((time.time(), threads))

    def _loop(self) -> None:
        while True:
            self._sample()
            if self._stop.wait(self.interval_s):
                self._sample()
                return

    def window(self, t_from: float, t_to: float, t_outs: list[float]) -> dict[str, Any]:
        """CPU of the busiest thread (and of the whole process) between the first sample at or
        after ``t_from`` and the last one at or before ``t_to``, per output stamped in that
        interval (``t_outs``: wall-clock stamps, sorted).

        Returns:
            ``busiest_thread`` (its name), ``busiest_tid``, ``thread_cpu_s``,
            ``thread_cores`` (its CPU / interval),
            ``outputs`` (in the interval), ``thread_us_per_out``, ``process_us_per_out``,
            ``interval_s``; ``{}`` with fewer than two samples in the window.
        """
        inside = [s for s in self.samples if t_from <= s[0] <= t_to]
        if len(inside) < 2:
            return {}
        (ta, a), (tb, b) = inside[0], inside[-1]
        lo = bisect.bisect_right(t_outs, ta)
        hi = bisect.bisect_right(t_outs, tb)
        outs = hi - lo
        # a thread born after the first sample spent all its CPU inside the window
        deltas = {tid: (name, ticks - (a[tid][1] if tid in a else 0))
                  for tid, (name, ticks) in b.items()}
        if not deltas or outs <= 0:
            return {}
        tid, (name, ticks) = max(deltas.items(), key=lambda kv: kv[1][1])
        total = sum(d for _, d in deltas.values())
        cpu = ticks / self.hz
        return {
            "busiest_thread": name, "busiest_tid": tid, "thread_cpu_s": cpu,
            "thread_cores": cpu / (tb - ta),
            "outputs": outs, "interval_s": tb - ta,
            "thread_us_per_out": cpu / outs * 1e6,
            "process_us_per_out": total / self.hz / outs * 1e6,
        }

