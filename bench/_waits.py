"""P6 waits: many runs waiting for an outside event, in the core and on Flink with RocksDB.

    python -m bench._waits [--quick] [--full] [--out bench/results-waits.json]

- **core** (``AgentCore`` on in-memory key state, ``tracemalloc``): ``runs`` runs each park on
  ``await ctx.wait_for("go")``; park and release cost per run, the Python heap per parked run
  (in-memory key state included: on Flink that is RocksDB's), live objects kept (none).
- **flink** (a MiniCluster, thread mode, RocksDB with incremental checkpoints, one
  TaskManager, parallelism 1; ``bench._waits_job``): ``runs`` runs wait; reported: the time
  until all wait, the job's resident memory and its growth per run, the job process's CPU
  over 10 s while nothing arrives, the last checkpoint's size and duration, then a crash
  (SIGKILL) and a restore from that checkpoint: the time until the job runs again and until
  released runs answer.

Quick: 10^4 runs (core and Flink); default: 10^5; ``--full``: 10^6 on Flink; ``--runs N``:
N on Flink (on a busy 2-core machine 10^6 takes longer than its time: measure the largest N
that runs through, and extrapolate). The Flink row includes the TaskManager's JVM heap in
use once all runs wait (Flink's REST metrics).
"""

from __future__ import annotations

import gc
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tracemalloc
import urllib.request
from pathlib import Path
from typing import Any

from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore, InMemoryKeyState

from ._report import Table

ROOT = Path(__file__).resolve().parent.parent
IDLE_S = 10.0
RELEASE = 100


def config(quick: bool, full: bool = False, runs: int | None = None) -> dict[str, Any]:
    """The sizes: quick 10^4, default 10^5; ``full``: 10^6 on Flink; ``runs``: that many on
    Flink (the largest this machine parks in the time there is).

    Returns:
        ``{"core_runs", "flink_runs"}``.
    """
    core = 10_000 if quick else 100_000
    return {"core_runs": core, "flink_runs": runs or (1_000_000 if full else core)}


# -- core ------------------------------------------------------------------------------------
def bench_core(runs: int) -> dict[str, Any]:
    from ._waits_job import Waiter

    core = AgentCore(AgentPlan.from_agent(Waiter()))
    core.clock_ms = lambda: 0  # type: ignore[method-assign]
    core.open()
    states = [InMemoryKeyState() for _ in range(runs)]
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        t0 = time.perf_counter()
        parked = sum(core.on_input(i, {"key": i}, s).parked for i, s in enumerate(states))
        park_s = time.perf_counter() - t0
        gc.collect()
        heap = tracemalloc.get_traced_memory()[0] - base
        live = sum(core.is_live(i) for i in range(runs))
        state_b = sum(len(s.run.to_stored()) for s in states if s.run) / runs
        t0 = time.perf_counter()
        outs = sum(len(core.on_outside_event(i, {"key": i, "correlation_id": "go"}, s).outputs)
                   for i, s in enumerate(states))
        release_s = time.perf_counter() - t0
    finally:
        tracemalloc.stop()
        core.close()
    return {"part": "core", "runs": runs, "park_us": park_s / runs * 1e6,
            "release_us": release_s / runs * 1e6, "heap_b_per_run": heap / runs,
            "live_runs": live, "state_b_per_run": state_b,
            "ok": parked == runs and outs == runs and live == 0}


# -- flink -----------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rest(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return json.loads(r.read())


