"""Benchmarks of flink-agents-py.

    python -m bench [--quick] [--only p1,p2,p3,p4,p5,flow,start,waits,scaleout] [--out FILE]

- p1: local runner, echo agent vs a plain asyncio loop with the same per-key bookkeeping, and vs
  Apache Flink Agents 0.3.1's local execution environment (a venv of its own, installed on
  first use; see ``bench/_flink_agents_ref.py``).
- p2: Flink agent operator (echo agent) vs a bare KeyedProcessFunction doing the same keyed
  state work, in the same job shape; each Flink job runs in a subprocess of its own.
- p3: a simulated 200 ms chat model, one input per key: achieved chats/s vs ``limit / 0.2 s``
  for several ``max_in_flight`` limits, local runner and Flink operator, and the steady state
  (ten inputs per key, unbounded); in thread mode each Flink row's operator CPU per call
  beside a hand-written function's doing the least a durable chat must (``bench._bare``).
- p4: recovery: re-entering in-flight runs from their keyed state, replayed vs executed calls.
- p5: memory: state and Python heap per key with one run in flight, and after completion.
- flow: chats against a fake provider that throttles (429 + ``Retry-After``): failed chats,
  % answered 429 and the rate served against the provider's limit (``bench/_flow.py``).
- start: a one-record Flink job's wall time, ours vs a bare PyFlink job of the same shape
  (``bench._start``; target ours <= 1.1x).
- waits (P6): runs waiting for an outside event (``bench._waits``): park and release cost and
  heap per run in the core; without ``--quick`` also 10^5 runs waiting on a RocksDB
  MiniCluster (memory, JVM heap, idle CPU, checkpoint, restore). ``--quick`` runs the core
  part only (seconds); ``python -m bench._waits --full`` is the 10^6 run.
- scaleout (only when named in ``--only``): ``bench._scaleout``, parallelism 1 vs 2 on a
  standalone cluster of two TaskManagers fed from Kafka, wake-ups on unbounded input, limits.

Before/after rows of the operator-cost work (operator-thread CPU per record, metrics on vs
off, the slow model's % of the ideal wave rate) measured side by side on two source trees:
``python -m bench._compare --before DIR``.

Nothing asserts thresholds: the figures are printed and written to ``--out`` (JSON); a
``--quick`` run at full scale also refreshes ``bench/LATEST.md``. ``BENCH_SCALE`` (env, a
float, default 1) scales every record and key count (for smoke tests).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ._report import CpuWatch, Table, machine_info, other_java_processes, write_latest_md

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = Path(__file__).resolve().parent
ALL = ("p1", "p2", "p3", "p4", "p5", "flow", "start", "waits")
OPTIONAL = ("scaleout",)
"""Run only when named in ``--only``: ``scaleout`` (``bench._scaleout``: a Kafka broker and a
standalone cluster of two TaskManagers; several minutes)."""


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def scale() -> float:
    return float(os.environ.get("BENCH_SCALE", "1") or 1)


def scaled(n: int) -> int:
    return max(1, round(n * scale()))


# -- configuration ---------------------------------------------------------------------------
def config(quick: bool, scaleout: bool = False) -> dict[str, Any]:
    from . import _flow, _p4, _p5, _start

    extra: dict[str, Any] = {"p4": _p4.config(quick), "p5": _p5.config(quick),
                             "flow": _flow.config(quick), "start": _start.config(quick),
                             "waits": {"core_runs": scaled(10_000 if quick else 100_000),
                                       "flink_runs": 0 if quick else scaled(100_000)}}
    if scaleout:  # imported only when asked for (it needs the cluster test fixtures)
        from . import _scaleout

        extra["scaleout"] = _scaleout.config(quick)
    return {**_config(quick), **extra}


def _config(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "p1": {"sizes": [10_000], "keys": 100, "repeats": 3},
            "p2": {"configs": [("thread", 1)], "records": 50_000, "keys": 100, "repeats": 3,
                   "metrics_off": True},
            "p3": {"local_keys": 1000, "local_limits": [256],
                   "flink_keys": 1000, "flink_limits": [256], "flink_mode": "thread",
                   "unbounded": [(1000, 256)],
                   # the steady state, ten chats per key: a ~10 s window (2 % noise)
                   "steady": {"keys": 1000, "inputs_per_key": 10, "limit": 256}},
        }
    return {
        "p1": {"sizes": [10_000, 100_000], "keys": 100, "repeats": 3},
        "p2": {"configs": [("thread", 1), ("thread", 2), ("process", 1), ("process", 2)],
               "records": 200_000, "keys": 100, "repeats": 1, "metrics_off": True},
        "p3": {"local_keys": 1000, "local_limits": [1, 16, 64, 256],
               "flink_keys": 1000, "flink_limits": [16, 64, 256], "flink_mode": "thread",
               # no end of input (no drain): the wake-up path alone; 10,000 waiting keys
               "unbounded": [(1000, 256), (10_000, 256)],
               # several inputs per key: shows the serial end-of-input drain of bounded input
               "multi": {"keys": 50, "inputs_per_key": 3, "limit": 64},
               "steady": {"keys": 1000, "inputs_per_key": 10, "limit": 256}},
    }


# -- P1 --------------------------------------------------------------------------------------
def bench_p1(cfg: dict[str, Any]) -> tuple[dict[str, Any], Table]:
    from . import _flink_agents_ref
    from ._local import echo_records, time_agent_echo, time_asyncio_echo

    rows = []
    for size in cfg["sizes"]:
        n = scaled(size)
        keys = min(cfg["keys"], n)
        records = echo_records(n, keys)
        time_agent_echo(records[: min(n, 500)])  # warm imports and caches
        agent_s, base_s = [], []
        for _ in range(cfg["repeats"]):  # interleaved, best of N
            agent_s.append(time_agent_echo(records))
            base_s.append(time_asyncio_echo(records))
        a, b = min(agent_s), min(base_s)
        row = {
            "records": n, "keys": keys, "repeats": cfg["repeats"],
            "agent_rps": n / a, "baseline_rps": n / b, "ratio": b / a,
            "agent_us_per_record": a / n * 1e6, "baseline_us_per_record": b / n * 1e6,
            "agent_runs_s": agent_s, "baseline_runs_s": base_s,
            "agent_spread": (max(agent_s) - a) / a,
        }
        rows.append(row)
        log(f"p1 {n} records: agent {row['agent_rps']:,.0f} rec/s, "
            f"asyncio {row['baseline_rps']:,.0f} rec/s")

    # Apache Flink Agents' local execution environment, same agent and records, in a venv of
    # its own (installed on first use, by full-scale runs only: smoke runs at BENCH_SCALE<1 use
    # it if it is there); never fails the benchmark.
    ver = _flink_agents_ref.FLINK_AGENTS_VERSION
    t = time.time()
    ref = _flink_agents_ref.measure([r["records"] for r in rows], cfg["keys"], cfg["repeats"],
                                    install=scale() == 1)
    ref["elapsed_s"] = time.time() - t
    if ref.get("available"):
        for row in rows:
            got = ref["sizes"].get(str(row["records"]))
            if not got:
                continue
            for mode, suffix in (("shipped", ""), ("quiet", "_quiet")):
                row[f"fa_rps{suffix}"] = got[mode]["rps"]
                row[f"fa_us_per_record{suffix}"] = got[mode]["us_per_record"]
                row[f"fa_runs_s{suffix}"] = got[mode]["runs_s"]
                row[f"ours_vs_fa{suffix}"] = row["agent_rps"] / got[mode]["rps"]
            log(f"p1 {row['records']} records: flink-agents {ver} "
                f"{row['fa_rps']:,.0f} rec/s ({row['fa_rps_quiet']:,.0f} quiet); "
                f"ours/theirs {row['ours_vs_fa']:.2f} ({row['ours_vs_fa_quiet']:.2f} quiet)")
        ref_note = (f"flink-agents {ver}: its pure-Python local execution environment "
                    f"(apache-flink {ref.get('apache_flink')} for its pyflink imports, no JVM) "
                    "in a venv of its own, same echo agent and records, execute() only, best of "
                    f"{cfg['repeats']} in a subprocess after ours; it runs each input to "
                    "completion synchronously. 'fa rec/s' as shipped (INFO log line per event, "
                    "output discarded), 'quiet' with its runner's logger at WARNING; ratios are "
                    "agent rec/s over theirs.")
    else:
        log(f"p1: flink-agents {ver} comparison unavailable: {ref.get('reason')}")
        ref_note = f"flink-agents {ver} comparison unavailable: {ref.get('reason')}"
    table = Table(
        "P1 local runner: echo agent vs plain asyncio loop and flink-agents " + ver,
        [("records", "records"), ("keys", "keys"), ("agent_rps", "agent rec/s"),
         ("baseline_rps", "asyncio rec/s"), ("ratio", "agent/asyncio"),
         ("fa_rps", f"fa {ver} rec/s"), ("ours_vs_fa", "agent/fa"),
         ("fa_rps_quiet", "fa quiet rec/s"), ("ours_vs_fa_quiet", "agent/fa quiet"),
         ("agent_us_per_record", "agent us/rec"), ("baseline_us_per_record", "asyncio us/rec")],
        rows,
        note=("best of {r} interleaved runs; run() only (plan compiled before). Baseline: per-key "
              "FIFO deques, one asyncio task per run, one run per key at a time, outputs in a "
              "list, a loop yield per input. ").format(r=cfg["repeats"]) + ref_note,
    )
    return {"config": cfg, "rows": rows, "flink_agents_ref": ref, "note": table.note}, table


# -- Flink subprocesses ----------------------------------------------------------------------
def run_flink_job(spec: dict[str, Any], timeout_s: float = 900,
                  root: Path = ROOT, module: str = "bench._flink_job") -> dict[str, Any]:
    """Run ``python -m <module> '<spec as JSON>'`` (default ``bench._flink_job``) in a
    subprocess; return its figures (its ``BENCH_RESULT`` line) plus noise indicators.

    ``root``: the source tree to import ``flink_agents_py`` and ``bench`` from (another tree
    for before/after comparisons, see ``bench._compare``).
    """
    env = dict(os.environ)
    extra = os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    env["PYTHONPATH"] = str(root) + extra
    before = {"load1": os.getloadavg()[0], "other_java": other_java_processes()}
    stop = threading.Event()
    watch = CpuWatch()
    t = time.time()
    proc = subprocess.Popen([sys.executable, "-m", module, json.dumps(spec)],
                            cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)

    def sample() -> None:  # CPU taken by others during the job (another Flink job...)
        while not stop.wait(0.5):
            watch.sample(proc.pid)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"spec": spec, "error": f"timed out after {timeout_s:.0f} s", **before}
    finally:
        stop.set()
        sampler.join()
    wall = time.time() - t
    noise = {**before, **watch.result()}
    for line in stdout.splitlines():
        if line.startswith("BENCH_RESULT "):
            res = json.loads(line[len("BENCH_RESULT "):])
            res.update(noise, process_wall_s=wall, load1_after=os.getloadavg()[0])
            return res
    tail = "\n".join((stderr or stdout).strip().splitlines()[-15:])
    return {"spec": spec, "error": f"exit {proc.returncode}: {tail}", **noise}


def _desc(spec: dict[str, Any]) -> str:
    return (f"{spec['kind']} {spec['mode']} p={spec['parallelism']} n={spec['records']}"
            + (f" limit={spec['max_in_flight']}" if spec["kind"] == "chat" else ""))


def _run_logged(spec: dict[str, Any]) -> dict[str, Any]:
    log(f"flink job: {_desc(spec)} ...")
    res = run_flink_job(spec)
    if "error" in res:
        log(f"  FAILED: {res['error']}")
    else:
        log(f"  {res['count']} outputs, {res['rps']:,.0f} /s over {res['window_s']:.2f} s "
            f"(process {res['process_wall_s']:.1f} s; job used {res['job_cores']:.2f} cores, "
            f"others {res['other_cores']:.2f} cores)")
    return res


# -- P2 --------------------------------------------------------------------------------------
def _cpu(res: dict[str, Any], field: str = "thread_us_per_out",
         window: str = "cpu") -> float | None:
    """A CPU figure of a Flink job's operator thread; ``window`` ``"cpu_op"``: from the
    keyed operator's first input (chat jobs; its ``open()`` not counted)."""
    return (res.get(window) or {}).get(field)


