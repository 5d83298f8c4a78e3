"""What Flink's Python workers need to import an agent, set on the environment before submission.

Facts measured on apache-flink 2.3.0 (JDK 17) that shape this module:

- Thread mode (pemja) embeds the *base* CPython of ``python.executable`` in the TaskManager's
  JVM: ``site`` runs for the base prefix, so neither a venv's ``site-packages`` nor the ``.pth``
  import hooks of editable installs (``pip install -e``) are seen there.
- Process mode runs ``python.executable`` as a subprocess (``-m``), whose ``sys.path`` starts
  with the TaskManager's working directory; the venv's ``.pth`` files are processed.
- ``python.pythonpath`` (directories on the worker's machine) and ``python.files``
  (``add_python_file``: shipped with the job) both reach the workers' ``PYTHONPATH`` in either
  mode, and both can be set on an environment whose JVM already runs. So a plain
  ``StreamExecutionEnvironment`` can be fixed up when it is handed to
  ``AgentsExecutionEnvironment.flink(env)``.

On a local MiniCluster (``execution.target: local``) the workers share this machine: the
client's import path goes on ``python.pythonpath``, and a module loaded through an import hook
(an editable install) gets a directory holding a link to it. On a cluster (any other target)
the modules loaded from outside ``site-packages`` and the standard library (the user's own
modules, an editable ``flink_agents_py``) are shipped with ``add_python_file``, unless
``python.files`` (``flink run -pyfs``) already ships them.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import site
import socket
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..api import AgentsError
from ._quiet import quiet_worker_environment_dumps

__all__ = ["WorkerSetup", "WorkerSetupError", "config_getter", "configure_workers"]

_log = logging.getLogger(__name__)

_NEVER_SHIPPED = frozenset({"pyflink", "py4j", "cloudpickle", "pemja", "apache_beam",
                            "google", "_distutils_hack"})
"""Top-level modules a worker has from its own installation, wherever the client got them."""

_PYTHON_FILES = "python.files"
_PYTHON_PATH = "python.pythonpath"


class WorkerSetupError(AgentsError):
    """Flink's Python workers could not import the agent; raised before the job is submitted."""

    __module__ = "flink_agents_py.flink"  # its public home, shown in tracebacks


@dataclass
class WorkerSetup:
    """What ``configure_workers`` found and set.

    Attributes:
        execution_mode: ``"thread"`` or ``"process"`` (``python.execution-mode``).
        target: ``execution.target`` (``"local"`` for a MiniCluster, ``"remote"`` under
            ``flink run``).
        python_executable: the workers' interpreter (``python.executable``), or ``None`` when
            the cluster's configuration decides.
        python_path: what is on ``python.pythonpath`` (local target; on a cluster in thread
            mode with this venv's interpreter, its site-packages).
        shipped: files and archives added with ``add_python_file`` (cluster target).
    """

    execution_mode: str
    target: str
    python_executable: str | None
    python_path: list[str] = field(default_factory=list)
    shipped: list[str] = field(default_factory=list)


def _env_config(env: Any) -> Any:
    j_env = getattr(env, "_j_stream_execution_environment", None)
    if j_env is None:
        raise TypeError("AgentsExecutionEnvironment.flink(env) takes a "
                        "pyflink.datastream.StreamExecutionEnvironment, got "
                        f"{type(env).__module__}.{type(env).__qualname__}")
    from pyflink.java_gateway import get_gateway

    return get_gateway().jvm.org.apache.flink.python.util.PythonConfigUtil.getEnvironmentConfig(
        j_env)


def config_getter(env: Any) -> Any:
    """``key -> str | None``: reads the environment's configuration (as set so far)."""
    cfg = _env_config(env)

    def get(key: str) -> str | None:
        value = cfg.getString(key, None)
        return None if value is None else str(value)

    return get


def on_local_target(env: Any) -> bool:
    """Whether the environment's job runs on a local MiniCluster, not on a cluster.

    Returns:
        True when ``execution.target`` is unset or ``local``.
    """
    return (config_getter(env)("execution.target") or "local") == "local"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(path or os.getcwd()))


def _stdlib_dirs() -> set[str]:
    paths = sysconfig.get_paths()
    return {_real(paths[k]) for k in ("stdlib", "platstdlib") if k in paths}


