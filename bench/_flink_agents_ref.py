"""P1's reference point: Apache Flink Agents 0.3.1's pure-Python local execution environment
running the same echo agent over the same records.

Two halves in one file:

- imported by ``bench`` (this project's venv): :func:`measure` makes sure a separate venv
  holds ``flink-agents==0.3.1`` (created on first use, in
  ``${FLINK_AGENTS_PY_CACHE:-~/.cache/flink-agents-py}/ref-venv``), then runs this file with
  that venv's Python and returns its figures, or ``{"available": False, "reason": ...}``;
  it never raises.
- run as a script by that venv's Python: times the echo agent and prints one JSON line.

The reference venv is installed with ``FLINK_AGENTS_SKIP_JAR_DOWNLOAD=1`` (the local
environment needs no jar). flink-agents does not declare ``apache-flink`` but imports
``pyflink`` at module level (types only: the local environment starts no JVM), so
``apache-flink`` is installed next to it, there and never in this project's venv. Their
dependencies never touch ours (about 1.3 GB, 1-3 minutes to install). Only runs at
``BENCH_SCALE=1`` install it; smoke runs use it when it is there. ``BENCH_FLINK_AGENTS_REF=0``
skips the comparison; a failed install is remembered (``ref-venv.failed``, its reason in the
results) and not retried for a day.

Same agent: one async action on ``InputEvent`` sending ``OutputEvent({"key": ctx.key,
"echo": event.input})``. Same input: ``bench._local.echo_records`` (``{"key": "k<i % keys>",
"n": i}``), fed as ``{"key": r["key"], "value": r}`` (their ``from_list`` format) so the
action's input is the record itself. Timed: ``execute()`` only (``apply()`` compiles the plan
before), best of N runs, each on a fresh environment (one ``execute()`` per environment).

Their local runner logs every event at INFO (``logging.basicConfig(level=INFO)`` on import).
``shipped`` keeps that (the handler's stream pointed at ``/dev/null``: formatting and a write
per log line, as with stderr redirected to a file); ``quiet`` sets the runner's logger to
WARNING, leaving the engine alone.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

FLINK_AGENTS_VERSION = "0.3.1"
APACHE_FLINK_VERSION = "2.3.0"  # any pyflink it supports; the local environment only imports it
REQUIREMENTS = [f"flink-agents=={FLINK_AGENTS_VERSION}", f"apache-flink=={APACHE_FLINK_VERSION}"]
INSTALL_TIMEOUT_S = 1800
RETRY_FAILED_AFTER_S = 24 * 3600

__all__ = ["FLINK_AGENTS_VERSION", "ref_venv", "ensure_ref_venv", "measure"]


# -- parent side (this project's venv) -------------------------------------------------------
def _log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def ref_venv() -> Path:
    root = os.environ.get("FLINK_AGENTS_PY_CACHE") or "~/.cache/flink-agents-py"
    return Path(root).expanduser() / "ref-venv"


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _marker(venv: Path) -> Path:
    return venv / f".flink-agents-{FLINK_AGENTS_VERSION}.ok"


def _failed(venv: Path) -> Path:
    return venv.with_name(venv.name + ".failed")


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join((text or "").strip().splitlines()[-lines:])


def ensure_ref_venv(install: bool = True) -> dict[str, Any]:
    """The reference venv's python (``{"python": path, "install_s": s or None}``), installing
    it when missing (if ``install``), or ``{"error": reason}``."""
    venv = ref_venv()
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.with_name(venv.name + ".lock"), "w") as lock:  # one installer at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _ensure_locked(venv, install)


def _ensure_locked(venv: Path, install: bool) -> dict[str, Any]:
    if _marker(venv).exists() and _python(venv).exists():
        return {"python": str(_python(venv)), "install_s": None}
    if not install:
        return {"error": f"reference venv not installed ({venv}); a run at BENCH_SCALE=1 "
                         "installs it"}
    failed = _failed(venv)
    if failed.exists() and time.time() - failed.stat().st_mtime < RETRY_FAILED_AFTER_S:
        return {"error": f"install failed less than a day ago (delete {failed} to retry): "
                         + failed.read_text().strip()[:2000]}
    if not (3, 10) <= sys.version_info[:2] <= (3, 12):
        return {"error": f"flink-agents {FLINK_AGENTS_VERSION} needs Python 3.10-3.12, "
                         f"this is {sys.version.split()[0]}"}
    _log(f"p1: installing {' '.join(REQUIREMENTS)} into {venv} (once; 1-3 minutes)")
    t = time.perf_counter()
    shutil.rmtree(venv, ignore_errors=True)
    env = {**os.environ, "FLINK_AGENTS_SKIP_JAR_DOWNLOAD": "1",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    steps = [[sys.executable, "-m", "venv", str(venv)],
             [str(_python(venv)), "-m", "pip", "install", "--quiet", *REQUIREMENTS],
             [str(_python(venv)), "-c", "import flink_agents.runtime.local_execution_environment"]]
    reason = ""
    for cmd in steps:
        try:
            p = subprocess.run(cmd, env=env, capture_output=True, text=True,
                               timeout=INSTALL_TIMEOUT_S, cwd=str(venv.parent))
        except (OSError, subprocess.TimeoutExpired) as e:
            reason = f"{' '.join(cmd[:4])}: {e}"
            break
        if p.returncode != 0:
            reason = f"{' '.join(cmd[:5])} exited {p.returncode}: {_tail(p.stderr or p.stdout)}"
            break
    dt = time.perf_counter() - t
    if reason:
        shutil.rmtree(venv, ignore_errors=True)
        failed.write_text(reason + "\n")
        _log(f"p1: flink-agents reference install failed after {dt:.0f} s: {reason[:300]}")
        return {"error": f"install failed: {reason}"}
    failed.unlink(missing_ok=True)
    _marker(venv).write_text(f"{' '.join(REQUIREMENTS)}\ninstall_s {dt:.1f}\n")
    _log(f"p1: flink-agents reference venv installed in {dt:.0f} s")
    return {"python": str(_python(venv)), "install_s": dt}


def measure(sizes: list[int], keys: int, repeats: int, install: bool = True,
            timeout_s: float = 1800) -> dict[str, Any]:
    """Figures of flink-agents' local environment per size (``{"available": True, "sizes":
    {n: {...}}, ...}``) or ``{"available": False, "reason": ...}``. Never raises. Installs the
    reference venv when missing only if ``install``."""
    if os.environ.get("BENCH_FLINK_AGENTS_REF", "1").strip().lower() in ("0", "no", "off"):
        return {"available": False, "reason": "skipped (BENCH_FLINK_AGENTS_REF=0)"}
    try:
        venv = ensure_ref_venv(install)
        if "error" in venv:
            return {"available": False, "reason": venv["error"]}
        cmd = [venv["python"], str(Path(__file__).resolve()), "--keys", str(keys),
               "--repeats", str(repeats), "--sizes", ",".join(str(n) for n in sizes)]
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        t = time.perf_counter()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s,
                           cwd=str(Path(__file__).resolve().parent))
        wall = time.perf_counter() - t
        if p.returncode != 0:
            return {"available": False, "install_s": venv["install_s"],
                    "reason": f"reference run exited {p.returncode}: {_tail(p.stderr)}"}
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        data = json.loads(lines[-1])
        data.update(available=True, install_s=venv["install_s"], subprocess_wall_s=wall,
                    python=venv["python"])
        return data
    except Exception as e:  # the comparison must never fail the benchmark
        return {"available": False, "reason": f"{type(e).__name__}: {e}"}


# -- child side (the reference venv's python) ------------------------------------------------
def _records(n: int, keys: int) -> list[dict[str, Any]]:
    # the same records as bench._local.echo_records, in from_list's {"key", "value"} shape
    out = []
    for i in range(n):
        r = {"key": f"k{i % keys}", "n": i}
        out.append({"key": r["key"], "value": r})
    return out


def _child_time(records: list[dict[str, Any]]) -> float:
    from flink_agents.api.execution_environment import AgentsExecutionEnvironment

    env = AgentsExecutionEnvironment.get_execution_environment()  # no Flink env: the local one
    builder = env.from_list(records).apply(RefEchoAgent())  # noqa: F821 (defined below)
    t = time.perf_counter()
    env.execute()
    dt = time.perf_counter() - t
    outputs = builder.to_list()
    if len(outputs) != len(records):
        raise RuntimeError(f"{len(outputs)} outputs for {len(records)} records")
    first, last = records[0], records[-1]
    for rec, out in ((first, outputs[0]), (last, outputs[-1])):
        want = {rec["key"]: {"key": rec["key"], "echo": rec["value"]}}
        if out != want:
            raise RuntimeError(f"unexpected output {out!r}, wanted {want!r}")
    return dt


def _child_main(argv: list[str]) -> int:
    import argparse
    import importlib.metadata as md
    import logging

    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", required=True)
    ap.add_argument("--keys", type=int, required=True)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)

    import flink_agents.runtime.local_runner as lr  # configures INFO logging to stderr

    runner_logger = logging.getLogger(lr.__name__)
    devnull = open(os.devnull, "w")  # noqa: SIM115 (lives as long as the process)
    for h in logging.getLogger().handlers:  # shipped logging, discarded output
        if isinstance(h, logging.StreamHandler):
            h.setStream(devnull)
    modes = {"shipped": logging.NOTSET, "quiet": logging.WARNING}
    result: dict[str, Any] = {
        "flink_agents": md.version("flink-agents"), "apache_flink": md.version("apache-flink"),
        "ref_python": sys.version.split()[0], "keys": args.keys, "repeats": args.repeats,
        "root_log_level": logging.getLevelName(logging.getLogger().level), "sizes": {},
    }
    for size in [int(s) for s in args.sizes.split(",") if s]:
        keys = min(args.keys, size)
        records = _records(size, keys)
        row: dict[str, Any] = {"records": size, "keys": keys}
        for mode, level in modes.items():
            runner_logger.setLevel(level)
            _child_time(records[: min(size, 500)])  # warm imports and caches
            runs = [_child_time(records) for _ in range(args.repeats)]
            best = min(runs)
            row[mode] = {"rps": size / best, "us_per_record": best / size * 1e6, "runs_s": runs}
        result["sizes"][str(size)] = row
    runner_logger.setLevel(logging.NOTSET)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    # Module level, so that flink-agents' plan can resolve the action by module and qualname
    # (``__main__.RefEchoAgent.echo``).
    from flink_agents.api.agents.agent import Agent
    from flink_agents.api.decorators import action
    from flink_agents.api.events.event import Event, InputEvent, OutputEvent
    from flink_agents.api.runner_context import RunnerContext

    class RefEchoAgent(Agent):
        """bench._agents.EchoAgent, in flink-agents' API."""

        @action(InputEvent.EVENT_TYPE)
        @staticmethod
        async def echo(event: Event, ctx: RunnerContext) -> None:
            ctx.send_event(OutputEvent(output={"key": ctx.key, "echo": event.input}))

    sys.exit(_child_main(sys.argv[1:]))
