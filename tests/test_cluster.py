"""Submission to a real Flink standalone cluster (JobManager and TaskManager processes).

Starts the cluster with the scripts apache-flink ships (``tests/flink_cluster.py``), submits the
review job with ``flink run -pym jobs.review_analysis`` (scripted model, 50 reviews), waits for
it to finish through the REST API, checks the results and stops the cluster by PID.
"""

from __future__ import annotations

import contextlib
import sys
import time

import orjson
import pytest

pytestmark = [pytest.mark.flink, pytest.mark.cluster]

pytest.importorskip("pyflink")

from flink_cluster import FlinkCluster  # noqa: E402
from support.waiting import SLOW_S, wait_until  # noqa: E402


@pytest.fixture()
def cluster(tmp_path):
    c = FlinkCluster(tmp_path / "cluster")
    c.start()
    print(f"\n[cluster] JobManager pid {c.procs['jobmanager'].pid}, TaskManager pid "
          f"{c.procs['taskmanager'].pid}, REST {c.rest_url}, ready in {c.started_in_s:.1f} s",
          file=sys.stderr)
    try:
        yield c
    finally:
        c.stop()


def test_flink_run_review_job_on_a_standalone_cluster(cluster, tmp_path):
    out = tmp_path / "out.jsonl"
    t0 = time.monotonic()
    client = cluster.flink(
        "run", "-pym", "jobs.review_analysis", "-pyclientexec", sys.executable,
        "-pyexec", sys.executable,
        "--model", "scripted", "--limit", "50", "--output", str(out), "--no-progress")
    # wait for the job to show up and finish, through the REST API (a busy JobManager's late
    # answer is "not yet"); stop waiting when the client failed
    seen = [None]

    def ended() -> bool:
        jobs = cluster.rest("/jobs/overview").get("jobs", [])
        seen[0] = jobs[0]["state"] if jobs else None
        return seen[0] in ("FINISHED", "FAILED", "CANCELED")

    def client_failed() -> str | None:
        code = client.poll()
        return None if code in (None, 0) else f"the flink client exited with {code}"

    with contextlib.suppress(AssertionError):  # the asserts below say what went wrong
        wait_until("the job FINISHED", ended, SLOW_S, interval_s=0.5, abort=client_failed)
    state = seen[0]
    client_output, _ = client.communicate(timeout=SLOW_S)
    elapsed = time.monotonic() - t0
    assert state == "FINISHED", f"job state {state}\n{client_output[-4000:]}\n{cluster.logs_tail()}"
    assert client.returncode == 0, client_output[-4000:]
    job = cluster.rest_retried("/jobs/overview")["jobs"][0]
    assert job["name"] == "review-analysis"
    rows = [orjson.loads(x) for x in out.read_text().splitlines()]
    reviews = [r for r in rows if r["kind"] == "review"]
    assert sorted(r["line"] for r in reviews) == list(range(50))
    assert all(1 <= r["score"] <= 5 for r in reviews)
    print(f"[cluster] submitted and finished in {elapsed:.1f} s "
          f"(job {job['duration'] / 1000:.1f} s on the cluster)", file=sys.stderr)
