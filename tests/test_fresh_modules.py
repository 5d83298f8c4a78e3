"""A later job in a long-lived thread-mode interpreter gets its own modules (``flink/_fresh.py``).

Simulates what a TaskManager's embedded interpreter goes through: job 1's shipped files are
unpacked into a ``python-dist-*`` folder, imported, and the folder is deleted when job 1 ends;
job 2 ships a changed version of the same module into another folder and unpickles its
operator. The cluster test (``tests/test_cluster_ops.py``) shows the same on a real
TaskManager.
"""

from __future__ import annotations

import importlib
import pickle
import shutil
import sys
import textwrap

import pytest

pytest.importorskip("pyflink")

from flink_agents_py.flink._fresh import fresh_reduce  # noqa: E402

MODULE = '''
from flink_agents_py.flink._fresh import fresh_reduce

VERSION = {version}


class Operator:
    def __init__(self, setting):
        self.setting = setting

    def __reduce__(self):
        return fresh_reduce(self)

    def version(self):
        return VERSION
'''


def _ship(root, job: str, version: int):
    files = root / f"python-dist-{job}" / "python-files"
    files.mkdir(parents=True)
    (files / "fresh_user_mod.py").write_text(textwrap.dedent(MODULE.format(version=version)))
    return files


def test_a_later_job_unpickles_with_its_own_copy_of_a_finished_jobs_module(tmp_path):
    job1 = _ship(tmp_path, "job1", 1)
    sys.path.insert(0, str(job1))
    try:
        mod = importlib.import_module("fresh_user_mod")
        assert mod.Operator("a").version() == 1
        job2 = _ship(tmp_path, "job2", 2)
        payload = pickle.dumps(mod.Operator({"x": [1, 2]}))  # what job 2's client shipped
        # job 1 ends: Flink deletes its files; job 2's files go on the path
        sys.path.remove(str(job1))
        shutil.rmtree(job1.parent)
        sys.path.insert(0, str(job2))
        op = pickle.loads(payload)
        assert op.version() == 2 and op.setting == {"x": [1, 2]}
        assert sys.modules["fresh_user_mod"].__file__ == str(job2 / "fresh_user_mod.py")
        # while job 2's files exist, unpickling again keeps its module (a running job's)
        again = pickle.loads(payload)
        assert type(again) is type(op)
    finally:
        sys.modules.pop("fresh_user_mod", None)
        for p in list(sys.path):
            if "python-dist-" in p:
                sys.path.remove(p)


def test_modules_outside_deleted_job_folders_are_kept(tmp_path):
    gone = tmp_path / "elsewhere" / "gone_mod.py"  # deleted, but not a job's shipped files
    gone.parent.mkdir()
    gone.write_text("X = 1\n")
    sys.path.insert(0, str(gone.parent))
    try:
        importlib.import_module("gone_mod")
        shutil.rmtree(gone.parent)
        pickle.loads(pickle.dumps(_Holder()))
        assert "gone_mod" in sys.modules
    finally:
        sys.modules.pop("gone_mod", None)
        sys.path.remove(str(gone.parent))


class _Holder:
    def __init__(self) -> None:
        self.value = 1

    def __reduce__(self):
        return fresh_reduce(self)
