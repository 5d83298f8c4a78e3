"""Restores in another process, under another ``PYTHONHASHSEED``.

A set of strings iterates in an order that depends on the process's hash seed, so an action
whose durable calls follow such an order makes them in another order after a restore on a
restarted TaskManager. The checker shows it by restoring the snapshots it took in its own
process in a new Python process started with another seed (``python -m
flink_agents_py.testing._process``), and judging what that process observed against the
fault-free run.

The child gets the agent's plan, the records and the user's callables pickled with
cloudpickle (as PyFlink ships a plan to its workers), and imports the agent's actions by
``module:qualname``: they must be defined at the top level of an importable module. When
they are not (an agent class defined inside a test function, or in ``__main__``), or
something cannot be pickled, the check stays in this process and says why.
"""

from __future__ import annotations

import importlib
import json
import os
import pickle
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from typing import Any

from ..plan import AgentPlan
from ._runs import Observed, Setup, run_recovery

__all__ = ["draw_seeds", "restore_elsewhere", "not_importable"]

TIMEOUT_S = 600.0
"""The longest one other process may take for its share of the points, in seconds."""


def _functions(plan: AgentPlan, where: str) -> Iterator[tuple[str, Any]]:
    for name, act in plan.actions.items():
        yield f"{where}action {name!r}", act.function
    for name, sub in plan.subagents.items():
        yield from _functions(sub, f"{where}sub-agent {name!r}: ")


def not_importable(plan: AgentPlan) -> str:
    """Why another process could not import the plan's actions by ``module:qualname``.

    Args:
        plan: the plan (its sub-agents' plans included).

    Returns:
        The first reason found, or '' when every action is importable.
    """
    for where, ref in _functions(plan, ""):
        module, _, qualname = ref.path.partition(":")
        if module == "None":  # ``FunctionRef.of`` of a function whose ``__module__`` is None
            return (f"{where} is {qualname}, defined by code that has no module (run by "
                    "exec() without a __name__ in its globals), which another process cannot "
                    "import: define the agent in a module")
        if module == "__main__" or "<locals>" in qualname:
            return (f"{where} is {ref.path}, which another process cannot import by "
                    "module:qualname: define the agent at the top level of a module "
                    "(not inside a test function, nor in __main__)")
        try:
            found: Any = importlib.import_module(module)
            for part in qualname.split("."):
                found = getattr(found, part)
        except (ImportError, AttributeError) as e:
            return (f"{where} is {ref.path}, which cannot be imported by module:qualname "
                    f"({type(e).__name__}: {e}): put its module on sys.path")
    return ""


def draw_seeds(hash_seeds: int | Sequence[int]) -> list[int]:
    """The other processes' seeds: those given, or as many drawn at random.

    Args:
        hash_seeds: seeds, or how many to draw (never this process's own).

    Returns:
        The seeds.

    Raises:
        ValueError: when a count is below 1, or a seed is out of range or this process's.
    """
    own = os.environ.get("PYTHONHASHSEED", "")
    if isinstance(hash_seeds, int):
        if hash_seeds < 1:
            raise ValueError(f"hash_seeds must be >= 1 (or a list of seeds), got {hash_seeds}")
        draw = random.SystemRandom()
        seeds: list[int] = []
        while len(seeds) < hash_seeds:
            seed = draw.randrange(1, 2**32)
            if str(seed) != own and seed not in seeds:
                seeds.append(seed)
        return seeds
    seeds = [int(s) for s in hash_seeds]
    bad = [s for s in seeds if not 0 <= s < 2**32 or str(s) == own]
    if not seeds or bad:
        raise ValueError(f"hash_seeds: give seeds in [0, 2**32) other than this process's "
                         f"PYTHONHASHSEED ({own or 'random'}); got {list(hash_seeds)}")
    return seeds


def restore_elsewhere(setup: Setup, points: list[tuple[int, str | None]], seeds: list[int]
                      ) -> tuple[list[tuple[int, int, Observed]], str]:
    """Restore each point once more in another process; the points shared among the seeds.

    Args:
        setup: how to run the agent.
        points: ``(point, snapshot JSON text)`` to restore.
        seeds: the seeds (``draw_seeds``).

    Returns:
        ``(point, seed, what the recovery observed)`` per point restored, and a note for
        the report: the seeds used, or why no other process ran.
    """
    reason = not_importable(setup.plan)
    if reason:
        return [], f"skipped: {reason}"
    try:
        import cloudpickle  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - a dependency
        return [], "skipped: cloudpickle is not installed"
    done: list[tuple[int, int, Observed]] = []
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="flink-agents-restore-") as d:
        shares = [(i, seed, points[i::len(seeds)]) for i, seed in enumerate(seeds)]
        try:
            bodies = [(i, seed, cloudpickle.dumps((setup, share)))
                      for i, seed, share in shares if share]
        except Exception as e:  # noqa: BLE001 - anything unpicklable: say what
            return [], (f"skipped: the agent or a callable given to the checker cannot be "
                        f"pickled ({type(e).__name__}: {e})")
        started = []
        for i, seed, body in bodies:  # the processes run side by side
            src, dst, log = (os.path.join(d, f"{what}-{i}") for what in ("in", "out", "log"))
            with open(src, "wb") as f:
                f.write(json.dumps({"sys_path": sys.path}).encode() + b"\n" + body)
            with open(log, "wb") as out:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "flink_agents_py.testing._process", src, dst],
                    env={**os.environ, "PYTHONHASHSEED": str(seed)}, stdout=out,
                    stderr=subprocess.STDOUT)
            started.append((seed, proc, dst, log))
        deadline = time.monotonic() + TIMEOUT_S
        for seed, proc, dst, log in started:
            try:
                code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                problems.append(f"PYTHONHASHSEED={seed}: stopped after {TIMEOUT_S:.0f} s")
                continue
            if code != 0 or not os.path.exists(dst):
                with open(log, encoding="utf-8", errors="replace") as f:
                    tail = f.read().strip().splitlines()[-6:]
                problems.append(f"PYTHONHASHSEED={seed}: the process exited with {code}: "
                                + " | ".join(tail))
                continue
            with open(dst, "rb") as f:
                for point, observed in pickle.load(f):
                    done.append((point, seed, observed))
    done.sort(key=lambda item: (item[0], item[1]))
    where = ", ".join(str(s) for s in seeds)
    note = f"{len(done)} points restored again (PYTHONHASHSEED={where})"
    return done, note + "".join(f"; {p}" for p in problems)


def _main(src: str, dst: str) -> None:
    with open(src, "rb") as f:
        header = json.loads(f.readline())
        sys.path[:] = header["sys_path"]
        setup, share = pickle.load(f)
    out = [(point, run_recovery(setup, snapshot)) for point, snapshot in share]
    with open(dst + ".part", "wb") as f:
        pickle.dump(out, f)
    os.replace(dst + ".part", dst)


if __name__ == "__main__":
    _main(sys.argv[1], sys.argv[2])
