"""The minutes a user waits, as the benchmarks print them (issue 31).

``python -m bench --quick --only start``: one-record Flink jobs (ours and a bare PyFlink
job, three of each, interleaved), each in a process of its own; ``bench.default_run``: the
main job's memory with its targets, and where its wall time went (from its event log).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.flink
@pytest.mark.timeout(900)
def test_start_row_compares_one_record_jobs_with_target(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("pyflink")
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", "start", "--out", str(out),
         "--latest-md", ""],
        cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=850)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Start-up: a one-record Flink job" in proc.stdout
    assert "<= 1.1x" in proc.stdout  # the target is printed with the row
    data = json.loads(out.read_text())
    assert set(data) == {"meta", "start"}
    bare, ours = data["start"]["rows"]
    assert (bare["kind"], ours["kind"]) == ("bare", "agent")
    for row in (bare, ours):
        # three of each even in the quick suite: one job's wall time moves by 5-15 % from
        # run to run, as much as the difference measured
        assert row["runs"] == 3 and row["failed"] == 0, data["start"]["runs"]
        fastest, slowest = (float(x) for x in row["spread_s"].split("-"))
        assert fastest <= row["wall_s"] <= slowest, row
        assert 0 < row["client_cpu_s"] < row["cpu_s"], row  # the client is part of the tree
        # the phases happen in order, inside the process's wall time
        phases = [row[k] for k in ("imported_s", "env_s", "graph_s", "first_out_s",
                                   "job_end_s", "wall_s")]
        assert all(p > 0 for p in phases), row
        assert phases == sorted(phases), row
        assert row["cpu_s"] > 1, row  # a JVM was started and ran the job
    # each job collected exactly its one record (checked by the benchmark: a wrong output
    # is a failed run)
    runs = data["start"]["runs"]
    for kind in ("bare", "agent"):
        assert [run["outputs"] for run in runs[kind]] == [[0]] * 3, runs[kind]
    # the bare job is PyFlink alone: it never imported flink_agents_py
    assert {run["imported_ours"] for run in runs["bare"]} == {False}
    assert {run["imported_ours"] for run in runs["agent"]} == {True}
    assert data["start"]["ratio"] == pytest.approx(ours["wall_s"] / bare["wall_s"])
    # each round's two jobs ran next to each other, and its ratio is theirs
    assert ours["pairs"] == [
        pytest.approx(a["process_wall_s"] / b["process_wall_s"], abs=1e-3)
        for b, a in zip(runs["bare"], runs["agent"], strict=True)]
    assert "ours/bare by round" in proc.stdout
    assert ours["cpu_ratio"] == pytest.approx(ours["cpu_s"] / bare["cpu_s"])
    assert ours["target"] == "<= 1.1x" and ours["met"] in ("yes", "NO")


@pytest.mark.flink
@pytest.mark.timeout(900)
def test_default_run_prints_memory_and_targets(tmp_path: pathlib.Path) -> None:
    """``bench.default_run`` on a small scripted run: the peak RSS of the job tree and of each
    process (the JVM holds the workers in thread mode), each row with its target."""
    pytest.importorskip("pyflink")
    out = tmp_path / "default-run.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.default_run", "--out", str(out), "--",
         "--limit", "5", "--model", "scripted"],
        cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=850)
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(out.read_text())["figures"]
    by_process = figures["peak_rss_by_process"]
    assert by_process.get("java", 0) > 100 * 2**20, by_process  # the MiniCluster's JVM
    assert figures["peak_rss_bytes"] >= max(by_process.values())
    assert figures["reviews"] == 5
    def line(measure: str) -> str:
        [found] = [x for x in proc.stdout.splitlines() if x.strip().startswith(measure)]
        return found

    assert "<= 480 s" in line("wall time (s), start-up included")
    assert "regression" in line("peak RSS of the job tree (GB)")
    assert "java" in line("peak RSS by process (GB)")


@pytest.mark.timeout(300)
def test_default_run_where_the_time_went(tmp_path: pathlib.Path) -> None:
    """``--where`` reads the job's event log: the model calls per role add up to the calls
    the job made, and the phases fit inside the wall time."""
    out = tmp_path / "default-run.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.default_run", "--where", "--out", str(out), "--",
         "--runner", "local", "--model", "scripted", "--limit", "8"],
        cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(out.read_text())["figures"]
    where = figures["where"]
    calls = where["calls"]
    assert set(calls) == {"review_model", "advice_model"}, calls  # rating, advice
    # one rating call per review the chat model rated (the scripted model has no cache)
    assert calls["review_model"]["count"] == figures["model_rated"] == 8
    assert calls["advice_model"]["count"] >= figures["final_advice_rows"] > 0
    assert all(c["output_tokens"] > 0 and c["mean_ms"] >= 0 for c in calls.values())
    parts = [where[k] for k in ("startup_s", "runs_s", "tail_s")]
    assert all(p >= 0 for p in parts), where
    assert sum(parts) <= figures["wall_s"] + 0.2, (where, figures["wall_s"])
    # each call's own time counted once: together no more than the span of the runs
    assert sum(c["busy_s"] for c in calls.values()) <= where["runs_s"] + 0.2, where
    assert "where: review_model calls" in proc.stdout


def test_where_time_went_counts_each_call_once_behind_the_model_lock(
        tmp_path: pathlib.Path) -> None:
    """Calls queued on one loaded model: each call's own time excludes its wait; the files
    each Flink subtask wrote beside the path are read too."""
    from bench.default_run import where_time_went

    def call(name: str, start: float, end: float, tokens: int,
             cached: bool = False) -> dict[str, object]:
        record = {"ts": end, "kind": "call_finished", "call_kind": "chat_model", "name": name,
                  "duration_ms": (end - start) * 1000,
                  "usage": {"input_tokens": 10 * tokens, "output_tokens": tokens}}
        return {**record, "cached": True} if cached else record

    t0 = 1000.0
    sub0 = [{"ts": t0 + 5, "kind": "run_started"}, call("rate", t0 + 6, t0 + 16, 3),
            {"ts": t0 + 31, "kind": "output"}]
    sub1 = [{"ts": t0 + 7, "kind": "run_started"},
            call("advise", t0 + 7, t0 + 26, 9),   # waited 9 s for "rate", then 10 s its own
            call("rate", t0 + 27, t0 + 30, 1),    # the model idle 1 s before it
            call("rate", t0 + 30, t0 + 30, 3, cached=True),  # the connection's cache answered
            {"ts": t0 + 30.5, "kind": "output"}]
    for n, records in enumerate((sub0, sub1)):
        (tmp_path / f"events-{n}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in records))
    got = where_time_went(tmp_path / "events.jsonl", t0, t0 + 33)
    assert got["startup_s"] == 5 and got["runs_s"] == 26 and got["tail_s"] == 2
    assert got["first_call_s"] == 10
    # tokens are the model's work: a cached answer's are not counted again
    assert got["calls"]["rate"] == {"count": 3, "cached": 1, "busy_s": 13.0, "waited_s": 0.0,
                                    "input_tokens": 40, "output_tokens": 4, "mean_ms": 4333.3,
                                    "answered_mean_ms": 6500.0}
    assert got["calls"]["advise"] == {"count": 1, "cached": 0, "busy_s": 10.0,
                                      "waited_s": 9.0, "input_tokens": 90, "output_tokens": 9,
                                      "mean_ms": 10000.0, "answered_mean_ms": 10000.0}
    with pytest.raises(FileNotFoundError):
        where_time_went(tmp_path / "missing.jsonl", t0, t0 + 1)


@pytest.mark.parametrize("kind", ["chat", "echo"])
def test_the_operator_harness_runs_every_record_through_the_operator(kind, capsys):
    # ``python -m bench._op_harness``: the operator under fake keyed state, key backend and
    # timers, as a thread-mode TaskManager drives it (chats wake up through the pump)
    pytest.importorskip("pyflink")
    from bench import _op_harness

    assert _op_harness.main(["--kind", kind, "--records", "60", "--keys", "20",
                             "--metrics", "--profile", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert f"{kind}: 60 records over 20 keys, metrics on: 60 outputs" in out
    assert "us per record, open()" in out and "Python calls per record" in out