def _best(runs: list[dict[str, Any]], n: int) -> dict[str, Any]:
    ok = [r for r in runs if "error" not in r and r["count"] == n]
    return max(ok, key=lambda r: r["rps"]) if ok else {}


def _least_cpu(runs: list[dict[str, Any]]) -> float | None:
    got = [c for c in (_cpu(r) for r in runs if "error" not in r) if c]
    return min(got) if got else None


def bench_p2(cfg: dict[str, Any]) -> tuple[dict[str, Any], Table]:
    rows = []
    n = scaled(cfg["records"])
    keys = min(cfg["keys"], n)
    variants = {"bare": ("bare", True), "echo": ("echo", True)}
    if cfg.get("metrics_off"):
        variants["echo_off"] = ("echo", False)
    for mode, par in cfg["configs"]:
        runs: dict[str, list[dict[str, Any]]] = {v: [] for v in ("echo", "bare", "echo_off")}
        for _ in range(cfg["repeats"]):  # interleaved
            for variant, (kind, metrics) in variants.items():
                spec = {"kind": kind, "mode": mode, "parallelism": par, "records": n,
                        "keys": keys, "max_in_flight": 32, "metrics": metrics}
                runs[variant].append(_run_logged(spec))

        a, b, off = (_best(runs[v], n) for v in ("echo", "bare", "echo_off"))
        a_cpu, b_cpu, off_cpu = (_least_cpu(runs[v]) for v in ("echo", "bare", "echo_off"))
        everything = [r for v in runs.values() for r in v]
        row = {
            "mode": mode, "parallelism": par, "records": n, "keys": keys,
            "agent_rps": a.get("rps"), "bare_rps": b.get("rps"),
            "ratio": (a["rps"] / b["rps"]) if a and b else None,
            "agent_cpu_us": a_cpu, "bare_cpu_us": b_cpu,
            "cpu_ratio": a_cpu / b_cpu if a_cpu and b_cpu else None,
            "agent_thread": (a.get("cpu") or {}).get("busiest_thread"),
            "metrics_off_rps": off.get("rps"), "metrics_off_cpu_us": off_cpu,
            "metrics_cost_pct": (100 * (off["rps"] / a["rps"] - 1)) if a and off else None,
            "metrics_cpu_pct": (100 * (a_cpu / off_cpu - 1)) if a_cpu and off_cpu else None,
            "agent_startup_s": a.get("startup_s"), "bare_startup_s": b.get("startup_s"),
            "agent_process_s": a.get("process_wall_s"), "bare_process_s": b.get("process_wall_s"),
            "max_load1": max(r.get("load1", 0) for r in everything),
            "other_cores": max(r.get("other_cores", 0) for r in everything),
            "other_cores_agent_bare": "{:.2f} / {:.2f}".format(
                a.get("other_cores", float("nan")), b.get("other_cores", float("nan"))),
            "runs": everything,
        }
        rows.append(row)
        log(f"p2 {mode} p={par}: operator thread {a_cpu or float('nan'):.1f} us/rec vs bare "
            f"{b_cpu or float('nan'):.1f}; metrics off {off_cpu or float('nan'):.1f} us/rec")
    table = Table(
        "P2 Flink operator: echo agent vs bare KeyedProcessFunction",
        [("mode", "mode"), ("parallelism", "par"), ("records", "records"),
         ("agent_rps", "agent rec/s"), ("bare_rps", "bare rec/s"), ("ratio", "agent/bare"),
         ("agent_cpu_us", "agent op us/rec"), ("bare_cpu_us", "bare op us/rec"),
         ("cpu_ratio", "op CPU agent/bare"),
         ("metrics_off_rps", "metrics off rec/s"), ("metrics_off_cpu_us", "metrics off us/rec"),
         ("metrics_cpu_pct", "metrics CPU +%"), ("metrics_cost_pct", "metrics rec/s cost %"),
         ("agent_startup_s", "agent start s"),
         ("max_load1", "load1"), ("other_cores_agent_bare", "others' cores agent / bare")],
        rows,
        note=("rec/s = outputs / (last output stamp - first input stamp), so JVM start, submission "
              "and deployment are excluded (shown as 'start s': execute() to first input). "
              "'op us/rec' = CPU of the operator thread per output: the busiest JVM thread "
              "(thread mode: the keyed operator's task thread, running the Python function and "
              "its chained stamping map), utime+stime from /proc/<jvm>/task/*/stat sampled every "
              "0.25 s, between the first sample after the first input and the last before the "
              "last output, over the outputs stamped in between; least of the repeats (process "
              "mode: the Java side only, the Python worker is another process). 'metrics off' = "
              "the same echo job with metrics=False; 'metrics CPU +%' = op CPU on over off, "
              "'metrics rec/s cost %' = rec/s off over on, minus 1. "
              "Job: NumberSequenceSource -> map {key,n,t} -> key_by -> process -> map (t_in,t_out) "
              "-> execute_and_collect, 100 keys; best of the repeats, interleaved. "
              "Noise: load1 = highest 1-min load average before a job; others' cores = CPU (in "
              "cores, of 2) that processes outside the job took during the reported agent / "
              "bare job (other engineers' jobs): above ~0.3 the figure is depressed."),
    )
    return {"config": {**cfg, "configs": [list(c) for c in cfg["configs"]]}, "rows": rows,
            "note": table.note}, table


