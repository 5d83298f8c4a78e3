"""Scale-out and resource limits on real processes (issue 17): a Kafka broker and a Flink
standalone cluster with two TaskManagers of one slot each (``bench._rig``), thread mode.

    python -m bench._scaleout [--quick] [--only scale,wakeups,limits] [--out FILE]

- scale: the same Kafka job (topic with 2 partitions -> key_by -> operator -> Kafka) at
  parallelism 1 and 2: the slow model (200 ms chat, many keys, I/O-bound), the echo agent and
  the bare ``KeyedProcessFunction`` (``bench._bare``); rec/s from the first input stamp to the
  last output stamp, p2/p1 per kind. At p=2 each TaskManager runs one subtask, so each has an
  interpreter of its own.
- wakeups: unbounded input (the source never ends; a backlog larger than what the window
  consumes) at parallelism 1 with 256 and 1,024 calls in flight (keys = 2 x the limit, so
  every executor slot is busy): chats/s in a steady window, and the CPU of the operator's
  thread, of the I/O executor's loop thread and of the whole TaskManager in that window
  (``/proc/<TM pid>/task/<tid>/stat``; the job notes its threads' ids, see
  ``bench._scaleout_agents``).
- limits: one hot key with 100k records (records taken in by the operator, TaskManager RSS,
  checkpointed state size), and 10k keys each with a run in flight behind a saturated I/O
  executor (RSS and state per in-flight key, the CPU spent while nothing completes).

Figures are printed (and written with ``--out``), never asserted. ``bench.__main__`` runs this
as ``--only scaleout``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import sys
import tempfile
import time
from typing import Any

from ._report import CpuWatch, Table, machine_info
from ._rig import OutputReader, Rig, rss_kib
from ._threads import ThreadSampler

__all__ = ["bench_scaleout", "config"]

LATENCY_S = 0.2
HZ = os.sysconf("SC_CLK_TCK")


def log(msg: str) -> None:
    print(f"[scaleout {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def config(quick: bool) -> dict[str, Any]:
    """Sizes of the three sections (``quick``: smaller, for a smoke run)."""
    if quick:
        return {"sections": ["scale", "wakeups", "limits"], "repeats": 1,
                "scale": {"slow": {"records": 640, "keys": 128, "max_in_flight": 32},
                          "echo": {"records": 10_000, "keys": 100},
                          "bare": {"records": 10_000, "keys": 100}},
                "wakeups": {"limits": [256], "warmup_s": 4, "window_s": 6},
                "limits": {"hot_records": 10_000, "hot_s": 15, "keys": [200, 1000],
                           "host_options": {}}}
    return {"sections": ["scale", "wakeups", "limits"], "repeats": 2,
            "scale": {"slow": {"records": 8192, "keys": 4096, "max_in_flight": 32},
                      "echo": {"records": 40_000, "keys": 100},
                      "bare": {"records": 40_000, "keys": 100}},
            "wakeups": {"limits": [256, 1024], "warmup_s": 6, "window_s": 15},
            "limits": {"hot_records": 100_000, "hot_s": 40, "keys": [2000, 10_000],
                       "host_options": {}}}


# -- CPU of threads ------------------------------------------------------------------------
def _tids(rig: Rig) -> dict[str, list[tuple[int, int]]]:
    """role -> [(pid, tid)] from the files the job's threads wrote."""
    found: dict[str, list[tuple[int, int]]] = {}
    for f in rig.cluster.tid_dir.glob("*-*-*"):
        role, pid, tid = f.name.split("-")
        found.setdefault(role, []).append((int(pid), int(tid)))
    return found


def _window_cpu(samplers: dict[int, ThreadSampler], tids: dict[str, list[tuple[int, int]]],
                t_from: float, t_to: float) -> dict[str, Any]:
    """CPU (in cores) of each TaskManager, and of the noted threads, in ``[t_from, t_to]``."""
    out: dict[str, Any] = {"tm_cores": {}, "op_cores": 0.0, "io_cores": 0.0, "interval_s": None}
    for pid, s in samplers.items():
        inside = [x for x in s.samples if t_from <= x[0] <= t_to]
        if len(inside) < 2:
            continue
        (ta, a), (tb, b) = inside[0], inside[-1]
        span = tb - ta
        out["interval_s"] = span
        total = sum(t - a.get(tid, (None, 0))[1] for tid, (_, t) in b.items())
        out["tm_cores"][pid] = total / HZ / span
        for role in ("op", "io"):
            for rpid, tid in tids.get(role, []):
                if rpid == pid and tid in b:
                    out[f"{role}_cores"] += (b[tid][1] - a.get(tid, (None, 0))[1]) / HZ / span
    out["tm_cores_total"] = sum(out["tm_cores"].values())
    return out


