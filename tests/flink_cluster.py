"""A real Flink standalone cluster for tests: a JobManager and TaskManagers as separate
processes, started with the scripts the apache-flink package ships (``pyflink/bin``), on
127.0.0.1 with free ports, stopped by PID.

Usage::

    cluster = FlinkCluster(tmp_dir, taskmanagers=2, slots=1, prometheus=True).start()
    cluster.flink_cli("run", "-d", "-pym", "main", "-pyfs", user_dir, ...)   # the flink CLI
    cluster.rest("/jobs/overview")
    cluster.scrape_prometheus("taskmanager")          # the TaskManager's metrics, as text
    cluster.stop()

What the configuration holds beyond addresses and ports (``FlinkCluster.settings``):

- Several thread-mode jobs per TaskManager: the flink-python jar (``opt/``) is on the class
  path of every process (a ``lib/`` folder of links, ``FLINK_LIB_DIR``) and
  ``classloader.parent-first-patterns.additional: pemja``, so pemja's native library is loaded
  once per TaskManager. Without it, on JDK 17 the second thread-mode job on a TaskManager fails
  with ``NoSuchFieldException: loadedLibraryNames`` (``pemja.utils.CommonUtils.loadLibrary``).
- ``prometheus=True``: Flink's Prometheus reporter (``metrics.reporter.prom.*``), one HTTP
  port per process (``prometheus_ports``).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.request
from typing import Any

import yaml
from kafka_fixture import free_port
from support.waiting import QUICK_S, REQUEST_S, SLOW_S, retry, wait_until

ROOT = pathlib.Path(__file__).resolve().parents[1]
FETCH_SCRIPT = ROOT / "scripts" / "fetch_jars.sh"
PEMJA_ONCE = {"classloader.parent-first-patterns.additional": "pemja"}
"""Configuration that lets one TaskManager run several thread-mode jobs (with the flink-python
jar on its class path; see the module docstring)."""
PROMETHEUS = {
    "metrics.reporter.prom.factory.class":
        "org.apache.flink.metrics.prometheus.PrometheusReporterFactory",
}
"""Flink's Prometheus reporter; each process also gets ``metrics.reporter.prom.port``."""


def flink_home() -> pathlib.Path:
    """The Flink distribution inside the apache-flink package (``pyflink/``)."""
    import pyflink

    return pathlib.Path(pyflink.__file__).resolve().parent


def flink_version() -> str:
    """The Flink version of the distribution (from its ``flink-dist-<version>.jar``).

    Raises:
        FileNotFoundError: when the distribution has no flink-dist jar.
    """
    for jar in (flink_home() / "lib").glob("flink-dist-*.jar"):
        return jar.name[len("flink-dist-"):-len(".jar")]
    raise FileNotFoundError(f"no flink-dist jar in {flink_home() / 'lib'}")


def _cache_root() -> pathlib.Path:
    return pathlib.Path(os.environ.get("FLINK_AGENTS_PY_CACHE")
                        or pathlib.Path.home() / ".cache" / "flink-agents-py")


def prometheus_reporter_jar(fetch: bool = True) -> pathlib.Path:
    """The ``flink-metrics-prometheus`` jar matching the distribution's Flink version.

    Looked up in the distribution's ``plugins/metrics-prometheus`` (apache-flink 2.3.0 ships
    it), then in the project's ``.cache/jars`` and the shared cache, where
    ``scripts/fetch_jars.sh prometheus`` puts it (run when ``fetch`` and it is missing).

    Raises:
        FileNotFoundError: when the jar is nowhere and could not be fetched.
    """
    name = f"flink-metrics-prometheus-{flink_version()}.jar"
    for d in (flink_home() / "plugins" / "metrics-prometheus", ROOT / ".cache" / "jars",
              _cache_root() / "jars"):
        if (d / name).is_file():
            return d / name
    if fetch and FETCH_SCRIPT.exists():
        subprocess.run(["bash", str(FETCH_SCRIPT), "prometheus"], check=True)
        return prometheus_reporter_jar(fetch=False)
    raise FileNotFoundError(f"{name} not found: run `bash scripts/fetch_jars.sh prometheus`")


def _set(cfg: dict[str, Any], dotted: str, value: Any) -> None:
    node = cfg
    parts = dotted.split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value


