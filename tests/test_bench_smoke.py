"""Smoke test of the benchmark suite: ``python -m bench --quick --only p1`` at a tiny scale."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(60)

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_bench_p1_quick_writes_json(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "results.json"
    env = {**os.environ, "BENCH_SCALE": "0.05"}
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", "p1", "--out", str(out),
         "--latest-md", ""],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=50,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "P1 local runner" in proc.stdout
    data = json.loads(out.read_text())
    assert data["meta"]["quick"] is True and data["meta"]["scale"] == 0.05
    assert set(data) == {"meta", "p1"}
    [row] = data["p1"]["rows"]
    for key in ("records", "keys", "agent_rps", "baseline_rps", "ratio",
                "agent_us_per_record", "baseline_us_per_record"):
        assert key in row, key
    assert row["records"] == 500
    assert row["agent_rps"] > 0 and row["baseline_rps"] > 0


def test_default_run_labels_point_at_shipped_reviews() -> None:
    """The proxy labels of ``bench/labels`` name real lines of the shipped reviews (with
    their product ids), and ``agreement`` counts only the lines a run rated."""
    from bench.default_run import agreement, label_sets

    lines = (ROOT / "jobs" / "data" / "product_reviews.jsonl").read_text().splitlines()
    sets = label_sets()
    assert {"blind_a", "blind_b"} <= set(sets)
    texts = {}
    for name in ("blind_a", "blind_b"):
        labels = sets[name]
        assert len(labels) == 150 and all(lab["score"] in (1, 2, 3, 4, 5) for lab in labels)
        for lab in labels:
            record = json.loads(lines[lab["line"]])
            assert record["id"] == lab["id"]
            texts.setdefault(name, set()).add(record["review"])
        assert len(texts[name]) == 150  # distinct texts
    assert not texts["blind_a"] & texts["blind_b"]  # disjoint samples
    high = next(lab for lab in sets["blind_a"] if lab["score"] == 5)
    low = next(lab for lab in sets["blind_a"] if lab["score"] <= 2)
    scores = {high["line"]: 4, low["line"]: 5}  # one within 1 of its label, one not
    assert agreement(scores, sets["blind_a"]) == {
        "n": 2, "agreement": 0.5, "n_le3": 1, "agreement_le3": 0.0}


_SAMPLER_SCRIPT = """
import json, os, threading, time
from bench._threads import ThreadSampler

tid, outs = [], []

def busy():
    # spin until this thread has used 0.4 s of CPU (40 clock ticks), however loaded the
    # machine is: the sampler's own thread uses a fraction of a tick per sample
    tid.append(threading.get_native_id())
    deadline = time.monotonic() + 40
    while time.thread_time() < 0.4 and time.monotonic() < deadline:
        sum(range(20_000))
        outs.append(time.time())

sampler = ThreadSampler(os.getpid(), interval_s=0.05).start()
worker = threading.Thread(target=busy)
t0 = time.time()
worker.start()
worker.join()
sampler.stop()
got = sampler.window(t0, outs[-1], outs)
print(json.dumps({"got": got, "tid": tid[0], "pid": os.getpid(), "outs": len(outs),
                  "empty": sampler.window(t0, t0, outs)}))
"""


def test_thread_sampler_picks_the_busy_thread_and_divides_by_outputs() -> None:
    """P2's operator CPU: the busiest thread of a process over a window, per output.

    Run in a fresh interpreter: threads left by other tests must not compete.
    """
    import json
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", _SAMPLER_SCRIPT], cwd=root,
                          capture_output=True, text=True, timeout=55)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    got = res["got"]
    assert got["busiest_tid"] == res["tid"]
    assert 0 < got["outputs"] <= res["outs"]
    assert got["thread_us_per_out"] == got["thread_cpu_s"] / got["outputs"] * 1e6
    assert got["process_us_per_out"] >= got["thread_us_per_out"]
    assert res["empty"] == {}  # fewer than two samples in the window


@pytest.mark.flink
@pytest.mark.timeout(240)
def test_bare_chat_floor_answers_every_record_once() -> None:
    """The floor the chat row is read against (``bench._bare.BareChat``) does its work: three
    records per key (the second and third wait in keyed state behind the first's call) and
    more calls than slots (8 in flight) are each answered once, before the bounded job ends."""
    pytest.importorskip("pyflink")
    spec = {"kind": "bare_chat", "mode": "thread", "parallelism": 1, "records": 60,
            "keys": 20, "max_in_flight": 8, "cpu": False}
    proc = subprocess.run([sys.executable, "-m", "bench._flink_job", json.dumps(spec)],
                          cwd=ROOT, capture_output=True, text=True, timeout=220)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [line] = [x for x in proc.stdout.splitlines() if x.startswith("BENCH_RESULT ")]
    res = json.loads(line[len("BENCH_RESULT "):])
    assert (res["count"], res["failed"]) == (60, 0)
    # 3 chats a key, one at a time: at least 3 waves of 200 ms from the first input
    assert res["window_s"] >= 0.6
