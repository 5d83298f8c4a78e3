"""The main job as a package a user copies: one-way imports, and a copy that runs anywhere.

``jobs/review_analysis/__init__.py`` lists its modules so that each imports only modules
listed below it; the test reads that table and the modules' imports. A copy of the directory
under another name, in a directory outside the repository, runs as the user's own module
(``python -m my_reviews``) and writes the same rows as the job in the repository.
"""

from __future__ import annotations

import ast
import graphlib
import os
import pathlib
import re
import shutil
import subprocess

import pytest

from jobs.review_analysis import main

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "jobs" / "review_analysis"
PYTHON = str(ROOT / ".venv" / "bin" / "python")
CLEAN_ENV = dict(os.environ)  # before any in-process Flink job of this run changes it

REVIEWS = "\n".join([
    '{"id": "P1", "review": "Love it, great fit", "ts": 1}',
    '{"id": "P2", "review": "Broke after a day, bad", "ts": 2}',
    'not json {',
    '{"id": "P1", "review": "Way too small, had to return them"}',
    '{"id": "P3", "review": "terrible, returned it"}',
]) + "\n"


def module_name(path: pathlib.Path) -> str:
    """``runners.flink`` for ``<package>/runners/flink.py``; ``""`` for the package itself."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: pathlib.Path) -> tuple[set[str], list[str]]:
    """The package modules ``path`` imports (relative imports resolved), and any absolute
    import of the package (which would tie a copy to the name ``jobs.review_analysis``)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    absolute: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            absolute += [a.name for a in node.names if a.name.startswith("jobs")]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if (node.module or "").startswith("jobs"):
                    absolute.append(node.module or "")
                continue
            base = package.split(".") if package else []
            base = base[:len(base) - (node.level - 1)]
            target = ".".join([*base, node.module] if node.module else base)
            for alias in node.names:  # `from . import x` imports the module x if there is one
                sub = f"{target}.{alias.name}".lstrip(".")
                known = (PACKAGE / sub.replace(".", "/")).with_suffix(".py").exists() or (
                    PACKAGE / sub.replace(".", "/") / "__init__.py").exists()
                found.add(sub if known else target)
    return found, absolute


def test_modules_import_only_modules_listed_below_them():
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        found, absolute = imports_of(path)
        assert absolute == [], f"{path.name} imports the package by name: {absolute}"
        graph[module_name(path)] = found
    roots = {"", "__main__"}
    for name, found in graph.items():
        if name not in roots:
            assert "" not in found, f"{name} imports the package's __init__ (a back-import)"
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError on a cycle
    # the table of the package docstring: each module imports only the ones listed below it
    doc = (PACKAGE / "__init__.py").read_text()
    listed = re.findall(r"^``(\w+)``\s{2,}", doc, re.M)
    assert set(listed) == {n.split(".")[0] for n in graph if n not in roots}, listed
    rank = {n: i for i, n in enumerate(listed)}
    for name, found in graph.items():
        if name in roots:
            continue
        for target in found:
            top, other = name.split(".")[0], target.split(".")[0]
            if top != other:
                assert rank[other] > rank[top], f"{name} imports {target}, listed above it"


def _copy_and_run(tmp_path: pathlib.Path, *args: str) -> tuple[bytes, bytes]:
    """Copy the package to ``tmp_path/my_reviews`` and run it there as a user would."""
    shutil.copytree(PACKAGE, tmp_path / "my_reviews",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "reviews.jsonl").write_text(REVIEWS)
    env = {k: v for k, v in CLEAN_ENV.items() if k != "PYTHONPATH"}  # `jobs` not importable
    proc = subprocess.run(
        [PYTHON, "-m", "my_reviews", "--no-progress", "--model", "scripted", *args,
         "--input", "reviews.jsonl", "--output", "out/rows.jsonl"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "4 review results, 3 products, 1 errors" in proc.stderr
    out = tmp_path / "out"
    return (out / "rows.jsonl").read_bytes(), (out / "rows.errors.jsonl").read_bytes()


def _in_repository(tmp_path: pathlib.Path, *args: str) -> tuple[bytes, bytes]:
    src = tmp_path / "repo-reviews.jsonl"
    src.write_text(REVIEWS)
    out = tmp_path / "repo.jsonl"
    assert main(["--no-progress", "--model", "scripted", "--runner", "local", *args,
                 "--input", str(src), "--output", str(out)]) == 0
    return out.read_bytes(), out.with_suffix(".errors.jsonl").read_bytes()


def test_a_copy_outside_the_repository_runs_as_the_users_own_module(tmp_path):
    copy = tmp_path / "user"
    copy.mkdir()
    rows, errors = _copy_and_run(copy, "--runner", "local", "--rating", "delegate")
    assert (rows, errors) == _in_repository(tmp_path, "--rating", "delegate")
    assert b'"kind":"product_advice"' in rows and b"line 2: not JSON" in errors


@pytest.mark.flink
@pytest.mark.timeout(600)
def test_a_copy_outside_the_repository_runs_on_flink(tmp_path):
    """Flink's Python workers import the copy by its new name (the plan names its code)."""
    copy = tmp_path / "user"
    copy.mkdir()
    assert _copy_and_run(copy, "--runner", "flink") == _in_repository(tmp_path)