class FlinkCluster:
    """One JobManager (``jobmanager.sh start-foreground``) and ``taskmanagers`` TaskManagers
    (``taskmanager.sh start-foreground``) as child processes.

    Processes are named ``jobmanager``, ``taskmanager``, ``taskmanager-2``, ... in ``procs``;
    each writes its logs to ``log/<name>/``.

    Args:
        workdir: a folder for the configuration (``conf/``), ``lib/``, ``plugins/``, logs
            (``log/``) and pid files.
        slots: task slots of each TaskManager.
        taskmanagers: how many TaskManager processes.
        prometheus: configure Flink's Prometheus reporter (one port per process,
            ``prometheus_ports``).
        config: more configuration (dotted keys), applied last.
    """

    def __init__(self, workdir: str | os.PathLike[str], slots: int = 2, *,
                 taskmanagers: int = 1, prometheus: bool = False,
                 config: dict[str, Any] | None = None) -> None:
        self.workdir = pathlib.Path(workdir)
        self.home = flink_home()
        self.conf_dir = self.workdir / "conf"
        self.log_dir = self.workdir / "log"
        self.lib_dir = self.workdir / "lib"
        self.plugins_dir = self.workdir / "plugins"
        self.rest_port = free_port()
        self.rpc_port = free_port()
        self.slots = slots
        self.taskmanagers = taskmanagers
        self.prometheus = prometheus
        self.config = dict(config or {})
        self.names = ["jobmanager", "taskmanager",
                      *(f"taskmanager-{i}" for i in range(2, taskmanagers + 1))]
        self.prometheus_ports = {n: free_port() for n in self.names} if prometheus else {}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.started_in_s: float | None = None

    @property
    def rest_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.rest_port}"

    def taskmanager_pids(self) -> list[int]:
        """The PIDs of the running TaskManager processes, in start order."""
        return [p.pid for n, p in self.procs.items() if n.startswith("taskmanager")]

    def env(self) -> dict[str, str]:
        """The environment of the cluster's processes and of the ``flink`` CLI.

        ``PYTHONPATH`` holds the project and the venv's ``site-packages``: thread mode runs the
        Python functions inside the TaskManager's JVM with the base interpreter (see
        ``flink_agents_py.flink._environment``), which must import the package and our jobs.
        ``FLINK_LIB_DIR`` is the distribution's ``lib/`` plus the flink-python jar.
        """
        env = dict(os.environ)
        site = sysconfig.get_paths()["purelib"]
        env.update({
            "FLINK_HOME": str(self.home),
            "FLINK_CONF_DIR": str(self.conf_dir),
            "FLINK_LOG_DIR": str(self.log_dir),
            "FLINK_LIB_DIR": str(self.lib_dir),
            "PYTHONPATH": os.pathsep.join([str(ROOT), site]),
            "PYFLINK_CLIENT_EXECUTABLE": sys.executable,
        })
        if self.prometheus:
            env["FLINK_PLUGINS_DIR"] = str(self.plugins_dir)
        return env

    def settings(self) -> dict[str, Any]:
        """The configuration written over the distribution's ``config.yaml`` (dotted keys)."""
        settings: dict[str, Any] = {
            "jobmanager.bind-host": "127.0.0.1",
            "jobmanager.rpc.address": "127.0.0.1",
            "jobmanager.rpc.port": self.rpc_port,
            "jobmanager.memory.process.size": "1024m",
            "taskmanager.bind-host": "127.0.0.1",
            "taskmanager.host": "127.0.0.1",
            "taskmanager.numberOfTaskSlots": self.slots,
            "taskmanager.memory.process.size": "1600m",
            "rest.address": "127.0.0.1",
            "rest.bind-address": "127.0.0.1",
            "rest.port": self.rest_port,
            "env.pid.dir": str(self.workdir),
            # working directories (tm_<resource-id>, blobs) under this cluster's folder: two
            # clusters on one machine (two test runs side by side) never share one
            "io.tmp.dirs": str(self.workdir / "tmp"),
            "python.executable": sys.executable,
            "python.client.executable": sys.executable,
            **PEMJA_ONCE,
        }
        if self.prometheus:
            settings.update(PROMETHEUS)
        settings.update(self.config)
        return settings

    def _write_conf(self) -> None:
        for d in (self.conf_dir, self.log_dir, self.lib_dir, self.workdir / "tmp"):
            d.mkdir(parents=True, exist_ok=True)
        for f in (self.home / "conf").iterdir():
            if f.name != "config.yaml":
                shutil.copy(f, self.conf_dir / f.name)
        cfg = yaml.safe_load((self.home / "conf" / "config.yaml").read_text()) or {}
        for key, value in self.settings().items():
            _set(cfg, key, value)
        (self.conf_dir / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        # lib/: the distribution's jars and the flink-python jar (pemja loaded once per process)
        for jar in [*(self.home / "lib").glob("*.jar"), *(self.home / "opt").glob("flink-python*")]:
            if not (self.lib_dir / jar.name).exists():
                (self.lib_dir / jar.name).symlink_to(jar)
        if self.prometheus:
            plugin = self.plugins_dir / "metrics-prometheus"
            plugin.mkdir(parents=True, exist_ok=True)
            jar = prometheus_reporter_jar()
            if not (plugin / jar.name).exists():
                (plugin / jar.name).symlink_to(jar)

    def _start(self, name: str) -> None:
        script = "jobmanager.sh" if name == "jobmanager" else "taskmanager.sh"
        args = []
        if name != "jobmanager":
            args += ["-D", f"taskmanager.resource-id={name}"]
        if self.prometheus:
            args += ["-D", f"metrics.reporter.prom.port={self.prometheus_ports[name]}"]
        logs = self.log_dir / name
        logs.mkdir(parents=True, exist_ok=True)
        out = open(logs / f"{name}.out", "wb")  # noqa: SIM115 (child owns it)
        self.procs[name] = subprocess.Popen(
            ["bash", str(self.home / "bin" / script), "start-foreground", *args],
            env={**self.env(), "FLINK_LOG_DIR": str(logs)},
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.workdir)
        out.close()

    def rest(self, path: str, timeout_s: float = REQUEST_S) -> Any:
        """GET ``path`` of the REST API, as JSON (one request: ``OSError`` when it fails)."""
        with urllib.request.urlopen(self.rest_url + path, timeout=timeout_s) as resp:
            return json.loads(resp.read())

    def rest_retried(self, path: str, timeout_s: float = QUICK_S) -> Any:
        """``rest(path)``, asked again while the JobManager is too busy to answer in time."""
        return retry(f"GET {path}", lambda: self.rest(path), timeout_s)

    def _exited(self) -> str | None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                return f"the {name} exited with {proc.returncode}"
        return None

    def start(self, timeout_s: float = SLOW_S) -> FlinkCluster:
        """Start the JobManager and the TaskManagers; wait until all slots are registered.

        Returns:
            This cluster.

        Raises:
            RuntimeError: when a process exits or the slots do not show up in time.
        """
        t0 = time.monotonic()
        self._write_conf()
        for name in self.names:
            self._start(name)

        def slots_up() -> bool:
            total = self.rest("/overview", timeout_s=10).get("slots-total", 0)
            return bool(total >= self.slots * self.taskmanagers)

        try:
            wait_until("the cluster's slots registered", slots_up, timeout_s, interval_s=0.5,
                       abort=self._exited, details=self.logs_tail)
        except AssertionError as e:
            self.stop()
            raise RuntimeError(str(e)) from None
        except BaseException:
            self.stop()
            raise
        self.started_in_s = time.monotonic() - t0
        return self

    def flink(self, *args: str, **popen: Any) -> subprocess.Popen[str]:
        """Start the ``flink`` CLI (``pyflink/bin/flink``) against this cluster.

        Args:
            *args: the CLI's arguments.
            **popen: ``subprocess.Popen`` arguments (e.g. ``cwd``, ``env``).

        Returns:
            The running CLI process (stdout with stderr, as text).
        """
        options: dict[str, Any] = {"env": self.env(), "cwd": ROOT, "stdout": subprocess.PIPE,
                                   "stderr": subprocess.STDOUT, "text": True,
                                   "start_new_session": True, **popen}
        return subprocess.Popen(["bash", str(self.home / "bin" / "flink"), *args], **options)

    def flink_cli(self, *args: str, timeout_s: float = SLOW_S,
                  **popen: Any) -> subprocess.CompletedProcess[str]:
        """Run the ``flink`` CLI to its end (see ``flink``); raise when it fails.

        Returns:
            The finished process; ``stdout`` holds its output.

        Raises:
            RuntimeError: when the CLI exits non-zero (its output in the message).
        """
        proc = self.flink(*args, **popen)
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            raise RuntimeError(f"flink {' '.join(args)} timed out:\n{out[-4000:]}") from None
        if proc.returncode != 0:
            raise RuntimeError(f"flink {' '.join(args)} exited with {proc.returncode}:\n"
                               f"{out[-6000:]}")
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, None)

    def submit(self, *args: str, **popen: Any) -> str:
        """``flink run -d ARGS``: submit a job detached.

        Returns:
            The job id.

        Raises:
            RuntimeError: when the CLI fails or prints no job id.
        """
        out = self.flink_cli("run", "-d", *args, **popen).stdout
        found = re.search(r"JobID ([0-9a-f]{32})", out)
        if not found:
            raise RuntimeError(f"no job id in the output of flink run:\n{out[-4000:]}")
        return found.group(1)

    def job(self, job_id: str) -> dict[str, Any]:
        """The REST API's ``/jobs/<id>`` (``state``, ``vertices`` with parallelism, ...),
        asked again while the JobManager is too busy to answer."""
        found: dict[str, Any] = self.rest_retried(f"/jobs/{job_id}")
        return found

    def wait_for_state(self, job_id: str, states: tuple[str, ...] = ("RUNNING",),
                       timeout_s: float = SLOW_S) -> str:
        """Wait until the job is in one of ``states`` (``RUNNING`` also needs every task
        running).

        Returns:
            The state reached.

        Raises:
            RuntimeError: when the job reaches a terminal state not asked for, or time runs out.
        """
        seen = ["?"]

        def reached() -> str | None:
            job = self.rest(f"/jobs/{job_id}")
            seen[0] = state = str(job["state"])
            if state in states and (state != "RUNNING" or all(
                    v["status"] == "RUNNING" for v in job["vertices"])):
                return state
            return None

        def ended() -> str | None:
            terminal = seen[0] in ("FINISHED", "FAILED", "CANCELED")
            return f"it ended {seen[0]}" if terminal and seen[0] not in states else None

        try:
            return wait_until(f"job {job_id} {' or '.join(states)}", reached, timeout_s,
                              abort=ended)
        except AssertionError as e:
            raise RuntimeError(f"{e}:\n{self.exceptions(job_id)}\n{self.logs_tail()}") from None

    def exceptions(self, job_id: str) -> str:
        """The root exception the REST API has for a job ('' when none)."""
        try:
            found = self.rest(f"/jobs/{job_id}/exceptions")
        except OSError as e:
            return f"(no exceptions: {e})"
        history = found.get("exceptionHistory", {}).get("entries", [])
        return str(history[0].get("stacktrace", ""))[:6000] if history else ""

    def stop_with_savepoint(self, job_id: str, directory: str | os.PathLike[str],
                            timeout_s: float = SLOW_S) -> str:
        """``flink stop --savepointPath DIR JOB``: take a savepoint and stop the job.

        Returns:
            The savepoint's path (``file:/...``), for ``flink run -s``.

        Raises:
            RuntimeError: when the CLI fails or prints no path.
        """
        out = self.flink_cli("stop", "--savepointPath", str(directory), job_id,
                             timeout_s=timeout_s).stdout
        found = re.search(r"Savepoint completed\. Path: (\S+)", out)
        if not found:
            raise RuntimeError(f"no savepoint path in the output of flink stop:\n{out[-4000:]}")
        return found.group(1)

    def scrape_prometheus(self, name: str = "taskmanager", timeout_s: float = REQUEST_S) -> str:
        """GET ``/metrics`` of the process ``name``'s Prometheus reporter, as text (one
        request: ``OSError`` when it fails, e.g. a busy process answering too late)."""
        url = f"http://127.0.0.1:{self.prometheus_ports[name]}/metrics"
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            text: str = resp.read().decode()
            return text

    def logs_tail(self, n: int = 40) -> str:
        """The last lines of every log file."""
        parts = []
        for f in sorted(self.log_dir.rglob("*")):
            if f.is_file():
                lines = f.read_text(errors="replace").splitlines()[-n:]
                parts.append(f"== {f.relative_to(self.log_dir)}\n" + "\n".join(lines))
        return "\n".join(parts)

    def stop(self, grace_s: float = 20.0) -> None:
        """Stop every process by PID: SIGTERM, SIGKILL after ``grace_s``."""
        for proc in self.procs.values():
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self.procs.clear()

    def __enter__(self) -> FlinkCluster:
        return self.start() if not self.procs else self

    def __exit__(self, *exc: object) -> None:
        self.stop()