# -- P3 --------------------------------------------------------------------------------------
def _p3_row(runner: str, keys: int, limit: int, wall: float, latency: float,
            extra: dict[str, Any], inputs_per_key: int = 1) -> dict[str, Any]:
    n = keys * inputs_per_key
    ideal = min(limit, keys) / latency  # one chat per key at a time
    waves = n / (math.ceil(keys / limit) * inputs_per_key * latency)
    chats = n / wall if wall and wall > 0 else float("nan")
    return {"runner": runner, "keys": keys, "inputs_per_key": inputs_per_key, "chats": n,
            "limit": limit, "wall_s": wall, "chats_per_s": chats, "ideal_per_s": ideal,
            "ideal_waves_per_s": waves, "pct_of_ideal": 100 * chats / ideal,
            "pct_of_waves": 100 * chats / waves, **extra}


def bench_p3(cfg: dict[str, Any]) -> tuple[dict[str, Any], Table]:
    from ._agents import LATENCY_S
    from ._local import time_local_chats

    rows = []
    keys = scaled(cfg["local_keys"])
    for limit in cfg["local_limits"]:
        r = time_local_chats(keys, limit)
        row = _p3_row("local", keys, limit, r["wall_s"], LATENCY_S, {})
        rows.append(row)
        log(f"p3 local keys={keys} limit={limit}: {row['chats_per_s']:.1f} chats/s "
            f"({row['pct_of_ideal']:.0f}% of {row['ideal_per_s']:.0f})")
    fkeys = scaled(cfg["flink_keys"])
    mode = cfg["flink_mode"]
    flink_runs = [(fkeys, 1, limit, False) for limit in cfg["flink_limits"]]
    flink_runs += [(scaled(k), 1, limit, True) for k, limit in cfg.get("unbounded", [])]
    multi = cfg.get("multi")
    if multi:
        mkeys, ipk = scaled(multi["keys"]), multi["inputs_per_key"]
        r = time_local_chats(mkeys, multi["limit"], ipk)
        rows.append(_p3_row("local", mkeys, multi["limit"], r["wall_s"], LATENCY_S, {}, ipk))
        flink_runs.append((mkeys, ipk, multi["limit"], False))
    steady = cfg.get("steady")
    if steady:
        flink_runs.append((scaled(steady["keys"]), steady["inputs_per_key"], steady["limit"],
                           True))
    timeout = float(os.environ.get("BENCH_P3_TIMEOUT_S", "600"))
    for fk, ipk, limit, unbounded in flink_runs:
        spec = {"kind": "chat", "mode": mode, "parallelism": 1, "records": fk * ipk, "keys": fk,
                "max_in_flight": limit, "unbounded": unbounded}
        runner = f"flink-{mode}" + (" unbounded" if unbounded else "")
        log(f"flink job: {_desc(spec)}{' unbounded' if unbounded else ''} ...")
        res = run_flink_job(spec, timeout_s=timeout)
        if "error" in res:
            log(f"  FAILED: {res['error']}")
            rows.append({"runner": runner, "keys": fk, "inputs_per_key": ipk,
                         "limit": limit, "error": res["error"][:300]})
            continue
        extra = {k: res.get(k) for k in ("count", "failed", "startup_s", "first_out_s",
                                         "p50_out_s", "p90_out_s", "process_wall_s", "load1",
                                         "other_cores", "job_cores", "other_java_frac")}
        extra["op_us_per_call"] = _cpu(res)
        extra["op_cores"] = _cpu(res, "thread_cores")
        if mode == "thread":  # the floor: a hand-written function, the same job shape
            log("  the same with the bare chat function (bench._bare.BareChat) ...")
            bare = run_flink_job({**spec, "kind": "bare_chat"}, timeout_s=timeout)
            ours_op = extra["op_us_per_call_op"] = _cpu(res, window="cpu_op")
            bare_op = extra["bare_us_per_call_op"] = (_cpu(bare, window="cpu_op")
                                                      if "error" not in bare else None)
            if ours_op and bare_op:
                extra["op_over_bare"] = ours_op / bare_op
        row = _p3_row(runner, fk, limit, res["window_s"], LATENCY_S, extra, ipk)
        log(f"  {row['chats_per_s']:.0f} chats/s = {row['pct_of_waves']:.0f}% of the ideal wave "
            f"rate; operator {extra['op_us_per_call'] or float('nan'):.0f} us CPU per call, "
            f"{extra.get('op_us_per_call_op') or float('nan'):.0f} from its first input, the "
            f"bare function's {extra.get('bare_us_per_call_op') or float('nan'):.0f}")
        rows.append(row)
    table = Table(
        f"P3 slow model ({LATENCY_S * 1000:.0f} ms chat): chats/s vs ideal, operator CPU vs "
        "a bare function",
        [("runner", "runner"), ("keys", "keys"), ("inputs_per_key", "in/key"),
         ("limit", "max_in_flight"),
         ("wall_s", "wall s"), ("chats_per_s", "chats/s"), ("ideal_per_s", "ideal /s"),
         ("ideal_waves_per_s", "ideal (waves)"), ("pct_of_ideal", "% of ideal"),
         ("pct_of_waves", "% of waves"), ("op_us_per_call", "op us/call"),
         ("op_us_per_call_op", "op us/call from op"),
         ("bare_us_per_call_op", "bare us/call from op"), ("op_over_bare", "op/bare"),
         ("op_cores", "op cores"),
         ("p50_out_s", "p50 out s"), ("p90_out_s", "p90 out s"), ("other_cores", "others' cores")],
        rows,
        note=("chat = ChatRequestEvent -> built-in chat action -> async ChatModelConnection "
              "(asyncio.sleep 0.2) -> ChatResponseEvent -> output. ideal = min(limit, keys) / "
              "0.2 s; 'ideal (waves)' = chats / (ceil(keys/limit) * in/key * 0.2 s). "
              "'% of waves' = chats/s over the ideal wave rate. 'unbounded': the numbers are "
              "unioned with a source that never ends (no end-of-input drain: completions reach "
              "the operator through its wake-ups only); the job is cancelled after the last "
              "output. 'op us/call' = CPU of the operator thread (busiest JVM thread, from "
              "/proc, as in P2) per chat, 'op cores' its share of a core over the window; "
              "'from op': the same from the keyed operator's first input (its open() not "
              "counted), 'bare': the same for the floor, a hand-written KeyedProcessFunction "
              "doing a durable chat's least work (bench._bare.BareChat: the pending call in "
              "keyed state, the call on an asyncio thread, one timer wake-up, a key switch per "
              "completion), run after ours in the same job shape. "
              "Local: wall of run(). Flink: first input stamp "
              "to last output stamp (start-up excluded), parallelism 1; p50/p90 out = when half / "
              "90% of the outputs had left the operator. On bounded input most work happens in "
              "the end-of-input drain; in thread mode it takes turns across keys (each key's "
              "drain timer re-registers itself), so keys overlap there too; what remains below "
              "the ideal is the timer round trips and the load of other processes ('others' "
              "cores'). Process mode's drain works every busy key at once too."),
    )
    return {"config": cfg, "rows": rows, "note": table.note}, table


