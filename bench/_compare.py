"""Before/after rows of the operator-cost issue, measured side by side in one run.

    python -m bench._compare --before DIR [--before-label TEXT] [--after DIR] [--repeats 2] [--full]
                             [--only echo,local,chat]
                             [--out bench/results-compare.json] [--latest-md bench/LATEST.md]

``DIR`` is a source tree of another version (e.g. ``git archive <commit> | tar -x -C DIR``);
this tree's ``bench`` files are copied into it, so both versions run the same jobs. Each
Flink job runs in a subprocess of its own with ``PYTHONPATH`` at one tree, alternating
before / after, so both see the same machine load; best of ``--repeats`` (throughput) and
least CPU per record (operator thread). Rows (targets from the issue):

- echo on a MiniCluster (thread mode, 50,000 records over 100 keys): operator-thread CPU per
  record (target <= 50 us, <= 4x bare; issue 31: <= 2x bare), rec/s over the bare
  KeyedProcessFunction's (>= 0.6); metrics off (difference < 5 %);
- the local runner's echo (10,000 records) over Flink Agents 0.3.1's local runner with its
  logging off (>= 1.0), when its reference venv exists (``bench._flink_agents_ref``);
- the 200 ms model at 256 calls in flight over 1,000 keys, bounded and unbounded: % of the
  ideal wave rate (>= 90 %) and operator CPU per call (issue 31: <= 200 us at 1,000 keys);
  and the steady state, ten chats per key (10,000 chats, unbounded): its ~10 s window gives
  the operator CPU per call within ~2 % from run to run, where one chat per key (a window of
  about 1 s, sampled every 0.25 s) ranged 280-650 us for the same code on an idle machine;
  ``--full`` adds 10,000 waiting keys. Each chat shape also runs the floor, a hand-written
  function doing the least a durable chat must (``bench._bare.BareChat``), once a repeat.
  The rate is also given from the keyed operator's first input (``rps_op`` of
  ``bench._flink_job``): with 1,000 keys the ideal window is 0.8 s, and the source's tasks
  start emitting 0.3-1.4 s before the keyed operator has opened on this machine.
  The operator CPU per call is also given from the keyed operator's first input (its
  ``open()``, where the job's modules are imported, is otherwise in the window at 1,000
  keys), with CPython's cyclic GC time per call in the TaskManager's interpreter (all
  threads, from a ``gc.callbacks`` hook in the job's chained map).
  Each of these jobs runs ``--repeats`` times too, alternating.

``--only`` runs some groups of rows: ``echo`` (the MiniCluster echo rows), ``local``,
``chat`` (the 200 ms model rows).

Nothing is asserted: figures are printed, written to ``--out`` and to a ``p16`` section of
``--latest-md`` (``''`` to skip; by default only when every group ran).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .__main__ import BENCH_DIR, ROOT, log, run_flink_job, scaled
from ._report import Table, machine_info, write_latest_md

LATENCY_S = 0.2


def _local_echo(n: int, repeats: int) -> None:
    """In a tree's subprocess: print the best local-runner echo rate as JSON."""
    from ._local import echo_records, time_agent_echo

    records = echo_records(n, 100)
    time_agent_echo(records[:500])
    best = min(time_agent_echo(records) for _ in range(repeats))
    print("LOCAL " + json.dumps({"rps": n / best}), flush=True)


