"""A measurement rig on real processes: a Kafka broker and a Flink standalone cluster with
several TaskManagers, jobs submitted with the ``flink`` CLI and cancelled through REST.

Used by ``bench._scaleout``. The cluster is ``tests/flink_cluster.py``'s ``FlinkCluster``
(started with the scripts apache-flink ships), extended here with more TaskManagers, a
checkpoint folder, a fast REST metric fetcher and the TaskManagers' ``SCALEOUT_TID_DIR``.
The broker is ``tests/kafka_fixture.py``'s ``KafkaBroker``.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import pathlib
import re
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

from flink_cluster import FlinkCluster  # type: ignore[import-not-found]  # noqa: E402
from kafka_fixture import KafkaBroker, produce  # type: ignore[import-not-found]  # noqa: E402

from ._scaleout_agents import TID_DIR_ENV  # noqa: E402

__all__ = ["Rig", "ScaleoutCluster", "rss_kib", "java_pid"]


def java_pid(pid: int) -> int | None:
    """``pid`` itself if it runs ``java``, else its ``java`` descendant."""
    try:
        if pathlib.Path(f"/proc/{pid}/comm").read_text().strip() == "java":
            return pid
    except OSError:
        return None
    from ._threads import child_java_pid

    return child_java_pid(pid)


def rss_kib(pid: int) -> int:
    """The resident set size of ``pid`` in KiB (0 when it is gone)."""
    try:
        for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class ScaleoutCluster(FlinkCluster):
    """``FlinkCluster`` with ``taskmanagers`` TaskManagers of ``slots`` slots each.

    Args:
        workdir: the cluster's folder.
        taskmanagers: how many TaskManager processes.
        slots: task slots per TaskManager.
        tm_memory: ``taskmanager.memory.process.size`` of each.
    """

    def __init__(self, workdir: pathlib.Path, taskmanagers: int = 2, slots: int = 1,
                 tm_memory: str = "1600m") -> None:
        self._native_tms = "taskmanagers" in inspect.signature(FlinkCluster.__init__).parameters
        if self._native_tms:
            super().__init__(workdir, slots=slots, taskmanagers=taskmanagers)
        else:
            super().__init__(workdir, slots=slots)
        self.taskmanagers = taskmanagers
        self.tm_memory = tm_memory
        self.tid_dir = self.workdir / "tids"
        self._own_lib = False

    def env(self) -> dict[str, str]:
        """The fixture's environment plus ``SCALEOUT_TID_DIR`` (and our ``lib/``, if any)."""
        lib = {"FLINK_LIB_DIR": str(self.workdir / "lib")} if self._own_lib else {}
        return {**super().env(), TID_DIR_ENV: str(self.tid_dir), **lib}

    def _write_conf(self) -> None:
        import yaml

        super()._write_conf()
        self.tid_dir.mkdir(parents=True, exist_ok=True)
        conf = self.conf_dir / "config.yaml"
        cfg = yaml.safe_load(conf.read_text()) or {}
        flat = {
            "taskmanager.memory.process.size": self.tm_memory,
            "execution.checkpointing.dir": (self.workdir / "checkpoints").as_uri(),
            "metrics.fetcher.update-interval": 1000,
        }
        # several thread-mode jobs on one TaskManager (see docs/how-to/cluster.md); the
        # fixture may already do it
        if not (self.workdir / "lib").exists() and "FLINK_LIB_DIR" not in super().env():
            lib = self.workdir / "lib"
            lib.mkdir()
            for jar in [*(self.home / "lib").iterdir(), *(self.home / "opt").glob("flink-python*")]:
                (lib / jar.name).symlink_to(jar)
            flat["classloader.parent-first-patterns.additional"] = "pemja"
            self._own_lib = True
        for key, value in flat.items():
            node = cfg
            parts = key.split(".")
            for p in parts[:-1]:
                node = node.setdefault(p, {})
            node[parts[-1]] = value
        conf.write_text(yaml.safe_dump(cfg, sort_keys=False))

    def start(self, timeout_s: float = 180.0) -> ScaleoutCluster:
        """Start the JobManager and every TaskManager; wait for all their slots."""
        super().start(timeout_s)
        if not self._native_tms:
            for i in range(2, self.taskmanagers + 1):
                self._start_taskmanager(f"taskmanager-{i}")
        want = self.taskmanagers * self.slots
        deadline = time.monotonic() + timeout_s
        while self.rest("/overview").get("slots-total", 0) < want:
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"only {self.rest('/overview')} of {want} slots:\n"
                                   f"{self.logs_tail()}")
            time.sleep(0.5)
        return self

    def _start_taskmanager(self, name: str) -> None:
        start: Any = self._start
        if len(inspect.signature(start).parameters) == 1:  # the fixture picks the script
            start(name)
        else:
            start(name, "taskmanager.sh")

    def restart_taskmanagers(self, timeout_s: float = 120.0) -> None:
        """Stop every TaskManager (SIGTERM, by pid) and start fresh ones; wait for their slots.

        Each measurement then starts from the same state: a new JVM and a new thread-mode
        interpreter (no modules, heap or JIT state left by the previous job).
        """
        names = [n for n in self.procs if n.startswith("taskmanager")]
        for n in names:
            proc = self.procs.pop(n)
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        want = self.taskmanagers * self.slots
        deadline = time.monotonic() + timeout_s
        while self.rest("/overview").get("slots-total", 0) > 0:  # old ones deregistered
            if time.monotonic() > deadline:
                break
            time.sleep(0.3)
        for n in sorted(names):
            self._start_taskmanager(n)
        while True:
            ov = self.rest("/overview")
            if ov.get("slots-total", 0) >= want and ov.get("slots-available", 0) >= want:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"TaskManagers not back in time: {ov}\n{self.logs_tail()}")
            time.sleep(0.3)

    def tm_pids(self) -> list[int]:
        """The TaskManagers' JVM pids."""
        pids = []
        for name, proc in self.procs.items():
            if name.startswith("taskmanager"):
                pid = java_pid(proc.pid)
                if pid:
                    pids.append(pid)
        return pids