def _site_dirs() -> set[str]:
    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    if site.ENABLE_USER_SITE and hasattr(site, "getusersitepackages"):
        dirs.append(site.getusersitepackages())
    paths = sysconfig.get_paths()
    dirs += [paths.get("purelib", ""), paths.get("platlib", "")]
    return {_real(d) for d in dirs if d}


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r + os.sep) for r in roots)


@dataclass(frozen=True)
class _Module:
    name: str
    location: str  # a package directory or a module file
    root: str      # the directory that makes ``name`` importable

    @property
    def is_package(self) -> bool:
        return os.path.isdir(self.location)


def _loaded_top_level_modules() -> list[_Module]:
    """Top-level modules of this process that come from files, with where they live."""
    found: list[_Module] = []
    for name, mod in sys.modules.copy().items():  # a copy: see _fresh.FORGET_STALE_MODULES
        if "." in name or name == "__main__" or mod is None:
            continue
        file = getattr(mod, "__file__", None)
        if not file:
            continue  # built-in or namespace package
        file = _real(file)
        location = os.path.dirname(file) if getattr(mod, "__path__", None) is not None else file
        if os.path.basename(location).split(".")[0] != name or not os.path.exists(location):
            continue  # e.g. loaded from a zip, or a module aliased under another name
        found.append(_Module(name, location, os.path.dirname(location)))
    return sorted(found, key=lambda m: m.name)


def _state_dir(*parts: str) -> str:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    path = os.path.join(tempfile.gettempdir(), f"flink-agents-py-{uid}", *parts)
    os.makedirs(path, exist_ok=True)
    return path


def _link_dir(module: _Module) -> str:
    """A directory holding only a link named ``module.name`` to its location."""
    digest = hashlib.sha1(module.location.encode()).hexdigest()[:16]
    folder = _state_dir("import-links", digest)
    link = os.path.join(folder, os.path.basename(module.location))
    if os.path.realpath(link) != module.location:
        tmp = f"{link}.{os.getpid()}.tmp"
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(module.location, tmp)
        os.replace(tmp, link)
    return folder


