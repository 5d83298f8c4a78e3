"""The main job's default run, measured: wall time, CPU, peak memory, agreement, LLM share.

    python -m bench.default_run [--out bench/default-run.json] [-- JOB ARGS...]
    python -m bench.default_run --from-output out/review_analysis.jsonl   # figures of a run
    python -m bench.default_run --where -- --limit 50   # and where the time went

Runs ``python -m jobs.review_analysis`` (the README's ``make run``: Flink runner, embedded
model, the 3,163 shipped reviews, unless JOB ARGS say otherwise) as a subprocess and samples
its whole process tree every 0.5 s: the driver, the JVM of the MiniCluster and the Python
worker it starts, which holds the model. Prints one table and writes it as JSON.

- wall time (s) includes the JVM's start-up and the model's load;
- peak RSS / PSS (bytes): the largest sum over the tree in one sample (PSS from
  ``/proc/<pid>/smaps_rollup``: shared pages counted once, so it is the fairer total), and
  each process's own peak RSS by its command name (``java``: the MiniCluster's JVM, which in
  thread mode also runs the Python workers and so holds the model; ``python``: the driver);
- CPU (s): user + system time of every process of the tree, and ``others' cores`` (how busy
  the machine was with work outside the job, see ``bench._report.CpuWatch``);
- agreement: the share of labels within 1 of the run's score, for the human dev labels
  (``../shared/data/review_labels_dev.jsonl``, when present) and the proxy labels of
  ``bench/labels`` (see its README), overall and on labels <= 3;
- how many reviews the chat model rated, for how many distinct texts (the rating calls it
  made), and the advice rows (see ``output_figures``).

``--where`` also writes the job's event log (``--event-log``) and reads from it where the
wall time went (see ``where_time_went``): the start-up before the first run, the model calls
by role (rating prompts, advice), the first call's extra time (the model's load), and the
tail after the last output (the drain and the shutdown).

Each row prints its target (issue 31: wall time <= 8 min on an idle 2-core machine; peak
memory has none, a rise over the last figure in the docs is a regression to name). Nothing
is asserted: this is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from jobs.review_analysis import DEFAULT_INPUT

from ._report import CpuWatch, Table, _descends, _processes, machine_info

ROOT = Path(__file__).resolve().parent.parent
DEV_LABELS = ROOT.parent / "shared" / "data" / "review_labels_dev.jsonl"
PROXY_LABELS = ROOT / "bench" / "labels"
SAMPLE_S = 0.5
TARGETS = {"wall": "<= 480 s for the 3,163 reviews, idle 2 cores (issue 31)",
           "memory": "none; above the docs' last figure is a regression"}
"""What each measured row of the table aims at (printed beside it)."""


def _memory(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of one process in bytes; (0, 0) once it is gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0, 0
    fields = {}
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 2 and parts[1].isdigit():
            fields[parts[0].rstrip(":")] = int(parts[1]) * 1024
    return fields.get("Rss", 0), fields.get("Pss", 0)


def label_sets() -> dict[str, list[dict[str, Any]]]:
    """name -> labels (``{"line", "score"}`` dicts): the human dev labels of ``../shared``
    when present, and the proxy labels of ``bench/labels`` (see its README)."""
    files = ([DEV_LABELS] if DEV_LABELS.exists() else []) + sorted(PROXY_LABELS.glob("*.jsonl"))
    return {f.stem: [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
            for f in files}


def agreement(scores: dict[int, int], labels: list[dict[str, Any]]) -> dict[str, Any]:
    """Agreement (``|score - label| <= 1``) of ``scores`` (line -> score) with ``labels`` on
    the lines the run rated (all of them unless the job ran with ``--limit``): overall, and
    on the mixed and negative labels (<= 3).

    Returns:
        ``{"n", "agreement", "n_le3", "agreement_le3"}``; an agreement is ``None`` when no
        labelled line was rated.
    """
    def share(subset: list[dict[str, Any]]) -> float | None:
        hits = sum(1 for lab in subset if abs(scores[lab["line"]] - lab["score"]) <= 1)
        return round(hits / len(subset), 3) if subset else None

    covered = [lab for lab in labels if lab["line"] in scores]
    low = [lab for lab in covered if lab["score"] <= 3]
    return {"n": len(covered), "agreement": share(covered),
            "n_le3": len(low), "agreement_le3": share(low)}


def run(job_args: list[str], where: bool = False) -> dict[str, Any]:
    """Run the job once with ``job_args`` and return its figures (see the module docstring).

    ``where``: also write the job's event log and add ``where_time_went``'s figures (key
    ``where``).

    Raises:
        RuntimeError: when the job exits with a non-zero status (its stderr tail included).
    """
    out_dir = Path(tempfile.mkdtemp(prefix="default-run-"))
    output = out_dir / "review_analysis.jsonl"
    if "--output" not in job_args:
        job_args = [*job_args, "--output", str(output)]
    else:
        output = Path(job_args[job_args.index("--output") + 1])
    log_path = out_dir / "job.stderr"
    events = out_dir / "events.jsonl"
    if where:
        job_args = [*job_args, "--event-log", str(events)]
    t_epoch = time.time()
    watch = CpuWatch()
    peak_rss = peak_pss = 0
    peak_by_name: dict[str, int] = {}
    t0 = time.monotonic()
    with log_path.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "jobs.review_analysis", "--no-progress",
                                 *job_args], cwd=ROOT, stdout=err, stderr=err)
        while proc.poll() is None:
            procs = _processes()
            tree = [p for p in procs if _descends(procs, p, proc.pid)]
            mem = [_memory(p) for p in tree]
            for pid, m in zip(tree, mem, strict=True):
                name = procs[pid][1]
                peak_by_name[name] = max(peak_by_name.get(name, 0), m[0])
            peak_rss = max(peak_rss, sum(m[0] for m in mem))
            peak_pss = max(peak_pss, sum(m[1] for m in mem))
            watch.sample(proc.pid)
            time.sleep(SAMPLE_S)
    wall = time.monotonic() - t0
    cpu = watch.result()
    stderr = log_path.read_text()
    if proc.returncode != 0:
        raise RuntimeError(f"the job exited {proc.returncode}:\n{stderr[-3000:]}")
    more = {"where": where_time_went(events, t_epoch, t_epoch + wall)} if where else {}
    return {"job_args": job_args, "wall_s": round(wall, 1), **more,
            "job_cpu_s": round(cpu["job_cores"] * wall, 1),
            "others_cores": round(cpu["other_cores"], 2),
            "peak_rss_bytes": peak_rss, "peak_pss_bytes": peak_pss,
            "peak_rss_by_process": peak_by_name,
            **output_figures(output, _input_of(job_args))}


def where_time_went(event_log: Path, t_start: float, t_end: float) -> dict[str, Any]:
    """Where a run's wall time went, from its event log (``--event-log``).

    Args:
        event_log: the job's event log (JSON lines, see ``flink_agents_py.observability``);
            on Flink, the files each subtask wrote beside it are read.
        t_start: when the job's process started (epoch seconds).
        t_end: when it ended (epoch seconds).

    Returns:
        ``startup_s`` (process start to the first run), ``tail_s`` (last output to the
        process's end: the end-of-input drain and the shutdown), ``runs_s`` (first run to
        last output), ``first_call_s`` (the first model call: the model's load is in it), and
        ``calls``: per model role (the chat model resource's name), ``count``, ``busy_s``
        (the model's busy time, each moment counted once: calls queue on the loaded model,
        so the part of a call before the end of the call that finished before it is left
        out, as ``waited_s``; with two contexts answering side by side that part is
        overlap, and the role's share is of the time the model was busy),
        ``mean_ms`` (busy time per call), ``cached`` (calls the connection answered from its
        cache of identical requests), ``input_tokens`` and ``output_tokens`` (of the calls
        the model answered, not the cached ones).

    Raises:
        OSError: when the event log cannot be read.
    """
    # on Flink each subtask writes its own file beside the path: <stem>-<subtask><suffix>
    files = [f for f in (event_log, *sorted(event_log.parent.glob(
        f"{event_log.stem}-*{event_log.suffix}"))) if f.exists()]
    if not files:
        raise FileNotFoundError(f"no event log at {event_log} (nor one per subtask beside it)")
    records = [json.loads(x) for f in files for x in f.read_text().splitlines() if x.strip()]
    runs = [r["ts"] for r in records if r["kind"] == "run_started"]
    outputs = [r["ts"] for r in records if r["kind"] == "output"]
    calls = [r for r in records if r["kind"] == "call_finished" and r.get("call_kind")
             == "chat_model" and r.get("duration_ms") is not None]
    # One loaded model answers one call at a time (a lock), so calls wait on each other: a
    # call's own service time is from its start, or the end of the call before it if that
    # was later, to its end (calls taken in the order they finished).
    by_role: dict[str, dict[str, Any]] = {}
    prev_end = float("-inf")
    for c in sorted(calls, key=lambda c: c["ts"]):
        end, start = c["ts"], c["ts"] - c["duration_ms"] / 1000
        role = by_role.setdefault(str(c.get("name")), {"count": 0, "busy_s": 0.0,
                                                       "waited_s": 0.0, "cached": 0,
                                                       "input_tokens": 0, "output_tokens": 0})
        service = max(0.0, end - max(start, prev_end))
        prev_end = max(prev_end, end)
        role["count"] += 1
        role["busy_s"] += service
        role["waited_s"] += c["duration_ms"] / 1000 - service
        if c.get("cached"):
            role["cached"] += 1
            continue
        usage = c.get("usage") or {}
        role["input_tokens"] += int(usage.get("input_tokens") or 0)
        role["output_tokens"] += int(usage.get("output_tokens") or 0)
    for role in by_role.values():
        role["mean_ms"] = round(role["busy_s"] / role["count"] * 1000, 1)
        answered = role["count"] - role["cached"]
        role["answered_mean_ms"] = (round(role["busy_s"] / answered * 1000, 1) if answered
                                    else None)
        role["busy_s"] = round(role["busy_s"], 1)
        role["waited_s"] = round(role["waited_s"], 1)
    first = min(calls, key=lambda c: c["ts"] - c["duration_ms"] / 1000, default=None)
    return {
        "startup_s": round(min(runs) - t_start, 1) if runs else None,
        "runs_s": round(max(outputs) - min(runs), 1) if runs and outputs else None,
        "tail_s": round(t_end - max(outputs), 1) if outputs else None,
        "first_call_s": round(first["duration_ms"] / 1000, 2) if first else None,
        "calls": by_role,
    }


def _input_of(job_args: list[str]) -> Path:
    return (Path(job_args[job_args.index("--input") + 1]) if "--input" in job_args
            else DEFAULT_INPUT)


def output_figures(output: Path, input_path: Path = DEFAULT_INPUT) -> dict[str, Any]:
    """Figures of one finished run, from its output file (and its input, for the texts).

    Returns a dict: ``reviews`` (review rows), ``model_rated`` (reviews the chat model rated,
    from the increments of ``model_rated`` in each product's summaries), ``model_texts``
    (distinct review texts among those: the rating calls the model made, as identical
    requests are answered from the connection's cache), ``advice_rows``,
    ``final_advice_rows``, ``errors`` and ``agreement`` (see ``agreement``, per label set).

    Raises:
        OSError: when ``output`` cannot be read.
    """
    rows = [json.loads(x) for x in output.read_text().splitlines() if x.strip()]
    reviews = {r["line"]: r["score"] for r in rows if r["kind"] == "review"}
    rated_so_far: dict[str, int] = {}
    model_lines = []
    for r in rows:  # sorted by line: a summary follows its review
        if r["kind"] == "product_summary":
            if r.get("model_rated", 0) > rated_so_far.get(r["id"], 0):
                model_lines.append(r["line"])
            rated_so_far[r["id"]] = r.get("model_rated", 0)
    texts: set[str] = set()
    if input_path.exists():
        lines = input_path.read_text().splitlines()
        texts = {json.loads(lines[n])["review"] for n in model_lines if n < len(lines)}
    advice = [r for r in rows if r["kind"] == "product_advice"]
    errors = output.with_suffix(".errors.jsonl")
    return {
        "reviews": len(reviews),
        "model_rated": len(model_lines),
        "model_texts": len(texts) if input_path.exists() else None,
        "advice_rows": len(advice),
        "final_advice_rows": sum(1 for a in advice if a.get("final")),
        "errors": (sum(1 for x in errors.read_text().splitlines() if x.strip())
                   if errors.exists() else 0),
        "output": str(output),
        "agreement": {name: agreement(reviews, labels)
                      for name, labels in label_sets().items()},
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    job_args: list[str] = []
    if "--" in argv:
        job_args = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        usage="python -m bench.default_run [-h] [--out OUT] [--from-output PATH] [-- JOB ARGS...]",
        epilog="JOB ARGS after -- go to python -m jobs.review_analysis (default: none, as make "
               "run). Human dev labels are read from ../shared/data/review_labels_dev.jsonl, "
               "the team's folder beside the repository, when it exists.")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "default-run.json",
                   help="where to write the figures as JSON")
    p.add_argument("--where", action="store_true",
                   help="also write the job's event log and show where the wall time went")
    p.add_argument("--from-output", type=Path, default=None, metavar="PATH",
                   help="run nothing: report the output figures of a finished run's output "
                        "file (e.g. out/review_analysis.jsonl of make run)")
    args = p.parse_args(argv)
    gb = 1024 ** 3
    rows: list[dict[str, Any]] = []
    if args.from_output is not None:
        figures = output_figures(args.from_output, _input_of(job_args))
    else:
        figures = run(job_args, where=args.where)
        by_process = ", ".join(
            f"{name} {peak / gb:.2f}" for name, peak in
            sorted(figures["peak_rss_by_process"].items(), key=lambda kv: -kv[1])[:4])
        rows += [
            {"measure": "wall time (s), start-up included", "value": figures["wall_s"],
             "target": TARGETS["wall"]},
            {"measure": "CPU time of the job tree (s)", "value": figures["job_cpu_s"]},
            {"measure": "others' cores while it ran", "value": figures["others_cores"]},
            {"measure": "peak RSS of the job tree (GB)",
             "value": round(figures["peak_rss_bytes"] / gb, 2), "target": TARGETS["memory"]},
            {"measure": "peak PSS of the job tree (GB)",
             "value": round(figures["peak_pss_bytes"] / gb, 2), "target": TARGETS["memory"]},
            {"measure": "peak RSS by process (GB)", "value": by_process},
        ]
        w = figures.get("where")
        if w:
            rows += [
                {"measure": "where: start-up to the first run (s)", "value": w["startup_s"]},
                {"measure": "where: first run to the last output (s)", "value": w["runs_s"]},
                {"measure": "where: last output to the end (drain, shutdown) (s)",
                 "value": w["tail_s"]},
                {"measure": "where: the first model call, the model's load in it (s)",
                 "value": w["first_call_s"]},
            ]
            rows += [{"measure": f"where: {role} calls (count, cached, busy s, mean ms of the "
                                 "others, in / out tokens)",
                      "value": f"{c['count']}, {c['cached']}, {c['busy_s']}, "
                               f"{c['answered_mean_ms']}, "
                               f"{c['input_tokens']} / {c['output_tokens']}"}
                     for role, c in sorted(w["calls"].items())]
    rows += [
        {"measure": "reviews rated / by the chat model / distinct texts for it", "value":
            f"{figures['reviews']} / {figures['model_rated']} / {figures['model_texts']}"},
        {"measure": "advice rows (final)", "value":
            f"{figures['advice_rows']} ({figures['final_advice_rows']})"},
        {"measure": "error rows", "value": figures["errors"]},
    ]
    for name, a in figures["agreement"].items():
        rows.append({"measure": f"agreement, {name} ({a['n']} labels; {a['n_le3']} <= 3)",
                     "value": f"{a['agreement']} ({a['agreement_le3']})"})
    print(Table("main job, default run",
                [("measure", "measure"), ("value", "value"), ("target", "target")],
                rows).text())
    args.out.write_text(json.dumps({"machine": machine_info(ROOT), "figures": figures},
                                   indent=2) + "\n")
    print(f"written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