class Rig:
    """A broker and a cluster; submit, watch and cancel measurement jobs.

    Args:
        workdir: a folder for both.
        taskmanagers: TaskManager processes (1 slot each).
    """

    def __init__(self, workdir: pathlib.Path, taskmanagers: int = 2) -> None:
        self.workdir = workdir
        self.broker = KafkaBroker(workdir / "kafka", log_level="WARN")
        self.cluster = ScaleoutCluster(workdir / "cluster", taskmanagers=taskmanagers)

    def __enter__(self) -> Rig:
        self.broker.start()
        try:
            self.cluster.start()
        except BaseException:
            self.broker.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.cluster.stop()
        finally:
            self.broker.stop()

    def topics(self, partitions: int) -> tuple[str, str]:
        """Two new topics ``(input, output)`` with ``partitions`` partitions each."""
        tag = uuid.uuid4().hex[:8]
        names = (f"in-{tag}", f"out-{tag}")
        self.broker.create_topics(names, partitions=partitions)
        return names

    def produce(self, topic: str, n: int, keys: int, start: int = 0) -> None:
        """Produce ``n`` records ``{"key": "k<i % keys>", "n": i}`` keyed by their key."""
        produce(self.broker.bootstrap, topic,
                ((f"k{i % keys}", json.dumps({"key": f"k{i % keys}", "n": i}))
                 for i in range(start, start + n)))

    def fresh(self) -> None:
        """Fresh TaskManagers (see ``ScaleoutCluster.restart_taskmanagers``), no thread ids."""
        self.cluster.restart_taskmanagers()
        for f in self.cluster.tid_dir.glob("*"):
            f.unlink()

    def submit(self, spec: dict[str, Any], parallelism: int, timeout_s: float = 180) -> str:
        """``flink run -d -p P -pym bench._scaleout_job <spec>``; wait until every task runs.

        Returns:
            The job id.

        Raises:
            RuntimeError: when submission fails or the job does not run in time.
        """
        spec = {"bootstrap": self.broker.bootstrap, "parallelism": parallelism, **spec}
        client = self.cluster.flink("run", "-d", "-p", str(parallelism), "-pym",
                                    "bench._scaleout_job", "-pyclientexec", sys.executable,
                                    "-pyexec", sys.executable, json.dumps(spec))
        out, _ = client.communicate(timeout=timeout_s)
        m = re.search(r"JobID ([0-9a-f]{32})", out)
        if client.returncode != 0 or not m:
            raise RuntimeError(f"flink run failed ({client.returncode}):\n{out[-3000:]}")
        job = m.group(1)
        deadline = time.monotonic() + timeout_s
        while True:
            info = self.cluster.rest(f"/jobs/{job}")
            if info["state"] in ("FAILED", "CANCELED", "FINISHED"):
                raise RuntimeError(f"job {job} is {info['state']}: {self.failures(job)[:3]}")
            if info["state"] == "RUNNING" and all(v["status"] == "RUNNING"
                                                  for v in info["vertices"]):
                return job
            if time.monotonic() > deadline:
                raise RuntimeError(f"job {job} not running in time: {info['state']}")
            time.sleep(0.3)

    def cancel(self, job: str, timeout_s: float = 60) -> None:
        """Cancel ``job`` through REST and wait until its slots are free again."""
        req = urllib.request.Request(f"{self.cluster.rest_url}/jobs/{job}?mode=cancel",
                                     method="PATCH")
        with contextlib.suppress(OSError):
            urllib.request.urlopen(req, timeout=10).close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ov = self.cluster.rest("/overview")
            state = self.cluster.rest(f"/jobs/{job}")["state"]
            if state in ("CANCELED", "FAILED", "FINISHED") and \
                    ov["slots-available"] == ov["slots-total"]:
                return
            time.sleep(0.3)

    def failures(self, job: str) -> list[str]:
        """The job's failures so far (root exceptions, newest first; restarts included)."""
        try:
            hist = self.cluster.rest(f"/jobs/{job}/exceptions").get("exceptionHistory") or {}
        except OSError:
            return []
        return [(e.get("stacktrace") or e.get("exceptionName") or "")[:1500]
                for e in hist.get("entries", [])]

    def records_in(self, job: str) -> int:
        """Records received by the keyed operator's vertex (the job's last vertex), summed over
        its subtasks."""
        vertices = self.cluster.rest(f"/jobs/{job}")["vertices"]
        if len(vertices) < 2:
            return 0
        v = self.cluster.rest(f"/jobs/{job}/vertices/{vertices[-1]['id']}")
        return sum(int(s["metrics"].get("read-records", 0)) for s in v["subtasks"])

    def busy(self, job: str) -> list[dict[str, Any]]:
        """Per vertex: name and the mean busy / backpressured / idle ms per second of its
        subtasks (Flink's task metrics, as the web UI shows them)."""
        out = []
        names = "busyTimeMsPerSecond,backPressuredTimeMsPerSecond,idleTimeMsPerSecond"
        for v in self.cluster.rest(f"/jobs/{job}")["vertices"]:
            got = self.cluster.rest(f"/jobs/{job}/vertices/{v['id']}/subtasks/metrics"
                                    f"?get={names}&agg=avg")
            row = {"vertex": v["name"][:40]}
            row.update({m["id"].removesuffix("TimeMsPerSecond"): m.get("avg") for m in got})
            out.append(row)
        return out

    def checkpoint_size(self, job: str) -> dict[str, Any]:
        """The latest completed checkpoint: id, ``state_size`` and ``checkpointed_size`` (bytes)."""
        c = (self.cluster.rest(f"/jobs/{job}/checkpoints").get("latest") or {}).get("completed")
        if not c:
            return {}
        return {"id": c.get("id"), "state_size": c.get("state_size"),
                "checkpointed_size": c.get("checkpointed_size")}


class OutputReader:
    """Reads the output topic in a thread: ``(t_in, t_out, ok)`` per record, as they come.

    Args:
        bootstrap: the broker.
        topic: the output topic.
    """

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.rows: list[tuple[float, float, bool]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="scaleout-reader", daemon=True)

    def start(self) -> OutputReader:
        """Start reading from the beginning; returns ``self``."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop reading."""
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": uuid.uuid4().hex,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([self.topic])
        try:
            while not self._stop.is_set():
                for msg in consumer.consume(num_messages=5000, timeout=0.2):
                    if msg.error() is None:
                        r = json.loads(msg.value() or b"{}")
                        self.rows.append((r["t_in"], r["t_out"], r["ok"]))
        finally:
            consumer.close()

    def wait(self, count: int, timeout_s: float) -> bool:
        """Wait until ``count`` rows arrived; False on timeout."""
        deadline = time.monotonic() + timeout_s
        while len(self.rows) < count:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
        return True
