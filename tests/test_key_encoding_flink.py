"""Key encodings on a MiniCluster: savepoints of the previous release, and the default encoding.

Each job is the ``savepoint_v0`` fixture's (``tests/fixtures/savepoint_v0``): its user module
and script are copied to a temporary folder outside the repository and run there with the
venv's interpreter, as a user runs them. Per key, a run with one durable call recorded and
one in flight, and a queued record, are in the savepoint; a restore must replay the recorded
call (its output keeps ``a<n>@take``), run the one in flight again and then the queued
record (``seen`` 2), with ``ctx.key`` the key's own value and type.

- The committed savepoints, taken by the release that pickled keys in thread and in process
  mode, restore with ``key_encoding="pickle"`` (the documented path) in the mode that took
  them; with the default encoding Flink refuses them and ``execute`` names the option.
- A savepoint taken with the default encoding restores with it; ``1``, ``True`` and ``1.0``
  are three keys, and a string that looks like an encoded key is just a string.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.flink

pytest.importorskip("pyflink")

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "savepoint_v0"
SAVEPOINTS = {"thread": FIXTURE / "savepoint", "process": FIXTURE / "savepoint_process"}
"""The previous release's savepoints, by the execution mode that took them."""
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else pathlib.Path(sys.executable))

sys.path.insert(0, str(FIXTURE))
from keys_v0_agents import KEYSETS  # noqa: E402

sys.path.remove(str(FIXTURE))


def project(tmp: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """A user's project (the fixture's module and script) and a work folder, in ``tmp``."""
    proj, work = tmp / "project", tmp / "work"
    proj.mkdir(parents=True)
    work.mkdir()
    assert ROOT not in proj.resolve().parents
    for name in ("keys_v0_agents.py", "keys_job.py"):
        shutil.copy(FIXTURE / name, proj / name)
    return proj, work


def run_job(proj: pathlib.Path, work: pathlib.Path, phase: str, *args: str,
            mode: str = "thread") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FLINK_CONF_DIR")}
    env.update(KEYS_WORK=str(work), KEYS_PHASE=phase, KEYS_EXECUTION_MODE=mode)
    return subprocess.run([PYTHON, "keys_job.py", *args], cwd=proj, env=env,
                          capture_output=True, text=True, timeout=600, check=False)


def ok(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-6000:]
    return res.stdout


def outputs(work: pathlib.Path, phase: str) -> dict[int, dict]:
    rows = [json.loads(x) for x in (work / f"outputs-{phase}.jsonl").read_text().splitlines()]
    by_n = {r["n"]: r for r in rows}
    assert len(by_n) == len(rows), f"an output came twice: {rows}"
    return by_n


def calls(work: pathlib.Path) -> list[str]:
    return (work / "calls.txt").read_text().splitlines()


def assert_restored(work: pathlib.Path, keys: list, taken: str) -> None:
    """Every record's output, from the restored runs and the queued records, once each."""
    out = outputs(work, "restore")
    n_keys = len(keys)
    assert sorted(out) == list(range(2 * n_keys))
    for n, row in out.items():
        key = keys[n % n_keys]
        first = n < n_keys  # in flight at the savepoint; the second record was queued
        assert (row["key"], row["key_type"]) == (repr(key), type(key).__name__), row
        assert row["a"] == f"a{n}@{taken if first else 'restore'}", row  # replayed if first
        assert row["b"] == f"b{n}@restore", row
        assert row["seen"] == (1 if first else 2), row  # the key's memory came back
    # the calls recorded before the savepoint did not run again; those in flight did, once
    ran = calls(work)
    assert sorted(ran) == sorted([f"b {n} restore" for n in range(2 * n_keys)]
                                 + [f"a {n} restore" for n in range(n_keys, 2 * n_keys)])


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_a_savepoint_of_the_pickled_keys_release_restores_with_key_encoding_pickle(tmp_path,
                                                                                  mode):
    # restored in the execution mode that took it (PyFlink pickled keys differently in each)
    proj, work = project(tmp_path)
    ok(run_job(proj, work, "restore", "restore", f"file://{SAVEPOINTS[mode]}", "v0", "pickle",
               mode=mode))
    assert_restored(work, KEYSETS["v0"], "take")


def test_the_default_encoding_refuses_that_savepoint_and_names_the_option(tmp_path):
    proj, work = project(tmp_path)
    res = run_job(proj, work, "restore", "restore", f"file://{FIXTURE / 'savepoint'}", "v0")
    assert res.returncode != 0
    assert "KeyEncodingMismatchError" in res.stderr, res.stderr[-6000:]
    assert "key_encoding='pickle'" in res.stderr
    assert not (work / "outputs-restore.jsonl").exists()  # no record ran on empty state
    assert not (work / "calls.txt").exists()


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_a_savepoint_taken_with_the_default_encoding_restores_three_keys_equal_in_python(
        tmp_path, mode):
    # process mode hands keys to the Python worker through its own coder (a STRING key here)
    proj, work = project(tmp_path)
    out = ok(run_job(proj, work, "take", "take", f"file://{tmp_path}/savepoints", "new",
                     mode=mode))
    savepoint = next(x for x in out.splitlines() if x.startswith("SAVEPOINT ")).split(" ", 1)[1]
    keys = KEYSETS["new"]
    taken = outputs(work, "take")  # the job that took it ran to the end after the savepoint
    assert sorted(taken) == list(range(2 * len(keys)))
    # 1, True and 1.0 (and ("t", 1), ("t", True)) are distinct keys: each saw its own 2
    assert {(r["key"], r["key_type"], r["seen"]) for r in taken.values() if r["n"] >= len(keys)
            } == {(repr(k), type(k).__name__, 2) for k in keys}
    (work / "calls.txt").unlink()
    ok(run_job(proj, work, "restore", "restore", savepoint, "new", mode=mode))
    assert_restored(work, keys, "take")
