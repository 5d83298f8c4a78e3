"""Operations on a real standalone Flink cluster with a real Kafka broker.

One cluster (a JobManager and one TaskManager with 2 slots, Flink's Prometheus reporter on,
``tests/flink_cluster.py``) and the session's broker serve one scenario, run once by the
``ops`` fixture, the way a user runs it: their own module (``tests/cluster_job/``, copied to a
temporary directory outside the repository) submitted with the ``flink`` CLI
(``flink run -d -pym ops_main -pyfs DIR``), thread mode, Kafka in, exactly-once Kafka out.

1. Job 1 (parallelism 1) starts on 48 inputs (8 keys x 6, all produced up front, so inputs
   queue behind each key's run). Each run has a sub-agent and a ``ctx.chat`` in flight at
   once, each model call taking ``LATENCY_S``. Once some outcomes are recorded, the test holds
   every model call (a file the fake model waits on), so each key's run stays mid-call with
   inputs queued behind it; meanwhile the TaskManager's Prometheus endpoint is scraped until
   the agent metrics show up. Then ``flink stop --savepointPath``.
2. Job 2: ``flink run -s <savepoint> -p 2``; once it has recorded outcomes of its own, held
   and stopped the same way.
3. Job 3: ``flink run -s <savepoint> -p 1``; runs until every output is committed, then
   stopped with a savepoint too.

The tests then check what a user relies on: three thread-mode jobs in a row ran on the same
TaskManager process, each with its own shipped copy of the user's module; each input has
exactly one committed output (read ``read_committed``); no model call whose outcome was
recorded before a savepoint ran again (the fake model counts its executions in a file outside
the job; an observer logs when outcomes are recorded); the outputs of each key come in input
order, with the key's memory carried across both restores.

The same cluster then runs the review job submitted the way the getting-started page says
(``flink run -pym jobs.review_analysis``, scripted model, 50 reviews), waited for through
the REST API; it runs last, so the agent metrics scraped above are the scenario's only.
"""

from __future__ import annotations

import collections
import contextlib
import pathlib
import re
import shutil
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

pytestmark = [pytest.mark.flink, pytest.mark.cluster]
kafka = pytest.mark.kafka  # the scenario's tests (the review job's needs no broker)

pytest.importorskip("pyflink")

from flink_cluster import FlinkCluster  # noqa: E402
from kafka_fixture import KAFKA_TRANSIENT as KAFKA  # noqa: E402
from kafka_fixture import consume_all, produce  # noqa: E402
from support.waiting import QUICK_S, SLOW_S, TRANSIENT, wait_until  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else pathlib.Path(sys.executable))
JOB_FILES = pathlib.Path(__file__).parent / "cluster_job"

KEYS = [f"k{i}" for i in range(8)]
PER_KEY = 6
LATENCY_S = 1.0
KINDS = ("main", "helper")


@dataclass
class Segment:
    """One job of the scenario."""

    job_id: str
    parallelism: int
    stop_trigger_s: float = 0.0  # the stop's savepoint trigger time (epoch s, JobManager clock)
    savepoint: str = ""
    committed_after: int = 0  # outputs committed when the job had stopped
    job: dict[str, Any] = field(default_factory=dict)


@dataclass
class Scenario:
    """What the scenario left behind for the tests to check."""

    cluster: FlinkCluster
    taskmanager_pid: int
    segments: list[Segment]
    outputs: list[Any]
    executions: list[tuple[str, int, float, float]]  # (tag, pid, start, end)
    recorded: dict[str, float]  # tag -> when its outcome was first recorded
    metrics: list[tuple[str, dict[str, str], float]]
    taskmanagers: list[dict[str, Any]]
    taskmanager_alive: bool
    modules: list[str]  # the files the model's module was imported from, in the TaskManager


def _read_log(path: pathlib.Path) -> list[list[str]]:
    if not path.exists():
        return []
    return [line.split() for line in path.read_text().splitlines() if line.strip()]


