"""Tables (plain text and markdown), machine information, and ``LATEST.md``."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["Table", "machine_info", "other_java_processes", "write_latest_md", "CpuWatch"]


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if v != v:  # nan
            return "nan"
        a = abs(v)
        if a >= 1000:
            return f"{v:,.0f}"
        if a >= 100:
            return f"{v:.0f}"
        if a >= 10:
            return f"{v:.1f}"
        if a >= 1:
            return f"{v:.2f}"
        return f"{v:.3f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


class Table:
    """Rows of a benchmark: ``columns`` are ``(row_key, header)`` pairs."""

    def __init__(self, title: str, columns: Sequence[tuple[str, str]], rows: list[dict[str, Any]],
                 note: str = "") -> None:
        self.title = title
        self.columns = list(columns)
        self.rows = rows
        self.note = note

    def _cells(self) -> list[list[str]]:
        return [[_fmt(r.get(k)) for k, _ in self.columns] for r in self.rows]

    def text(self) -> str:
        heads = [h for _, h in self.columns]
        cells = self._cells()
        widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h)
                  for i, h in enumerate(heads)]
        line = "  ".join(h.rjust(w) for h, w in zip(heads, widths, strict=True))
        out = [self.title, "=" * len(self.title), line, "-" * len(line)]
        out += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
        if self.note:
            out.append("")
            out += [f"note: {self.note}"]
        return "\n".join(out)

    def markdown(self) -> str:
        heads = [h for _, h in self.columns]
        out = [f"### {self.title}", "", "| " + " | ".join(heads) + " |",
               "|" + "|".join("---:" for _ in heads) + "|"]
        out += ["| " + " | ".join(row) + " |" for row in self._cells()]
        if self.note:
            out += ["", f"_Note: {self.note}_"]
        return "\n".join(out)


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown"
    m = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    return m.group(1).strip() if m else "unknown"


def _nproc() -> int:
    try:
        return int(subprocess.run(["nproc"], capture_output=True, text=True, check=True).stdout)
    except Exception:  # noqa: BLE001
        return os.cpu_count() or 0


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _git(root: Path) -> dict[str, Any]:
    def run(*args: str) -> str | None:
        try:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                                  check=True, timeout=10).stdout.strip()
        except Exception:  # noqa: BLE001
            return None

    if os.environ.get("BENCH_GIT_COMMIT"):  # measuring an export of a commit (no .git)
        return {"commit": os.environ["BENCH_GIT_COMMIT"], "library_dirty": False}
    dirty = run("status", "--porcelain", "--", "flink_agents_py")
    return {"commit": run("rev-parse", "--short", "HEAD"),
            "library_dirty": None if dirty is None else bool(dirty)}


def machine_info(root: Path) -> dict[str, Any]:
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "nproc": _nproc(),
        "cpu_model": _cpu_model(),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "apache_flink": _version("apache-flink"),
        "flink_agents_py": _version("flink-agents-py"),
        "platform": platform.platform(),
        "git": _git(root),
        "loadavg_start": list(os.getloadavg()),
    }


def _processes() -> dict[int, tuple[int, str, str, int]]:
    """pid -> (ppid, comm, state, utime + stime in clock ticks) of every process now."""
    procs: dict[int, tuple[int, str, str, int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1: stat.rindex(")")]
        rest = stat[stat.rindex(")") + 2:].split()
        procs[int(d.name)] = (int(rest[1]), comm, rest[0], int(rest[11]) + int(rest[12]))
    return procs


def _descends(procs: dict[int, tuple[int, str, str, int]], pid: int, root: int) -> bool:
    for _ in range(64):
        if pid == root:
            return True
        if pid <= 1 or pid not in procs:
            return False
        pid = procs[pid][0]
    return False


def _busy_ticks() -> int:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return user + nice + system + irq + softirq + steal


class CpuWatch:
    """Samples, while a job runs, the CPU used by everything but the job's process tree.

    ``other_cores`` = (machine busy time - the job tree's CPU time - this process's) / wall:
    how many cores other work (another engineer's Flink tests) took while we measured.
    ``other_java_frac``: share of samples in which a JVM outside the job tree was running.
    """

    def __init__(self) -> None:
        self._hz = os.sysconf("SC_CLK_TCK")
        self._mine: dict[int, int] = {}
        self._java: list[bool] = []
        self._busy0 = _busy_ticks()
        self._self0 = sum(os.times()[:2])
        self._t0 = time.monotonic()

    def sample(self, root: int) -> None:
        procs = _processes()
        other_java = False
        for pid, (_, comm, state, cpu) in procs.items():
            if _descends(procs, pid, root):
                self._mine[pid] = max(cpu, self._mine.get(pid, 0))
            elif comm == "java" and state != "Z":
                other_java = True
        self._java.append(other_java)

    def result(self) -> dict[str, float]:
        wall = time.monotonic() - self._t0
        busy = (_busy_ticks() - self._busy0) / self._hz
        mine = sum(self._mine.values()) / self._hz + (sum(os.times()[:2]) - self._self0)
        return {
            "other_cores": max(0.0, (busy - mine) / wall) if wall > 0 else 0.0,
            "job_cores": mine / wall if wall > 0 else 0.0,
            "other_java_frac": sum(self._java) / len(self._java) if self._java else 0.0,
        }


def other_java_processes() -> int:
    """How many live ``java`` processes run now (another Flink job adds noise)."""
    return sum(1 for _, comm, state, _ in _processes().values() if comm == "java" and state != "Z")


_SECTION = re.compile(r"<!-- bench:(\w+) -->\n.*?<!-- /bench:\1 -->\n", re.S)


def write_latest_md(path: Path, meta: dict[str, Any], sections: dict[str, str],
                    command: str) -> None:
    """Write ``path``: a machine header, then one section per benchmark.

    Sections of benchmarks not run this time (``--only``) are kept from the existing file.
    """
    kept: dict[str, str] = {}
    if path.exists():
        for m in _SECTION.finditer(path.read_text()):
            kept[m.group(1)] = m.group(0)
    for name, body in sections.items():
        kept[name] = (f"<!-- bench:{name} -->\n{body.rstrip()}\n\n"
                      f"_Measured {meta['date']} with `{command}`._\n<!-- /bench:{name} -->\n")
    git = meta.get("git") or {}
    header = [
        "# Latest quick benchmark figures",
        "",
        "Written by `python -m bench --quick` (full figures go to the git-ignored "
        "`bench/results*.json`). Each figure is the best of a few runs (P1: 3, P2: 2, P3: 1) "
        "on a shared 2-core machine where other Flink jobs may run: expect 10-30% noise "
        "between runs, more for the Flink figures (see the load / other JVM columns).",
        "",
        "| | |",
        "|---|---|",
        f"| date (last write) | {meta['date']} |",
        f"| nproc | {meta['nproc']} |",
        f"| CPU | {meta['cpu_model']} |",
        f"| python | {meta['python']} |",
        f"| apache-flink | {meta['apache_flink']} |",
        f"| flink-agents-py commit | {git.get('commit')}"
        f"{' (library modified in the working tree)' if git.get('library_dirty') else ''} |",
        f"| load average at start | {', '.join(f'{x:.2f}' for x in meta['loadavg_start'])} |",
        "",
    ]
    order = ["p1", "p2", "p3"]
    body = [kept[k] for k in order if k in kept] + [v for k, v in sorted(kept.items())
                                                    if k not in order]
    path.write_text("\n".join(header) + "\n" + "\n".join(body))


def standalone_main(prog: str, bench: Callable[[dict[str, Any]], tuple[dict[str, Any], Table]],
                    config: Callable[[bool], dict[str, Any]], doc: str,
                    argv: list[str] | None = None) -> int:
    """Command line of one benchmark run on its own (``python -m bench._pN``).

    Prints the table; ``--out PATH`` also writes the rows as JSON. Returns 0 when every row
    says ``ok``, else 1.
    """
    ap = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default="", help="also write the rows as JSON here")
    args = ap.parse_args(argv)
    data, table = bench(config(args.quick))
    print(table.text())
    if args.out:
        Path(args.out).write_text(json.dumps(data, indent=2, default=str))
    return 0 if all(r["ok"] for r in data["rows"]) else 1