# -- main ------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a few minutes on 2 cores)")
    ap.add_argument("--only", default=",".join(ALL),
                    help="comma list of p1,p2,p3,p4,p5,flow,start,waits (default: all) and "
                         "scaleout")
    ap.add_argument("--out", default=str(BENCH_DIR / "results.json"), help="JSON output file")
    ap.add_argument("--latest-md", default=str(BENCH_DIR / "LATEST.md"),
                    help="markdown written by --quick runs at BENCH_SCALE=1 ('' to skip)")
    args = ap.parse_args(argv)
    only = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = [p for p in only if p not in ALL + OPTIONAL]
    if unknown:
        ap.error(f"unknown benchmark(s) {unknown}; choose from {','.join(ALL + OPTIONAL)}")

    cfg = config(args.quick, scaleout="scaleout" in only)
    meta = machine_info(ROOT)
    meta.update(quick=args.quick, scale=scale(), only=only, argv=sys.argv[1:])
    results: dict[str, Any] = {"meta": meta}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tables: dict[str, Any] = {}
    from ._flow import bench_flow
    from ._p4 import bench_p4
    from ._p5 import bench_p5
    from ._start import bench_start
    from ._waits import bench_waits

    runners: dict[str, Any] = {"p1": bench_p1, "p2": bench_p2, "p3": bench_p3, "p4": bench_p4,
                               "p5": bench_p5, "flow": bench_flow,
                               "start": bench_start, "waits": bench_waits}
    if "scaleout" in only:
        from ._scaleout import bench_scaleout

        runners["scaleout"] = bench_scaleout
    t0 = time.time()
    for name in [p for p in ALL + OPTIONAL if p in only]:
        t = time.time()
        data, table = runners[name](cfg[name])
        data["elapsed_s"] = time.time() - t
        results[name] = data
        tables[name] = table
        print("\n" + table.text() + "\n", flush=True)
        out.write_text(json.dumps(results, indent=2, default=str))  # partial results survive
    meta["elapsed_s"] = time.time() - t0
    meta["loadavg_end"] = list(os.getloadavg())
    out.write_text(json.dumps(results, indent=2, default=str))
    print(f"wrote {out} ({meta['elapsed_s']:.0f} s)", flush=True)
    if args.quick and scale() == 1 and args.latest_md:
        shown, skip = [], False
        for a in sys.argv[1:]:  # the output paths say nothing about the figures
            if skip or a.startswith(("--out=", "--latest-md=")):
                skip = False
                continue
            if a in ("--out", "--latest-md"):
                skip = True
                continue
            shown.append(a)
        command = "python -m bench " + " ".join(shown)
        write_latest_md(Path(args.latest_md), meta,
                        {k: t.markdown() for k, t in tables.items()}, command.strip())
        print(f"wrote {args.latest_md}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
