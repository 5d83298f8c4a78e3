"""A real Flink standalone cluster for tests: a JobManager and a TaskManager as separate
processes, started with the scripts the apache-flink package ships (``pyflink/bin``), on
127.0.0.1 with free ports, stopped by PID.

Usage::

    cluster = FlinkCluster(tmp_dir).start()   # writes a conf dir, starts both, waits for a slot
    cluster.flink("run", "-pym", "jobs.review_analysis", ...)   # the flink CLI against it
    cluster.rest("/jobs/overview")
    cluster.stop()
"""

from __future__ import annotations

import json
import os
import pathlib
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

ROOT = pathlib.Path(__file__).resolve().parents[1]


def flink_home() -> pathlib.Path:
    """The Flink distribution inside the apache-flink package (``pyflink/``)."""
    import pyflink

    return pathlib.Path(pyflink.__file__).resolve().parent


def _set(cfg: dict[str, Any], dotted: str, value: Any) -> None:
    node = cfg
    parts = dotted.split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value


class FlinkCluster:
    """One JobManager (``jobmanager.sh start-foreground``) and one TaskManager
    (``taskmanager.sh start-foreground``) as child processes.

    Args:
        workdir: a folder for the configuration (``conf/``), logs (``log/``) and pid files.
        slots: task slots of the TaskManager.
    """

    def __init__(self, workdir: str | os.PathLike[str], slots: int = 2) -> None:
        self.workdir = pathlib.Path(workdir)
        self.home = flink_home()
        self.conf_dir = self.workdir / "conf"
        self.log_dir = self.workdir / "log"
        self.rest_port = free_port()
        self.rpc_port = free_port()
        self.slots = slots
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.started_in_s: float | None = None

    @property
    def rest_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.rest_port}"

    def env(self) -> dict[str, str]:
        """The environment of the cluster's processes and of the ``flink`` CLI.

        ``PYTHONPATH`` holds the project and the venv's ``site-packages``: thread mode runs the
        Python functions inside the TaskManager's JVM with the base interpreter (see
        ``flink_agents_py.flink._environment``), which must import the package and our jobs.
        """
        env = dict(os.environ)
        site = sysconfig.get_paths()["purelib"]
        env.update({
            "FLINK_HOME": str(self.home),
            "FLINK_CONF_DIR": str(self.conf_dir),
            "FLINK_LOG_DIR": str(self.log_dir),
            "PYTHONPATH": os.pathsep.join([str(ROOT), site]),
            "PYFLINK_CLIENT_EXECUTABLE": sys.executable,
        })
        return env

    def _write_conf(self) -> None:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for f in (self.home / "conf").iterdir():
            if f.name != "config.yaml":
                shutil.copy(f, self.conf_dir / f.name)
        cfg = yaml.safe_load((self.home / "conf" / "config.yaml").read_text()) or {}
        for key, value in {
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
            "python.executable": sys.executable,
            "python.client.executable": sys.executable,
        }.items():
            _set(cfg, key, value)
        (self.conf_dir / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))

    def _start(self, name: str, script: str) -> None:
        out = open(self.log_dir / f"{name}.out", "wb")  # noqa: SIM115 (child owns it)
        self.procs[name] = subprocess.Popen(
            ["bash", str(self.home / "bin" / script), "start-foreground"], env=self.env(),
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.workdir)
        out.close()

    def rest(self, path: str, timeout_s: float = 5.0) -> Any:
        """GET ``path`` of the REST API, as JSON."""
        with urllib.request.urlopen(self.rest_url + path, timeout=timeout_s) as resp:
            return json.loads(resp.read())

    def start(self, timeout_s: float = 120.0) -> FlinkCluster:
        """Start the JobManager and the TaskManager; wait until the TaskManager's slots are
        registered.

        Raises:
            RuntimeError: when a process exits or the slots do not show up in time.
        """
        t0 = time.monotonic()
        self._write_conf()
        self._start("jobmanager", "jobmanager.sh")
        self._start("taskmanager", "taskmanager.sh")
        try:
            while True:
                for name, proc in self.procs.items():
                    if proc.poll() is not None:
                        raise RuntimeError(f"the {name} exited with {proc.returncode}:\n"
                                           f"{self.logs_tail()}")
                try:
                    if self.rest("/overview", timeout_s=2).get("slots-total", 0) >= self.slots:
                        break
                except OSError:
                    pass
                if time.monotonic() - t0 > timeout_s:
                    raise RuntimeError(f"the cluster was not ready in time:\n{self.logs_tail()}")
                time.sleep(0.5)
        except BaseException:
            self.stop()
            raise
        self.started_in_s = time.monotonic() - t0
        return self

    def flink(self, *args: str, timeout_s: float = 300.0, **popen: Any) -> subprocess.Popen[str]:
        """Start the ``flink`` CLI (``pyflink/bin/flink``) against this cluster."""
        return subprocess.Popen(["bash", str(self.home / "bin" / "flink"), *args], env=self.env(),
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True, **popen)

    def logs_tail(self, n: int = 40) -> str:
        """The last lines of every log file."""
        parts = []
        for f in sorted(self.log_dir.glob("*")):
            lines = f.read_text(errors="replace").splitlines()[-n:]
            parts.append(f"== {f.name}\n" + "\n".join(lines))
        return "\n".join(parts)

    def stop(self, grace_s: float = 20.0) -> None:
        """Stop both processes by PID: SIGTERM, SIGKILL after ``grace_s``."""
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