_SAMPLE = re.compile(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Samples of Prometheus' text exposition format: ``(name, labels, value)``."""
    out = []
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and not line.startswith("#"):
            out.append((m.group(1), dict(_LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return out


def agent_metrics(samples: list[tuple[str, dict[str, str], float]]) -> dict[tuple[str, str], float]:
    """``{(metric suffix after 'flink_agents_', model label or ''): value}`` of job cluster-ops,
    summed over subtasks."""
    out: dict[tuple[str, str], float] = collections.defaultdict(float)
    for name, labels, value in samples:
        prefix = "flink_taskmanager_job_task_operator_flink_agents_"
        if name.startswith(prefix) and labels.get("job_name") == "cluster_ops":
            out[(name[len(prefix):], labels.get("model", ""))] += value
    return dict(out)


def _wait_for(what: str, check: Any, cluster: FlinkCluster, job_id: str,
              timeout_s: float = SLOW_S) -> Any:
    """Wait until ``check()`` holds while the job runs (a busy REST answer, Prometheus
    endpoint or broker counts as not yet); fail at once when the job ended."""
    def ended() -> str | None:
        state = cluster.rest(f"/jobs/{job_id}")["state"]
        return f"the job ended {state}" if state in ("FAILED", "CANCELED", "FINISHED") else None

    return wait_until(what, check, timeout_s, abort=ended, transient=(*TRANSIENT, *KAFKA),
                      details=lambda: f"{cluster.exceptions(job_id)}\n{cluster.logs_tail()}")


def _savepoint_trigger_s(cluster: FlinkCluster, job_id: str) -> float:
    """When the job's completed savepoint was triggered (the REST API's checkpoint statistics
    are cached: waited for, not read once)."""
    def completed() -> list[dict[str, Any]]:
        history = cluster.rest(f"/jobs/{job_id}/checkpoints")["history"]
        return [h for h in history if h.get("is_savepoint") and h["status"] == "COMPLETED"]

    savepoints = wait_until("a completed savepoint in the checkpoint history", completed,
                            QUICK_S)
    return float(max(h["trigger_timestamp"] for h in savepoints)) / 1000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Any:
    """The module's cluster (one start for the scenario and the review job), stopped by PID
    when the module ends."""
    c = FlinkCluster(tmp_path_factory.mktemp("cluster") / "cluster", slots=2,
                     prometheus=True).start()
    print(f"\n[cluster] JobManager pid {c.procs['jobmanager'].pid}, TaskManager pid "
          f"{c.procs['taskmanager'].pid}, REST {c.rest_url}, ready in {c.started_in_s:.1f} s",
          file=sys.stderr)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def ops(kafka_broker, cluster, tmp_path_factory) -> Any:
    """Run the scenario of the module docstring once; yield what it left behind."""
    pytest.importorskip("confluent_kafka")
    work = tmp_path_factory.mktemp("cluster-ops")
    assert ROOT not in work.resolve().parents
    user, logs = work / "user", work / "logs"
    user.mkdir()
    logs.mkdir()
    for f in ("ops_agents.py", "ops_main.py"):
        shutil.copy(JOB_FILES / f, user / f)
    source, sink = f"ops-in-{uuid.uuid4().hex[:6]}", f"ops-out-{uuid.uuid4().hex[:6]}"
    kafka_broker.create_topics([source, sink], partitions=2)
    produce(kafka_broker.bootstrap, source,
            [(k, orjson.dumps({"key": k, "seq": s})) for s in range(PER_KEY) for k in KEYS])

    client_env = cluster.env()
    client_env.pop("PYTHONPATH", None)  # the client is a user's shell: nothing of the repository
    t0 = time.monotonic()
    steps: list[str] = []

    def submit(parallelism: int, savepoint: str | None) -> Segment:
        args = ["-p", str(parallelism), *(["-s", savepoint] if savepoint else []),
                "-pym", "ops_main", "-pyfs", str(user), "-pyclientexec", PYTHON,
                "-pyexec", PYTHON, kafka_broker.bootstrap, source, sink, str(logs), str(LATENCY_S)]
        t = time.monotonic()
        job_id = cluster.submit(*args, cwd=user, env=client_env)
        steps.append(f"submit p={parallelism} {time.monotonic() - t:.1f} s")
        cluster.wait_for_state(job_id, ("RUNNING",))
        steps.append(f"running {time.monotonic() - t:.1f} s")
        return Segment(job_id, parallelism)

    def committed() -> int:
        return len(consume_all(kafka_broker.bootstrap, sink))

    def stop(seg: Segment) -> None:
        t = time.monotonic()
        seg.savepoint = cluster.stop_with_savepoint(seg.job_id, work / "savepoints")
        steps.append(f"stop {time.monotonic() - t:.1f} s")
        cluster.wait_for_state(seg.job_id, ("FINISHED",))  # the CLI returns at the savepoint
        seg.stop_trigger_s = _savepoint_trigger_s(cluster, seg.job_id)
        seg.committed_after = committed()
        seg.job = cluster.job(seg.job_id)

    samples: list[tuple[str, dict[str, str], float]] = []
    hold = logs / "hold"

    def recorded_since(t: float) -> int:
        return sum(1 for _, when, *_ in _read_log(logs / "recorded.log") if float(when) > t)

    def scraped() -> bool:
        samples[:] = parse_prometheus(cluster.scrape_prometheus("taskmanager"))
        found = agent_metrics(samples)
        return found.get(("runs_completed", ""), 0) > 0 and all(
            found.get(("model_chat_calls", m), 0) > 0 for m in ("main_model", "helper_model"))

    try:
        segments = [submit(1, None)]
        _wait_for("outcomes recorded by job 1", lambda: recorded_since(0) >= 16, cluster,
                  segments[0].job_id)
        hold.touch()  # every model call now waits when its latency is over: runs stay mid-call
        # scrape while the job runs (its runs held mid-call), until the metrics are pushed
        _wait_for("the agent metrics at the Prometheus endpoint", scraped, cluster,
                  segments[0].job_id)
        stop(segments[0])
        hold.unlink()
        restarted = time.time()
        segments.append(submit(2, segments[0].savepoint))
        _wait_for("outcomes recorded by job 2", lambda: recorded_since(restarted) >= 16,
                  cluster, segments[1].job_id)
        hold.touch()
        stop(segments[1])
        hold.unlink()
        segments.append(submit(1, segments[1].savepoint))
        _wait_for("every output committed", lambda: committed() >= len(KEYS) * PER_KEY,
                  cluster, segments[2].job_id)
        stop(segments[2])
        print(f"\n[cluster-ops] 3 jobs (p=1, 2, 1) with 2 stop-with-savepoints in "
              f"{time.monotonic() - t0:.1f} s after a cluster start of "
              f"{cluster.started_in_s:.1f} s; committed after each stop: "
              f"{[s.committed_after for s in segments]}; steps: {', '.join(steps)}",
              file=sys.stderr)
        modules = sorted({m for *_, m in _read_log(logs / "calls.log")})
        print(f"[cluster-ops] the model's module, as the TaskManager imported it: {modules}",
              file=sys.stderr)
        tm_alive = cluster.procs["taskmanager"].poll() is None
        taskmanagers = cluster.rest_retried("/taskmanagers")["taskmanagers"]
        tm_pid = cluster.procs["taskmanager"].pid
    finally:
        hold.unlink(missing_ok=True)
    recorded: dict[str, float] = {}
    for tag, when, *_ in _read_log(logs / "recorded.log"):
        recorded[tag] = min(float(when), recorded.get(tag, float("inf")))
    yield Scenario(
        cluster=cluster, taskmanager_pid=tm_pid, segments=segments,
        outputs=consume_all(kafka_broker.bootstrap, sink),
        executions=[(t, int(p), float(s), float(e))
                    for t, p, s, e, *_ in _read_log(logs / "calls.log")],
        recorded=recorded, metrics=samples, taskmanagers=taskmanagers, taskmanager_alive=tm_alive,
        modules=modules)


def _in_flight_at(ops: Scenario, t: float) -> list[str]:
    """Tags whose model call had started before ``t`` with no outcome recorded by then."""
    return sorted({tag for tag, _, start, _ in ops.executions
                   if start < t and ops.recorded.get(tag, float("inf")) >= t})


@kafka
def test_three_thread_mode_jobs_in_a_row_on_one_taskmanager(ops):
    assert [s.job["state"] for s in ops.segments] == ["FINISHED"] * 3
    agent_vertex = [[v["parallelism"] for v in s.job["vertices"] if v["name"].startswith("ops")]
                    for s in ops.segments]
    assert [p[0] for p in agent_vertex] == [1, 2, 1]
    # one TaskManager process, the same all along, ran every model call (thread mode: in its JVM)
    assert ops.taskmanager_alive and len(ops.taskmanagers) == 1
    assert {pid for _, pid, _, _ in ops.executions} == {ops.taskmanager_pid}
    # one interpreter for the TaskManager's life, yet each job ran its own shipped copy of the
    # user's module, not the one a finished job left in sys.modules (flink/_fresh.py)
    assert len(ops.modules) == 3 and all("python-files" in m for m in ops.modules), ops.modules


@kafka
def test_prometheus_endpoint_shows_the_agent_metrics_with_their_labels(ops):
    found = agent_metrics(ops.metrics)
    for name in ("runs_started", "runs_completed", "events_processed"):
        assert found.get((name, ""), 0) > 0, name
    for model in ("main_model", "helper_model"):
        for name in ("model_chats", "model_chat_calls", "model_input_tokens",
                     "model_output_tokens", "model_chat_call_latency_ms_total"):
            assert found.get((name, model), 0) > 0, (name, model)
        # each model call sleeps LATENCY_S: the latency the reporter sees is at least that
        assert found[("model_chat_call_latency_ms", model)] >= LATENCY_S * 1000 - 1
    assert found.get(("type_events_processed", ""), 0) > 0
    assert found.get(("subagent_subagent_calls", ""), 0) > 0
    labels = [lab for name, lab, _ in ops.metrics if name.endswith("flink_agents_runs_started")]
    assert labels and labels[0]["job_name"] == "cluster_ops" and labels[0]["operator_name"] == "ops"
    assert labels[0]["subtask_index"] == "0" and labels[0]["tm_id"] == "taskmanager"


@kafka
def test_every_input_has_exactly_one_committed_output(ops):
    rows = [orjson.loads(m.value()) for m in ops.outputs]
    assert sorted((r["key"], r["seq"]) for r in rows) == sorted(
        (k, s) for k in KEYS for s in range(PER_KEY))
    assert all(r["reply"] == f"done <<{r['key']}/{r['seq']}/main>>" for r in rows)
    assert all(r["helper"] == [f"done <<{r['key']}/{r['seq']}/helper>>"] for r in rows)
    # the stops cut the stream: work was left for each following job
    first, second, _ = (s.committed_after for s in ops.segments)
    assert 0 < first <= second < len(KEYS) * PER_KEY


@kafka
def test_queued_inputs_keep_their_order_per_key_across_both_restores(ops):
    by_key: dict[str, list[tuple[int, int]]] = collections.defaultdict(list)
    for m in ops.outputs:  # in (partition, offset) order: a key's outputs in the order written
        r = orjson.loads(m.value())
        assert m.key().decode() == r["key"]
        by_key[r["key"]].append((r["seq"], r["n"]))
    # n: the key's run counter in short-term memory, carried across both restores
    assert {k: v for k, v in by_key.items()} == {
        k: [(s, s + 1) for s in range(PER_KEY)] for k in KEYS}


@kafka
def test_no_recorded_model_call_runs_again_after_a_savepoint(ops):
    tags = {f"{k}/{s}/{kind}" for k in KEYS for s in range(PER_KEY) for kind in KINDS}
    runs = collections.Counter(tag for tag, *_ in ops.executions)
    assert set(runs) == tags and set(ops.recorded) == tags
    for seg in ops.segments[:2]:
        t = seg.stop_trigger_s
        recorded_before = {tag for tag, when in ops.recorded.items() if when < t}
        ran_after = {tag for tag, _, start, _ in ops.executions if start > t}
        assert recorded_before, "nothing was recorded before the savepoint"
        assert not recorded_before & ran_after, "a recorded call ran again after the restore"
    repeated = {tag for tag, n in runs.items() if n > 1}
    in_flight = set(_in_flight_at(ops, ops.segments[0].stop_trigger_s)) | set(
        _in_flight_at(ops, ops.segments[1].stop_trigger_s))
    assert repeated <= in_flight  # only calls cut short by a stop ran twice
    print(f"\n[cluster-ops] {len(tags)} model calls, {sum(runs.values())} executions: "
          f"{len(repeated)} re-run after being cut short by a stop", file=sys.stderr)


@kafka
def test_each_stop_caught_runs_mid_call_with_inputs_queued_behind_them(ops):
    for seg in ops.segments[:2]:
        flying = _in_flight_at(ops, seg.stop_trigger_s)
        # a sub-agent's chat and a ctx.chat of the same run, both mid-call at the savepoint
        assert {tag.rsplit("/", 1)[1] for tag in flying} == set(KINDS), flying
        started = {tag for tag, _, start, _ in ops.executions if start < seg.stop_trigger_s}
        queued = [tag for tag in flying if tag.endswith("/main") and
                  f"{tag.split('/')[0]}/{int(tag.split('/')[1]) + 1}/main" not in started
                  and int(tag.split("/")[1]) + 1 < PER_KEY]
        assert queued, f"no input queued behind a run at the stop: {flying}"


def test_flink_run_review_job_on_a_standalone_cluster(cluster, tmp_path):
    out = tmp_path / "out.jsonl"
    t0 = time.monotonic()
    client = cluster.flink(
        "run", "-pym", "jobs.review_analysis", "-pyclientexec", sys.executable,
        "-pyexec", sys.executable,
        "--model", "scripted", "--limit", "50", "--output", str(out), "--no-progress")
    # wait for the job to show up and finish, through the REST API (a busy JobManager's late
    # answer is "not yet"); stop waiting when the client failed. The scenario's jobs ran on
    # this cluster before: the review job is the one of its name.
    seen: list[Any] = [None]

    def review() -> dict[str, Any] | None:
        jobs = cluster.rest("/jobs/overview").get("jobs", [])
        return next((j for j in jobs if j["name"] == "review-analysis"), None)

    def ended() -> bool:
        job = review()
        seen[0] = job["state"] if job else None
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
    [job] = [j for j in cluster.rest_retried("/jobs/overview")["jobs"]
             if j["name"] == "review-analysis"]
    rows = [orjson.loads(x) for x in out.read_text().splitlines()]
    reviews = [r for r in rows if r["kind"] == "review"]
    assert sorted(r["line"] for r in reviews) == list(range(50))
    assert all(1 <= r["score"] <= 5 for r in reviews)
    print(f"[cluster] submitted and finished in {elapsed:.1f} s "
          f"(job {job['duration'] / 1000:.1f} s on the cluster)", file=sys.stderr)
