"""Byte-compile the packages a job's Python processes import (run by ``scripts/setup.sh``).

Every Python process of a job imports PyFlink, which imports Apache Beam, pandas, NumPy,
botocore, pymongo and more (about 1,300 modules): the client, each TaskManager's embedded
interpreter (thread mode) and each Python worker (process mode), and each test's
subprocess. uv installs packages without compiling them (pip compiles), and where
``PYTHONDONTWRITEBYTECODE=1`` is set (containers, CI machines) no import ever writes the
compiled files either, so each of those processes compiled all of it from source again:
about 2.3 s of CPU more per process start (4.0-4.2 s instead of 1.7-1.9 s to import
``pyflink.datastream``, ``flink_agents_py.flink`` and the Python worker's
``pyflink.fn_execution.beam.beam_operations``, 1,600 modules, on this project's 2-core
machine; a TaskManager's interpreter imports the same when its first Python operator opens).

This imports what a job's processes import (the TaskManager's thread-mode modules import
only inside a TaskManager; their package, ``pyflink``, is compiled whole), then compiles
every package (whole, so its submodules imported later are covered) that the imports
reached in the venv's site-packages, and this project's package. ``compileall`` writes the
files whatever ``PYTHONDONTWRITEBYTECODE`` says; files compiled and unchanged are skipped.

    python scripts/compile_bytecode.py     # prints what it compiled and how long it took
"""

from __future__ import annotations

import compileall
import importlib
import os
import sys
import sysconfig
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WARM = (
    "pyflink.datastream",                          # the client's job graph
    "pyflink.table",
    "pyflink.fn_execution.beam.beam_operations",   # a Python worker (process mode)
    "flink_agents_py",
    "flink_agents_py.flink",
)
"""Modules whose imports pull in what a job's processes run."""


def _reached_packages(site: Path) -> list[Path]:
    """The top-level packages (or single-file modules) under ``site`` that are imported now."""
    found: set[Path] = set()
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if not file:
            continue
        try:
            rel = Path(file).resolve().relative_to(site)
        except ValueError:
            continue  # the standard library, the project (compiled below), elsewhere
        found.add(site / rel.parts[0])
    return sorted(found)


def main() -> int:
    """Import ``WARM``, compile what they reached; print a summary line.

    Returns:
        0 (a module that does not import is reported and skipped: the compiled files are a
        speed-up, never a requirement).
    """
    start = time.monotonic()
    for name in WARM:
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - reported; the rest still gets compiled
            print(f"[bytecode] {name} does not import ({type(e).__name__}: {e}); skipped")
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    targets = [*_reached_packages(site), ROOT / "flink_agents_py"]
    workers = 0 if (os.cpu_count() or 1) > 1 else 1  # 0: one process per core
    for target in targets:
        if target.is_dir():
            compileall.compile_dir(target, quiet=2, workers=workers)
        elif target.suffix == ".py":
            compileall.compile_file(target, quiet=2)
    print(f"[bytecode] compiled {len(targets)} packages in {time.monotonic() - start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