class _Watch:
    """Thread samplers on every TaskManager plus the CPU taken by other processes."""

    def __init__(self, rig: Rig) -> None:
        self.samplers = {pid: ThreadSampler(pid, 0.5).start() for pid in rig.cluster.tm_pids()}
        self.others = CpuWatch()
        self.load1 = os.getloadavg()[0]

    def stop(self) -> dict[str, Any]:
        for s in self.samplers.values():
            s.stop()
        self.others.sample(os.getpid())
        return {"load1": self.load1, "other_cores": self.others.result()["other_cores"]}


# -- scale -----------------------------------------------------------------------------------
def _scale_run(rig: Rig, kind: str, par: int, size: dict[str, Any]) -> dict[str, Any]:
    n, keys = size["records"], size["keys"]
    rig.fresh()
    tin, tout = rig.topics(2)
    rig.produce(tin, n, keys)
    reader = OutputReader(rig.broker.bootstrap, tout).start()
    watch = _Watch(rig)
    spec = {"kind": kind, "in_topic": tin, "out_topic": tout,
            "max_in_flight": size.get("max_in_flight", 32)}
    job = rig.submit(spec, par)
    busy: list[dict[str, Any]] = []
    try:
        if reader.wait(n // 2, timeout_s=600):
            busy = rig.busy(job)  # where the time goes, half-way
        done = reader.wait(n, timeout_s=600)
    finally:
        noise = watch.stop()
        failures = rig.failures(job)
        rig.cancel(job)
        reader.stop()
    rows = list(reader.rows)
    t_in = min(r[0] for r in rows) if rows else float("nan")
    t_out = max(r[1] for r in rows) if rows else float("nan")
    cpu = _window_cpu(watch.samplers, _tids(rig), t_in, t_out)
    window = t_out - t_in
    outs = sorted(r[1] for r in rows)
    lo, hi = int(0.1 * len(outs)), int(0.9 * len(outs)) - 1
    mid = (hi - lo) / (outs[hi] - outs[lo]) if hi > lo and outs[hi] > outs[lo] else None
    res = {"kind": kind, "parallelism": par, "records": n, "keys": keys, "outputs": len(rows),
           "complete": done, "window_s": window, "rps": len(rows) / window if rows else None,
           "mid_rps": mid,
           "failed": sum(1 for r in rows if not r[2]), "tm_cores": cpu["tm_cores_total"],
           "tms_busy": sum(1 for c in cpu["tm_cores"].values() if c > 0.1),
           "op_cores": cpu["op_cores"], "restarts": len(failures), "busy": busy,
           "failure": failures[0][:800] if failures else None, **noise}
    if failures:
        log(f"scale {kind} p={par}: {len(failures)} failure(s): {failures[0][:800]}")
    log(f"scale {kind} p={par} half-way, ms/s per vertex: {busy}")
    log(f"scale {kind} p={par}: {res['rps'] or 0:,.0f} rec/s over {window:.1f} s "
        f"({mid or 0:,.0f} rec/s from 10% to 90% of the outputs), TMs "
        f"{cpu['tm_cores_total']:.2f} cores, others {noise['other_cores']:.2f}")
    return res


def scale(rig: Rig, cfg: dict[str, Any], repeats: int) -> tuple[list[dict[str, Any]], Table]:
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for _ in range(repeats):
        for kind, size in cfg.items():
            for par in (1, 2):
                try:
                    r = _scale_run(rig, kind, par, size)
                except RuntimeError as e:
                    log(f"scale {kind} p={par} FAILED: {e}")
                    r = {"kind": kind, "parallelism": par, "error": str(e)[-500:]}
                runs.setdefault((kind, par), []).append(r)

    def best(kind: str, par: int) -> dict[str, Any]:
        ok = [r for r in runs.get((kind, par), []) if r.get("complete") and not r["restarts"]
              and not r["failed"]]
        return max(ok, key=lambda r: r["mid_rps"] or 0) if ok else {}

    rows = []
    for kind, size in cfg.items():
        a, b = best(kind, 1), best(kind, 2)
        rows.append({
            "kind": kind, "records": size["records"], "keys": size["keys"],
            "max_in_flight": size.get("max_in_flight", 32) if kind == "slow" else None,
            "p1_rps": a.get("rps"), "p2_rps": b.get("rps"),
            "ratio": b["rps"] / a["rps"] if a and b else None,
            "p1_mid": a.get("mid_rps"), "p2_mid": b.get("mid_rps"),
            "mid_ratio": b["mid_rps"] / a["mid_rps"] if a.get("mid_rps") and b.get("mid_rps")
            else None,
            "p1_tm_cores": a.get("tm_cores"), "p2_tm_cores": b.get("tm_cores"),
            "p2_tms_busy": b.get("tms_busy"),
            "other_cores": max((r.get("other_cores", 0) for r in (a, b) if r), default=None),
            "runs": runs.get((kind, 1), []) + runs.get((kind, 2), []),
        })
    slow = next((r for r in rows if r["kind"] == "slow"), None)
    ideal = (f"slow ideal: {slow['max_in_flight'] / LATENCY_S:.0f} chats/s per subtask "
             f"(max_in_flight / 0.2 s). " if slow else "")
    table = Table(
        "Scale-out: parallelism 1 vs 2 on 2 TaskManagers (1 slot each), Kafka in and out",
        [("kind", "job"), ("records", "records"), ("keys", "keys"),
         ("max_in_flight", "max_in_flight"), ("p1_mid", "p=1 rec/s"), ("p2_mid", "p=2 rec/s"),
         ("mid_ratio", "p2/p1"), ("p1_rps", "p=1 end-to-end"), ("p2_rps", "p=2 end-to-end"),
         ("ratio", "p2/p1 end-to-end"), ("p1_tm_cores", "TM cores p=1"),
         ("p2_tm_cores", "TM cores p=2"),
         ("p2_tms_busy", "TMs busy p=2"), ("other_cores", "others' cores")],
        rows,
        note=("Job: KafkaSource (topic with 2 partitions, records produced before the job, "
              "unbounded source) -> parse -> stamp -> key_by -> operator -> stamp -> KafkaSink; "
              "thread mode; rec/s = the steady rate, between the 10% and the 90% output "
              "(leaves out the ramp-up and the tail of the busier subtask: keys hash unevenly "
              "to subtasks); end-to-end = outputs / (last output stamp - first input stamp); "
              f"best of {repeats} by the steady rate. slow = one 200 ms chat per input "
              "(asyncio.sleep), echo = the echo agent, bare = bench/_bare.py's "
              "KeyedProcessFunction doing the same keyed-state work. " + ideal
              + "TM cores = CPU of both TaskManager JVMs in the window (of 2 "
              "cores); others' cores = CPU taken by processes outside the rig (other helpers' "
              "jobs) during the run."),
    )
    return rows, table


# -- wake-ups --------------------------------------------------------------------------------
def wakeups(rig: Rig, cfg: dict[str, Any]) -> tuple[list[dict[str, Any]], Table]:
    rows = []
    for limit in cfg["limits"]:
        keys = 2 * limit
        span = cfg["warmup_s"] + cfg["window_s"]
        n = min(80_000, int(limit / LATENCY_S * (span + 6)))
        rig.fresh()
        tin, tout = rig.topics(2)
        rig.produce(tin, n, keys)
        reader = OutputReader(rig.broker.bootstrap, tout).start()
        watch = _Watch(rig)
        try:
            job = rig.submit({"kind": "slow", "in_topic": tin, "out_topic": tout,
                              "max_in_flight": limit}, 1)
        except RuntimeError as e:
            watch.stop()
            reader.stop()
            log(f"wakeups {limit} FAILED: {e}")
            rows.append({"limit": limit, "error": str(e)[-500:]})
            continue
        try:
            reader.wait(1, timeout_s=120)
            t1 = time.time()
            time.sleep(span)
            taken = rig.records_in(job)
        finally:
            noise = watch.stop()
            rig.cancel(job)
            reader.stop()
        a, b = t1 + cfg["warmup_s"], t1 + span
        cpu = _window_cpu(watch.samplers, _tids(rig), a, b)
        outs = sum(1 for r in reader.rows if a <= r[1] <= b)
        rate = outs / (b - a)
        ideal = limit / LATENCY_S
        row = {"limit": limit, "keys": keys, "backlog": n, "chats_per_s": rate,
               "ideal_per_s": ideal, "pct_of_ideal": 100 * rate / ideal,
               "op_cores": cpu["op_cores"], "io_cores": cpu["io_cores"],
               "tm_cores": cpu["tm_cores_total"],
               "op_us_per_chat": cpu["op_cores"] / rate * 1e6 if rate else None,
               "tm_us_per_chat": cpu["tm_cores_total"] / rate * 1e6 if rate else None,
               "input_left": n - len(reader.rows), "taken_in": taken, **noise}
        rows.append(row)
        log(f"wakeups limit={limit}: {rate:,.0f} chats/s ({row['pct_of_ideal']:.0f}% of "
            f"{ideal:,.0f}), op thread {cpu['op_cores']:.2f} cores, io {cpu['io_cores']:.2f}, "
            f"TM {cpu['tm_cores_total']:.2f}, others {noise['other_cores']:.2f}")
    table = Table(
        "Unbounded Kafka input, 200 ms model, one subtask: calls in flight and wake-up CPU",
        [("limit", "max_in_flight"), ("keys", "keys"), ("chats_per_s", "chats/s"),
         ("ideal_per_s", "ideal /s"), ("pct_of_ideal", "% of ideal"),
         ("op_cores", "operator thread cores"), ("io_cores", "I/O loop cores"),
         ("tm_cores", "TM cores"), ("op_us_per_chat", "operator us/chat"),
         ("tm_us_per_chat", "TM us/chat"), ("input_left", "input left"),
         ("other_cores", "others' cores")],
        rows,
        note=(f"Parallelism 1, thread mode; keys = 2 x max_in_flight with a backlog of inputs "
              f"per key already in the topic, so max_in_flight calls run at all times; the "
              f"source never ends ('input left' > 0: it did not run dry). Window: "
              f"{cfg['window_s']} s starting {cfg['warmup_s']} s after the first output. "
              "operator thread = the task thread running process_element and the timers (the "
              "wake-ups, the stepping and the keyed-state work); I/O loop = the executor's "
              "asyncio thread; TM = the whole TaskManager JVM. ideal = max_in_flight / 0.2 s."),
    )
    return rows, table


# -- resource limits -------------------------------------------------------------------------
def _job_tm(rig: Rig) -> int | None:
    for role in ("io", "op"):
        for pid, _ in _tids(rig).get(role, []):
            return pid
    return None


def _wait_taken(rig: Rig, job: str, n: int, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    taken = rig.records_in(job)
    while taken < n and time.monotonic() < deadline:
        time.sleep(1)
        taken = rig.records_in(job)
    return taken


def _wait_checkpoint_after(rig: Rig, job: str, t: float, timeout_s: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        c = (rig.cluster.rest(f"/jobs/{job}/checkpoints").get("latest") or {}).get("completed")
        if c and c.get("latest_ack_timestamp", 0) / 1000 > t:
            return rig.checkpoint_size(job)
        time.sleep(1)
    return rig.checkpoint_size(job)


def hot_key(rig: Rig, cfg: dict[str, Any]) -> dict[str, Any]:
    n = cfg["hot_records"]
    rig.fresh()
    tin, tout = rig.topics(1)
    rig.produce(tin, n, 1)
    reader = OutputReader(rig.broker.bootstrap, tout).start()
    rss0 = {pid: rss_kib(pid) for pid in rig.cluster.tm_pids()}
    watch = _Watch(rig)
    job = rig.submit({"kind": "slow", "in_topic": tin, "out_topic": tout, "max_in_flight": 32,
                      "checkpoint_interval_ms": 5000,
                      "host_options": cfg.get("host_options", {})}, 1)
    t0 = time.time()
    try:
        time.sleep(cfg["hot_s"])
        taken = rig.records_in(job)
        ckpt = _wait_checkpoint_after(rig, job, time.time())
        pid = _job_tm(rig)
        rss = rss_kib(pid) if pid else 0
        wall = time.time() - t0
    finally:
        noise = watch.stop()
        rig.cancel(job)
        reader.stop()
    outs = len(reader.rows)
    queued = taken - outs
    delta = (rss - rss0.get(pid, rss)) / 1024 if pid else None
    state = ckpt.get("checkpointed_size") or ckpt.get("state_size")
    row = {"scenario": f"1 hot key, {n:,} records, 200 ms model",
           "taken_in": taken, "outputs": outs, "in_flight_or_queued": queued,
           "rss_delta_mib": delta, "state_mb": state / 1e6 if state else None,
           "state_b_per_item": state / queued if state and queued > 0 else None,
           "rss_kib_per_item": delta * 1024 / queued if delta and queued > 0 else None,
           "seconds": wall, "host_options": cfg.get("host_options", {}), **noise}
    log(f"hot key: took in {taken:,}, {outs} outputs, RSS +{delta or 0:.0f} MiB, "
        f"state {row['state_mb'] or 0:.1f} MB")
    return row


def many_keys(rig: Rig, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for options in cfg.get("many_runs") or [{}]:
        rows += _many_keys(rig, cfg["keys"], options)
    return rows


def _many_keys(rig: Rig, steps: list[int], options: dict[str, Any]) -> list[dict[str, Any]]:
    total = steps[-1]
    rig.fresh()
    tin, tout = rig.topics(2)
    reader = OutputReader(rig.broker.bootstrap, tout).start()
    job = rig.submit({"kind": "hold", "in_topic": tin, "out_topic": tout, "max_in_flight": 32,
                      "checkpoint_interval_ms": 5000, "host_options": options}, 1)
    label = ", ".join(f"{k} {v}" for k, v in options.items())
    rows: list[dict[str, Any]] = []
    try:
        time.sleep(5)
        rss0 = {pid: rss_kib(pid) for pid in rig.cluster.tm_pids()}
        base_state = rig.checkpoint_size(job).get("checkpointed_size") or 0
        sent, prev = 0, None
        for k in steps:
            # keys sent - sent..k-1: one input each (every run then waits on a 600 s chat)
            rig.produce(tin, k - sent, total, start=sent)
            sent = k
            taken = _wait_taken(rig, job, k, 60)
            time.sleep(3)
            watch = _Watch(rig)
            time.sleep(10)  # nothing completes now: what do the waiting runs cost?
            noise = watch.stop()
            t = time.time()
            cpu = _window_cpu(watch.samplers, _tids(rig), t - 10.5, t)
            ckpt = _wait_checkpoint_after(rig, job, t)
            pid = _job_tm(rig)
            rss = rss_kib(pid) if pid else 0
            state = ckpt.get("checkpointed_size") or ckpt.get("state_size") or 0
            row = {"scenario": f"{k:,} keys, one input each, max_in_flight 32"
                               + (f", {label}" if label else ""),
                   "keys": k, "host_options": options, "taken_in": taken,
                   "outputs": len(reader.rows),
                   "in_flight_or_queued": taken, "rss_mib": rss / 1024,
                   "rss_delta_mib": (rss - rss0.get(pid, rss)) / 1024 if pid else None,
                   "state_mb": state / 1e6, "idle_tm_cores": cpu["tm_cores_total"],
                   "idle_op_cores": cpu["op_cores"], **noise}
            if prev is not None:
                dk = max(1, taken - prev["taken_in"])
                row["rss_kib_per_item"] = (rss / 1024 - prev["rss_mib"]) * 1024 / dk
                row["state_b_per_item"] = (state / 1e6 - prev["state_mb"]) * 1e6 / dk
            else:
                row["rss_kib_per_item"] = (row["rss_delta_mib"] or 0) * 1024 / max(1, taken)
                row["state_b_per_item"] = (state - base_state) / max(1, taken)
            rows.append(row)
            log(f"{k} keys waiting: RSS {row['rss_mib']:.0f} MiB, state {row['state_mb']:.1f} "
                f"MB, idle TM {cpu['tm_cores_total']:.2f} cores (op {cpu['op_cores']:.2f})")
            prev = row
    finally:
        rig.cancel(job)
        reader.stop()
    return rows


def limits(rig: Rig, cfg: dict[str, Any]) -> tuple[list[dict[str, Any]], Table]:
    rows: list[dict[str, Any]] = []
    for part in (hot_key, many_keys):
        try:
            got = part(rig, cfg)
            rows += got if isinstance(got, list) else [got]
        except RuntimeError as e:
            log(f"limits {part.__name__} FAILED: {e}")
            rows.append({"scenario": part.__name__, "error": str(e)[-500:]})
    table = Table(
        "Resource limits on the cluster (thread mode, parallelism 1)",
        [("scenario", "scenario"), ("taken_in", "records in operator"),
         ("outputs", "outputs"), ("in_flight_or_queued", "runs in flight + queued"),
         ("rss_delta_mib", "TM RSS delta MiB"), ("rss_kib_per_item", "RSS KiB / item"),
         ("state_mb", "checkpointed state MB"), ("state_b_per_item", "state B / item"),
         ("idle_tm_cores", "TM cores, nothing completing"), ("other_cores", "others' cores")],
        rows,
        note=("Hot key: every record has the same key; records the operator took in (Flink's "
              "read-records of its vertex) minus outputs sit in the key's queue in keyed state. "
              "Many keys: one input per key, each run waits on a 600 s chat, 32 calls run "
              "and the rest wait in the I/O executor's queue; per-item figures are the slope "
              "between the two key counts (first row: against the job before any input). TM "
              "RSS = the TaskManager JVM's resident set (thread mode: the Python interpreter "
              "lives in it); state = the checkpoint's size (HashMapStateBackend, full "
              "checkpoints)."),
    )
    return rows, table


# -- entry points ----------------------------------------------------------------------------
class Tables:
    """Several tables shown as one (what ``bench.__main__`` prints and writes)."""

    def __init__(self, tables: list[Table]) -> None:
        self.tables = tables
        self.note = " ".join(t.note for t in tables)

    def text(self) -> str:
        return "\n\n".join(t.text() for t in self.tables)

    def markdown(self) -> str:
        return "\n\n".join(t.markdown() for t in self.tables)


def bench_scaleout(cfg: dict[str, Any]) -> tuple[dict[str, Any], Tables]:
    """Start the rig, run the configured sections, stop the rig.

    Returns:
        ``(data, tables)``: the rows per section (JSON-ready) and their tables.
    """
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-scaleout-"))
    data: dict[str, Any] = {"config": cfg}
    tables = []
    t = time.time()
    try:
        with Rig(work) as rig:
            log(f"rig up in {time.time() - t:.0f} s: broker {rig.broker.bootstrap}, "
                f"TaskManagers {rig.cluster.tm_pids()}")
            if "scale" in cfg["sections"]:
                data["scale"], tab = scale(rig, cfg["scale"], cfg["repeats"])
                tables.append(tab)
            if "wakeups" in cfg["sections"]:
                data["wakeups"], tab = wakeups(rig, cfg["wakeups"])
                tables.append(tab)
            if "limits" in cfg["sections"]:
                data["limits"], tab = limits(rig, cfg["limits"])
                tables.append(tab)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    data["elapsed_s"] = time.time() - t
    return data, Tables(tables)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench._scaleout",
                                 description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="", help="comma list of scale,wakeups,limits")
    ap.add_argument("--repeats", type=int, default=0)
    ap.add_argument("--host-options", default="", help="JSON: AgentsExecutionEnvironment.flink "
                    "options for the limits section (e.g. a per-key queue limit)")
    ap.add_argument("--many-runs", default="", help="JSON list of option dicts: one many-keys "
                    "run each (e.g. '[{\"max_waiting_calls\": 20000}, {}]')")
    ap.add_argument("--out", default="", help="also write the rows as JSON here")
    args = ap.parse_args(argv)
    cfg = config(args.quick)
    if args.only:
        cfg["sections"] = [s.strip() for s in args.only.split(",") if s.strip()]
    if args.repeats:
        cfg["repeats"] = args.repeats
    if args.many_runs:
        cfg["limits"]["many_runs"] = json.loads(args.many_runs)
    if args.host_options:
        cfg["limits"]["host_options"] = json.loads(args.host_options)
    meta = machine_info(pathlib.Path(__file__).resolve().parent.parent)
    data, tables = bench_scaleout(cfg)
    print(tables.text(), flush=True)
    print("\n" + tables.markdown(), flush=True)
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps({"meta": meta, **data}, indent=2,
                                                     default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