def _zip_package(module: _Module) -> str:
    """A zip archive of the package (without caches), named after its content."""
    files: list[tuple[str, str]] = []
    for dirpath, dirnames, filenames in os.walk(module.location, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        for f in sorted(filenames):
            if not f.endswith((".pyc", ".pyo")):
                full = os.path.join(dirpath, f)
                files.append((full, os.path.relpath(full, module.root)))
    digest = hashlib.sha1()
    for full, rel in files:
        st = os.stat(full)
        digest.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    path = os.path.join(_state_dir("ship"), f"{module.name}-{digest.hexdigest()[:16]}.zip")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
            for full, rel in files:
                zf.write(full, rel)
        os.replace(tmp, path)
    return path


def _names_shipped(python_files: list[str]) -> set[str]:
    """Top-level module names that ``python.files`` entries provide (zips: unknown, skipped)."""
    names: set[str] = set()
    for entry in python_files:
        if os.path.isdir(entry):
            for f in os.listdir(entry):
                full = os.path.join(entry, f)
                if f.endswith(".py") or (os.path.isdir(full) and f.isidentifier()):
                    names.add(f.split(".")[0])
        elif entry.endswith(".py"):
            names.add(os.path.basename(entry)[:-3])
        elif entry.endswith((".zip", ".whl", ".egg", ".jar")) and os.path.isfile(entry):
            try:
                with zipfile.ZipFile(entry) as zf:
                    names.update(n.split("/")[0].split(".")[0] for n in zf.namelist())
            except zipfile.BadZipFile:
                pass
    return names


def _resolve_executable(exe: str) -> str | None:
    if os.sep in exe:
        return exe if os.path.exists(exe) else None
    return shutil.which(exe)


_CHECKED: set[tuple[str, ...]] = set()
"""Interpreter checks that passed (``configure_workers`` runs for the environment and again
for each agent applied)."""


def _check_interpreter(exe: str, python_path: list[str], modules: list[str], mode: str) -> None:
    """Import what the workers import with ``exe``; raise ``WorkerSetupError`` if it fails."""
    memo = (exe, mode, os.pathsep.join(python_path), *modules)
    if memo in _CHECKED:
        return
    found = _resolve_executable(exe)
    if found is None:
        raise WorkerSetupError(
            f"python.executable {exe!r} (the Flink Python workers' interpreter) does not exist: "
            f"set python.executable to an interpreter with apache-flink and flink-agents-py, "
            f"e.g. env.set_python_executable({sys.executable!r})")
    wanted = ["pyflink", "flink_agents_py", *modules] + (["pemja"] if mode == "thread" else [])
    code = ("import importlib, sys\nbad = []\nfor m in sys.argv[1:]:\n    try:\n"
            "        importlib.import_module(m)\n    except Exception as e:\n"
            "        bad.append(f'{m} ({type(e).__name__}: {e})')\nprint('; '.join(bad))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(python_path), PYFLINK_GATEWAY_DISABLED="1")
    try:
        res = subprocess.run([found, "-c", code, *wanted], env=env, capture_output=True,
                             text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise WorkerSetupError(f"python.executable {exe!r} could not be run ({e}): set "
                               f"python.executable, e.g. env.set_python_executable("
                               f"{sys.executable!r})") from e
    missing = res.stdout.strip() or (res.stderr.strip().splitlines() or [""])[-1]
    if res.returncode != 0 or missing:
        raise WorkerSetupError(
            f"python.executable {exe!r} (the Flink Python workers' interpreter) cannot import "
            f"{missing}: set python.executable to an interpreter that has them, e.g. "
            f"env.set_python_executable({sys.executable!r})")
    _CHECKED.add(memo)


def _same_interpreter(exe: str) -> bool:
    found = _resolve_executable(exe)
    return found is not None and (
        os.path.abspath(found) == os.path.abspath(sys.executable)
        or _real(found) == _real(sys.executable) and sys.prefix == sys.base_prefix)


def configure_workers(env: Any, modules: Iterable[str] = ()) -> WorkerSetup:
    """Set on ``env`` what its Python workers need to import the agent; check what it cannot set.

    Call it before the job is submitted (``AgentsExecutionEnvironment.flink(env)`` and
    ``apply`` do). Idempotent.

    On a local MiniCluster: ``python.executable`` and ``python.client.executable`` default
    to this interpreter; ``python.pythonpath`` gets this process's import path (thread mode's
    embedded interpreter does not see a venv otherwise) and a link directory for each module
    loaded through an import hook (editable installs); process mode gets a small bundle
    unless one is configured, and the MiniCluster's log no dump of the workers' environment
    (``quiet_worker_environment_dumps``: it holds the API keys); the REST API gets a free
    port range (``rest.bind-port``) and 1 s metric updates, for progress bars. On a
    cluster: the modules loaded from outside ``site-packages`` and the standard library are
    shipped with ``add_python_file``, unless ``python.files`` provides them already.

    Args:
        env: a ``pyflink.datastream.StreamExecutionEnvironment``.
        modules: modules the workers import (the agent's), checked when the workers use
            another interpreter than this one.

    Returns:
        What was found and set.

    Raises:
        TypeError: when ``env`` is not a PyFlink ``StreamExecutionEnvironment``.
        WorkerSetupError: when the workers' interpreter cannot import what they need (with
            what to set).
    """
    cfg = _env_config(env)
    get = config_getter(env)

    mode = get("python.execution-mode")
    target = get("execution.target") or "local"
    executable = get("python.executable")
    if mode is None and target == "local" and (
            executable is None or _same_interpreter(executable)):
        # a plain environment (PyFlink's default is process mode): thread mode, as
        # ``create_stream_environment``; in process mode the end of bounded input drains
        # one key at a time, so keys stop overlapping their calls there
        cfg.setString("python.execution-mode", "thread")
        mode = "thread"
    mode = (mode or "process").lower()
    setup = WorkerSetup(execution_mode=mode, target=target,
                        python_executable=get("python.executable"))
    modules = [m for m in dict.fromkeys(modules) if m and m != "__main__"]
    loaded = _loaded_top_level_modules()
    stdlib, sites = _stdlib_dirs(), _site_dirs()
    if target == "local":
        _configure_local(env, cfg, get, setup, loaded, stdlib, sites, modules)
    else:
        _configure_cluster(env, get, setup, loaded, stdlib, sites)
        _venv_for_embedded_workers(cfg, get, setup)
    return setup


def _venv_for_embedded_workers(cfg: Any, get: Any, setup: WorkerSetup) -> None:
    """On a cluster in thread mode with this venv's interpreter: its site-packages on the path.

    Thread mode embeds the *base* CPython of ``python.executable`` in the TaskManager, which
    sees no venv's ``site-packages``: a TaskManager started as the cluster page starts it
    (``start-cluster.sh``, no ``PYTHONPATH``) failed every task with "No module named
    'pemja'" (and every restart after it with pemja's ``loadedLibraryNames``). When the
    workers run this very interpreter (``flink run -pyexec`` of this venv, on this machine or
    one laid out alike), its ``site-packages`` go on ``python.pythonpath``, after what is
    there; a directory missing on a TaskManager's machine is skipped by Python.
    """
    exe = setup.python_executable
    if (setup.execution_mode != "thread" or sys.prefix == sys.base_prefix or exe is None
            or not _same_interpreter(exe)):
        return
    paths = sysconfig.get_paths()
    venv = [d for d in (paths.get("purelib"), paths.get("platlib")) if d]
    existing = [p for p in (get(_PYTHON_PATH) or "").split(os.pathsep) if p]
    path = list(dict.fromkeys([*existing, *venv]))
    cfg.setString(_PYTHON_PATH, os.pathsep.join(path))
    setup.python_path = path


def _configure_local(env: Any, cfg: Any, get: Any, setup: WorkerSetup, loaded: list[_Module],
                     stdlib: set[str], sites: set[str], modules: list[str]) -> None:
    if setup.python_executable is None:
        env.set_python_executable(sys.executable)
        setup.python_executable = sys.executable
    if get("python.client.executable") is None:
        cfg.setString("python.client.executable", sys.executable)
    if get("rest.port") is None and get("rest.bind-port") is None:
        # a known place for the job's REST API (progress bars read the agent metrics there)
        port = _free_port()
        cfg.setString("rest.bind-port", f"{port}-{min(port + 9, 65535)}")
    if get("metrics.fetcher.update-interval") is None:
        # fresh numbers for the bar: a short run (a few seconds) then shows its progress
        # instead of jumping from 0 to done (the fetch is in-process, local only)
        cfg.setString("metrics.fetcher.update-interval", "250")
    if setup.execution_mode == "process":
        for key, value in (("python.fn-execution.bundle.size", "1000"),
                           ("python.fn-execution.bundle.time", "5")):
            if get(key) is None:
                cfg.setString(key, value)
        quiet_worker_environment_dumps()  # the workers' environment holds the API keys
    same = _same_interpreter(setup.python_executable)
    entries = [_real(p) for p in [os.getcwd(), *sys.path] if os.path.isdir(_real(p))]
    if not same:  # another interpreter: only the user's directories, not our stdlib or venv
        entries = [p for p in entries if not _under(p, stdlib) and not _under(p, sites)]
    literal = {_real(p) for p in sys.path if p}
    links = [_link_dir(m) for m in loaded
             if m.root not in literal and not _under(m.location, stdlib)]
    existing = [p for p in (get(_PYTHON_PATH) or "").split(os.pathsep) if p]
    path = list(dict.fromkeys([*existing, *links, *entries]))
    cfg.setString(_PYTHON_PATH, os.pathsep.join(path))
    setup.python_path = path
    if not same:
        _check_interpreter(setup.python_executable, path, modules, setup.execution_mode)


def _configure_cluster(env: Any, get: Any, setup: WorkerSetup, loaded: list[_Module],
                       stdlib: set[str], sites: set[str]) -> None:
    from pyflink.java_gateway import get_gateway

    delimiter = str(get_gateway().jvm.org.apache.flink.python.util.PythonDependencyUtils
                    .FILE_DELIMITER)
    files = [f for f in (get(_PYTHON_FILES) or "").split(delimiter) if f]
    provided = _names_shipped(files)
    for m in loaded:
        if (m.name in provided or m.name in _NEVER_SHIPPED or _under(m.location, stdlib)
                or _under(m.location, sites)):
            continue
        if m.is_package:
            shipped = _zip_package(m)
        elif m.location.endswith(".py"):
            shipped = m.location
        else:
            continue  # a compiled extension outside site-packages: the cluster must have it
        if shipped not in files:
            env.add_python_file(shipped)
            files.append(shipped)
            setup.shipped.append(shipped)
            _log.info("shipping %s to the Python workers as %s", m.name, shipped)