def _tree(root: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            parts = open(stat).read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kids.setdefault(int(parts[1]), []).append(int(stat.split("/")[2]))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += kids.get(pid, [])
    return out


def _cpu_s(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            parts = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            total += int(parts[11]) + int(parts[12])
        except OSError:
            pass
    return total / os.sysconf("SC_CLK_TCK")


def _rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def _until(what: str, fn: Any, limit_s: float, proc: subprocess.Popen[bytes]) -> Any:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            got = fn()
        except Exception:  # noqa: BLE001 - the REST API is not up yet
            got = None
        if got:
            return got
        if proc.poll() is not None:
            raise RuntimeError(f"the job exited ({proc.returncode}) before {what}")
        time.sleep(0.5)
    raise RuntimeError(f"{what}: not within {limit_s:.0f} s")


def _start(spec: dict[str, Any], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "bench._waits_job", json.dumps(spec)],
                            cwd=ROOT, stdout=log.open("ab"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def _job(port: int) -> str | None:
    jobs = [j for j in _rest(port, "/jobs/overview")["jobs"] if j["state"] == "RUNNING"]
    return jobs[0]["jid"] if jobs else None


def _latest(port: int, jid: str) -> dict[str, Any] | None:
    latest = _rest(port, f"/jobs/{jid}/checkpoints")["latest"]["completed"]
    return latest or None


def _jvm_heap_mb(port: int) -> tuple[float, float]:
    """The TaskManager JVM's heap in use and its maximum, in MB (Flink's REST metrics)."""
    [tm] = _rest(port, "/taskmanagers")["taskmanagers"][:1]
    got = {m["id"]: float(m["value"]) for m in _rest(
        port, f"/taskmanagers/{tm['id']}/metrics"
              "?get=Status.JVM.Memory.Heap.Used,Status.JVM.Memory.Heap.Max")}
    return got["Status.JVM.Memory.Heap.Used"] / 1e6, got["Status.JVM.Memory.Heap.Max"] / 1e6


def _probe(d: Path) -> list[dict[str, Any]]:
    path = d / "probe.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _outputs(d: Path) -> int:
    path = d / "outputs.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


def bench_flink(runs: int) -> dict[str, Any]:
    d = Path(tempfile.mkdtemp(prefix="waits-bench-"))
    log = d / "job.log"
    port = _free_port()
    spec = {"runs": runs, "dir": str(d), "rest_port": port, "restore": None, "release": RELEASE}
    limit = 120 + runs / 500  # generous: 2 ms a run on a busy 2-core machine
    t_start = time.monotonic()
    proc = _start(spec, log)
    row: dict[str, Any] = {"part": "flink", "runs": runs}
    try:
        jid = _until("the job runs", lambda: _job(port), 180, proc)
        (d / "probe-0").write_text("1")  # the tick map runs: the TaskManager is warm
        _until("a first probe", lambda: _probe(d), 120, proc)
        rss0 = _rss_mb(_tree(proc.pid))
        (d / "start").write_text("1")
        t_start = time.monotonic()

        def all_waiting() -> Any:
            vertices = _rest(port, f"/jobs/{jid}")["vertices"]
            source = next(v for v in vertices if "requests" in v["name"])
            if source["status"] != "FINISHED":
                return None
            done_at = time.time()
            return _until("a checkpoint after the requests", lambda: (
                c if (c := _latest(port, jid)) and c["latest_ack_timestamp"] / 1000 > done_at
                else None), limit, proc)

        ckpt = _until("every run waits", all_waiting, limit, proc)
        row["all_waiting_s"] = time.monotonic() - t_start  # from the first request
        row["checkpoint_mb"] = ckpt.get("checkpointed_size", ckpt.get("state_size", 0)) / 1e6
        row["checkpoint_full_mb"] = ckpt.get("state_size", 0) / 1e6
        row["checkpoint_s"] = ckpt["end_to_end_duration"] / 1000
        pids = _tree(proc.pid)
        cpu0, t0 = _cpu_s(pids), time.monotonic()
        time.sleep(IDLE_S)  # the measurement window: nothing arrives but the ticks
        row["idle_cores"] = (_cpu_s(pids) - cpu0) / (time.monotonic() - t0)
        row["rss_mb"] = _rss_mb(pids)
        try:
            row["jvm_heap_mb"], row["jvm_heap_max_mb"] = _jvm_heap_mb(port)
        except Exception as e:  # noqa: BLE001 - the figure is reported as missing
            print(f"[bench waits] no JVM heap figure: {e!r}", file=sys.stderr, flush=True)
        row["rss_b_per_run"] = (row["rss_mb"] - rss0) * 2**20 / runs
        (d / "release-0").write_text("1")
        t0 = time.monotonic()
        _until("the first released runs answer", lambda: _outputs(d) >= RELEASE, 120, proc)
        row["release_s"] = time.monotonic() - t0
        restore = str(Path(_latest(port, jid)["external_path"].removeprefix("file:")))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    # the crash is the kill above; restore from the last checkpoint, release the next keys
    (d / "release-1").write_text("1")
    port = spec["rest_port"] = _free_port()
    spec["restore"] = restore
    t0 = time.monotonic()
    proc = _start(spec, log)
    try:
        _until("the restored job runs", lambda: _job(port), 180, proc)
        row["restore_running_s"] = time.monotonic() - t0
        _until("restored runs answer", lambda: _outputs(d) >= 2 * RELEASE, limit, proc)
        row["restore_answer_s"] = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    # (a released run whose answer the restored checkpoint did not hold answers again)
    row["ok"] = _outputs(d) >= 2 * RELEASE
    subprocess.run(["rm", "-rf", str(d)], check=False)
    return row


def bench_waits(cfg: dict[str, Any]) -> tuple[dict[str, Any], Table]:
    """P6: the core part, then (unless ``flink_runs`` is 0) the Flink part.

    Returns:
        The JSON data and the table.
    """
    rows = [bench_core(cfg["core_runs"])]
    print(f"[bench waits] core: {rows[0]}", file=sys.stderr, flush=True)
    if cfg["flink_runs"]:
        rows.append(bench_flink(cfg["flink_runs"]))
        print(f"[bench waits] flink: {rows[1]}", file=sys.stderr, flush=True)
    table = Table(
        "P6 runs waiting for an outside event: memory, idle CPU, checkpoint, restore",
        [("part", "part"), ("runs", "runs"), ("park_us", "park µs/run"),
         ("release_us", "release µs/run"), ("heap_b_per_run", "core heap B/run"),
         ("live_runs", "live runs"), ("state_b_per_run", "state B/run"),
         ("all_waiting_s", "all waiting s"), ("rss_mb", "job RSS MB"),
         ("rss_b_per_run", "RSS B/run"), ("jvm_heap_mb", "JVM heap MB"),
         ("idle_cores", "idle cores"),
         ("checkpoint_mb", "ckpt MB"), ("checkpoint_s", "ckpt s"),
         ("release_s", "release 100 s"), ("restore_running_s", "restore: running s"),
         ("restore_answer_s", "restore: answers s"), ("ok", "ok")],
        rows,
        note=("core: AgentCore on in-memory key state (its heap includes that state, which "
              "Flink keeps in RocksDB); live runs = keys with live actions while all wait. "
              "flink: MiniCluster, thread mode, RocksDB, incremental checkpoints every 5 s, a "
              "20/s tick source keeping the input open; RSS = the job process tree's "
              "resident memory once all runs wait (JVM, RocksDB, Python), and its growth "
              "from before the first request, per run; JVM heap = the TaskManager's heap "
              "in use then (Flink's Status.JVM.Memory.Heap.Used); "
              "idle cores = the job process tree's CPU over 10 s with nothing arriving (the "
              "ticks included); ckpt = the first checkpoint after all runs wait (incremental "
              "size) and its duration; restore = after SIGKILL, from that process start to "
              "the job running, and to the next 100 released runs answering."),
    )
    return {"config": cfg, "rows": rows, "note": table.note}, table


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="bench._waits", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--full", action="store_true", help="10^6 runs on Flink")
    ap.add_argument("--runs", type=int, default=None,
                    help="this many runs on Flink (instead of the size --quick/--full set)")
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    data, table = bench_waits(config(args.quick, args.full, args.runs))
    print(table.text())
    if args.out:
        Path(args.out).write_text(json.dumps(data, indent=2, default=str))
    return 0 if all(r["ok"] for r in data["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