def _local_in(root: Path, n: int, repeats: int) -> float | None:
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run([sys.executable, "-m", "bench._compare", "--local-echo", str(n),
                           "--repeats", str(repeats)], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    for line in proc.stdout.splitlines():
        if line.startswith("LOCAL "):
            return float(json.loads(line[6:])["rps"])
    log(f"local echo in {root} failed: {proc.stderr[-500:]}")
    return None


def _job(spec: dict[str, Any], root: Path, label: str) -> dict[str, Any]:
    log(f"{label}: {spec['kind']} keys={spec['keys']} n={spec['records']}"
        f"{' unbounded' if spec.get('unbounded') else ''}"
        f"{' metrics off' if spec.get('metrics') is False else ''} ...")
    res = run_flink_job(spec, timeout_s=float(os.environ.get("BENCH_COMPARE_TIMEOUT_S", "420")),
                        root=root)
    if "error" in res:
        log(f"  FAILED: {res['error'][-300:]}")
    else:
        cpu = (res.get("cpu") or {}).get("thread_us_per_out")
        gc_us = res.get("gc_us_per_out")
        log(f"  {res['rps']:,.0f} /s, operator {cpu or float('nan'):.0f} us/out, "
            f"others {res.get('other_cores', 0):.2f} cores"
            + (f", GC {gc_us:.0f} us/out ({res.get('gc_collections')} collections)"
               if gc_us and not math.isnan(gc_us) else ""))
    return res


def _best_rps(runs: list[dict[str, Any]], n: int, field: str = "rps",
              pick: Any = max) -> float | None:
    ok = [r[field] for r in runs
          if "error" not in r and r.get("count") == n and not math.isnan(r.get(field, math.nan))]
    return pick(ok) if ok else None


def _least_cpu(runs: list[dict[str, Any]], field: str = "cpu", pick: Any = min) -> float | None:
    got = [(r.get(field) or {}).get("thread_us_per_out") for r in runs if "error" not in r]
    vals = [g for g in got if g]
    return pick(vals) if vals else None


def _least(runs: list[dict[str, Any]], field: str) -> float | None:
    vals = [r[field] for r in runs if "error" not in r and r.get(field)
            and not math.isnan(r[field])]
    return min(vals) if vals else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


GROUPS = ("echo", "local", "chat")


def compare(before: Path, after: Path, repeats: int, full: bool,
            only: tuple[str, ...] = GROUPS) -> dict[str, Any]:
    """Run the rows of the groups ``only`` on both trees, interleaved.

    Returns:
        The rows and the raw runs.
    """
    trees = {"before": before, "after": after}
    n, keys = scaled(50_000), 100
    echo = {"kind": "echo", "mode": "thread", "parallelism": 1, "records": n, "keys": keys,
            "max_in_flight": 32}
    runs: dict[str, list[dict[str, Any]]] = {}

    def add(name: str, res: dict[str, Any]) -> None:
        runs.setdefault(name, []).append(res)

    for _ in range(repeats if "echo" in only else 0):
        add("bare", _job({**echo, "kind": "bare"}, after, "bare"))
        for label, root in trees.items():
            add(f"echo_{label}", _job(echo, root, label))
            add(f"off_{label}", _job({**echo, "metrics": False}, root, label))
    # (chats, keys, max_in_flight, unbounded): one chat per key, and the steady state of ten
    # chats per key, whose ~10 s window the /proc samples (every 0.25 s) resolve to ~2 %
    chats = [(scaled(1000), scaled(1000), 256, False), (scaled(1000), scaled(1000), 256, True),
             (scaled(10_000), scaled(1000), 256, True)]
    chats += [(scaled(10_000), scaled(10_000), 256, True)] if full else []
    chats = chats if "chat" in only else []
    for _ in range(repeats):
        for ck, keys, limit, unbounded in chats:
            spec = {"kind": "chat", "mode": "thread", "parallelism": 1, "records": ck,
                    "keys": keys, "max_in_flight": limit, "unbounded": unbounded}
            for label, root in trees.items():
                add(f"chat{ck}x{keys}{'u' if unbounded else 'b'}_{label}",
                    _job(spec, root, label))
            add(f"chat{ck}x{keys}{'u' if unbounded else 'b'}_bare",
                _job({**spec, "kind": "bare_chat"}, after, "bare"))
    local: dict[str, float | None] = {label: None for label in trees}
    fa_quiet = None
    if "local" in only:
        local = {label: _local_in(root, scaled(10_000), 3) for label, root in trees.items()}
        from . import _flink_agents_ref

        ref = _flink_agents_ref.measure([scaled(10_000)], 100, 3, install=False)
        if ref.get("available"):
            fa_quiet = ref["sizes"][str(scaled(10_000))]["quiet"]["rps"]

    rows: list[dict[str, Any]] = []

    def row(what: str, target: str, b: float | None, a: float | None, unit: str) -> None:
        rows.append({"row": what, "target": target, "before": b, "after": a, "unit": unit,
                     "after_over_before": _ratio(a, b)})

    if "echo" in only:
        _echo_rows(row, runs, n)
    if "local" in only:
        row("local echo: rec/s", "-", local["before"], local["after"], "rec/s")
        row("local echo / Flink Agents 0.3.1 local (logging off)", ">= 1.0",
            _ratio(local["before"], fa_quiet), _ratio(local["after"], fa_quiet), "x")
    for ck, keys, limit, unbounded in chats:
        name = f"chat{ck}x{keys}{'u' if unbounded else 'b'}"
        waves = ck / (math.ceil(keys / limit) * (ck // keys) * LATENCY_S)
        kind = "unbounded" if unbounded else "bounded"
        shape = f"{keys:,} keys" + (f" x {ck // keys} chats" if ck > keys else "")
        got = {t: _best_rps(runs[f"{name}_{t}"], ck) for t in trees}
        row(f"200 ms model, {limit} in flight, {shape}, {kind}: % of ideal wave rate",
            ">= 90", *(100 * g / waves if g else None for g in (got["before"], got["after"])),
            "%")
        got_op = {t: _best_rps(runs[f"{name}_{t}"], ck, "rps_op") for t in trees}
        row(f"  the same from the operator's first input (no start-up skew, {kind})", "-",
            *(100 * g / waves if g else None for g in (got_op["before"], got_op["after"])),
            "%")
        row(f"200 ms model, {shape}, {kind}: operator CPU per call (issue 31)",
            "<= 200" if keys == scaled(1000) else "-",
            _least_cpu(runs[f"{name}_before"]), _least_cpu(runs[f"{name}_after"]), "us")
        row("  the same from the operator's first input (its open() not counted)", "-",
            _least_cpu(runs[f"{name}_before"], "cpu_op"),
            _least_cpu(runs[f"{name}_after"], "cpu_op"), "us")
        bare = _least_cpu(runs[f"{name}_bare"], "cpu_op")
        row("  a bare function's durable chat (bench._bare.BareChat), from its first input",
            "-", bare, bare, "us")
        row("  operator CPU / the bare function's, from the first input", "-",
            *(_ratio(_least_cpu(runs[f"{name}_{t}"], "cpu_op"), bare) for t in trees), "x")
        row("  CPython cyclic GC per call (TaskManager interpreter, all threads)", "-",
            *(_least(runs[f"{name}_{t}"], "gc_us_per_out") for t in trees), "us")
    return {"rows": rows, "runs": runs, "fa_quiet_rps": fa_quiet, "local": local}


def _echo_rows(row: Any, runs: dict[str, list[dict[str, Any]]], n: int) -> None:
    trees = ("before", "after")
    bare_rps, bare_cpu = _best_rps(runs["bare"], n), _least_cpu(runs["bare"])
    cpu = {t: _least_cpu(runs[f"echo_{t}"]) for t in trees}
    rps = {t: _best_rps(runs[f"echo_{t}"], n) for t in trees}
    off_rps = {t: _best_rps(runs[f"off_{t}"], n) for t in trees}
    off_cpu = {t: _least_cpu(runs[f"off_{t}"]) for t in trees}
    row("echo: operator CPU per record", "<= 50", cpu["before"], cpu["after"], "us")
    row("echo: bare KeyedProcessFunction CPU per record", "-", bare_cpu, bare_cpu, "us")
    row("echo: operator CPU / bare", "<= 4x", _ratio(cpu["before"], bare_cpu),
        _ratio(cpu["after"], bare_cpu), "x")
    row("echo: operator CPU / bare (issue 31)", "<= 2x", _ratio(cpu["before"], bare_cpu),
        _ratio(cpu["after"], bare_cpu), "x")
    row("echo: rec/s", "-", rps["before"], rps["after"], "rec/s")
    row("echo: rec/s / bare", ">= 0.6", _ratio(rps["before"], bare_rps),
        _ratio(rps["after"], bare_rps), "x")
    row("echo: metrics on vs off, operator CPU", "< 5 %",
        _pct(cpu["before"], off_cpu["before"]), _pct(cpu["after"], off_cpu["after"]), "% more")
    row("echo: metrics on vs off, rec/s", "< 5 %", _pct(off_rps["before"], rps["before"]),
        _pct(off_rps["after"], rps["after"]), "% less")
    # the best of a few repeats picks outliers on a shared machine: medians too
    med = {f"{kind}_{t}": _least_cpu(runs[f"{kind}_{t}"], pick=statistics.median)
           for t in trees for kind in ("echo", "off")}
    row("echo: operator CPU per record, median of the repeats", "-", med["echo_before"],
        med["echo_after"], "us")
    row("echo: metrics on vs off, operator CPU, medians", "< 5 %",
        _pct(med["echo_before"], med["off_before"]), _pct(med["echo_after"], med["off_after"]),
        "% more")


def _pct(a: float | None, b: float | None) -> float | None:
    return 100 * (a / b - 1) if a and b else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench._compare",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", help="the other tree (the 'before' version)")
    ap.add_argument("--after", default=str(ROOT), help="default: this tree")
    ap.add_argument("--before-label", default="the tree of the previous commit",
                    help="what the 'before' tree is, for the table's note (e.g. a commit)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--full", action="store_true", help="add 10,000 waiting keys")
    ap.add_argument("--only", default=",".join(GROUPS),
                    help=f"comma-separated groups of rows to run, of {', '.join(GROUPS)}")
    ap.add_argument("--out", default=str(BENCH_DIR / "results-compare.json"))
    ap.add_argument("--latest-md", default=None,
                    help="default: bench/LATEST.md when every group runs, else none")
    ap.add_argument("--render", default="",
                    help="only print (and write to --latest-md) the table of an earlier --out")
    ap.add_argument("--local-echo", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.local_echo:
        _local_echo(args.local_echo, args.repeats)
        return 0
    if args.render:
        saved = json.loads(Path(args.render).read_text())
        meta, data = saved["meta"], saved
    else:
        if not args.before:
            ap.error("--before DIR is required")
        before, after = Path(args.before).resolve(), Path(args.after).resolve()
        for tree in (before, after):
            if not (tree / "flink_agents_py").is_dir():
                ap.error(f"{tree} has no flink_agents_py package")
        if before != ROOT:  # the same jobs on both sides
            shutil.copytree(BENCH_DIR, before / "bench", dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("results*.json", "__pycache__"))
        meta = machine_info(ROOT)
        meta.update(before=str(before), after=str(after), repeats=args.repeats, full=args.full,
                    only=args.only, before_label=args.before_label)
        t0 = time.time()
        only = tuple(g.strip() for g in args.only.split(",") if g.strip())
        unknown = sorted(set(only) - set(GROUPS))
        if unknown:
            ap.error(f"--only: unknown group(s) {', '.join(unknown)}; choose from "
                     f"{', '.join(GROUPS)}")
        data = compare(before, after, args.repeats, args.full, only)
        meta["elapsed_s"] = time.time() - t0
        meta["loadavg_end"] = list(os.getloadavg())
        Path(args.out).write_text(json.dumps({"meta": meta, **data}, indent=2, default=str))
    label = meta.get("before_label", "the tree of the previous commit")
    table = Table(
        "Issue 16 and issue 31 rows: before vs after, side by side in one run",
        [("row", "row"), ("target", "target"), ("before", "before"), ("after", "after"),
         ("unit", "unit"), ("after_over_before", "after/before")],
        data["rows"],
        note=(f"Each Flink job in its own subprocess, alternating before ({label}) and after "
              "(this tree), so both see the same load; best rec/s and "
              f"least CPU of {meta['repeats']} repeats. Operator CPU = the busiest JVM thread (the "
              "keyed operator's task thread in thread mode) from /proc, per output, mid-run "
              "(see P2). The bare function is the same code on both sides. Load average at "
              f"start {', '.join(f'{x:.1f}' for x in meta['loadavg_start'])}, at end "
              f"{', '.join(f'{x:.1f}' for x in meta['loadavg_end'])} (2 cores shared with "
              "other work: figures are noisy upper bounds)."),
    )
    print("\n" + table.text() + "\n", flush=True)
    latest_md = args.latest_md
    if latest_md is None:
        ran = set(meta.get("only", ",".join(GROUPS)).split(","))
        latest_md = str(BENCH_DIR / "LATEST.md") if ran >= set(GROUPS) else ""
    if latest_md:
        write_latest_md(Path(latest_md), meta, {"p16": table.markdown()},
                        f"python -m bench._compare --before <{label}>")
    return 0


if __name__ == "__main__":
    sys.exit(main())
