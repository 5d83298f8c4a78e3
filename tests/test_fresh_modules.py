"""A later job in a long-lived thread-mode interpreter gets its own modules (``flink/_fresh.py``).

Simulates what a TaskManager's embedded interpreter goes through: job 1's shipped files are
unpacked into a ``python-dist-*`` folder, imported, and the folder is deleted when job 1 ends;
job 2 ships a changed version of the same module into another folder and unpickles its
operator. The cluster test (``tests/test_cluster_ops.py``) shows the same on a real
TaskManager.
"""

from __future__ import annotations

import functools
import importlib
import pickle
import shutil
import sys
import textwrap

import pytest

pytest.importorskip("pyflink")

import cloudpickle  # noqa: E402 - PyFlink's pickler, installed with it

from flink_agents_py.flink._fresh import fresh_reduce, shipped  # noqa: E402

MODULE = """
from flink_agents_py.flink._fresh import fresh_reduce

VERSION = {version}


class Operator:
    def __init__(self, setting):
        self.setting = setting

    def __reduce__(self):
        return fresh_reduce(self)

    def version(self):
        return VERSION
"""


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


SUBMODULE = """
from flink_agents_py.flink._fresh import fresh_reduce

VERSION = {version}


def parse(prefix, record):
    return f"{{prefix}}{{VERSION}}:{{record}}"


class Reader:  # a function class PyFlink type-checks (as the file reader is)
    def __init__(self, setting):
        self.setting = setting

    __reduce__ = fresh_reduce

    def version(self):
        return VERSION
"""


def _ship_package(root, job: str, version: int):
    files = root / f"python-dist-{job}" / "python-files"
    pkg = files / "fresh_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")  # imports its submodule lazily, as ours do
    (pkg / "sub.py").write_text(textwrap.dedent(SUBMODULE.format(version=version)))
    return files


def _forget(prefix: str) -> None:
    for name in [n for n in sys.modules if n == prefix or n.startswith(prefix + ".")]:
        del sys.modules[name]


def test_a_later_job_unpickles_functions_of_a_submodule_the_finished_job_never_imported(tmp_path):
    # job 1 imported the package but not its submodule; job 2's functions live in that
    # submodule: unpickled, each forgets the stale package first, then imports job 2's copy
    job1, job2 = _ship_package(tmp_path, "job1", 1), _ship_package(tmp_path, "job2", 2)
    sys.path.insert(0, str(job2))  # job 2's client pickles its functions
    try:
        sub = importlib.import_module("fresh_pkg.sub")
        fn = functools.partial(sub.parse, "v")
        payloads = [cloudpickle.dumps(shipped(fn)), cloudpickle.dumps(sub.Reader("r"))]
        plain = cloudpickle.dumps(fn)
        assert shipped(fn)("a") == "v2:a"  # the wrapper calls through on the client
        _forget("fresh_pkg")
        sys.path.remove(str(job2))
        sys.path.insert(0, str(job1))  # job 1 runs on the worker: the package only
        importlib.import_module("fresh_pkg")
        sys.path.remove(str(job1))
        shutil.rmtree(job1.parent)  # job 1 ends
        sys.path.insert(0, str(job2))  # job 2 starts on the same worker
        with pytest.raises(ModuleNotFoundError, match="fresh_pkg.sub"):
            pickle.loads(plain)  # what went wrong: the stale package hides the submodule
        parse = pickle.loads(payloads[0])
        assert type(parse) is functools.partial and parse("a") == "v2:a"  # no wrapper left
        reader = pickle.loads(payloads[1])
        assert reader.version() == 2 and reader.setting == "r"
        assert sys.modules["fresh_pkg"].__file__ == str(job2 / "fresh_pkg" / "__init__.py")
    finally:
        _forget("fresh_pkg")
        for p in list(sys.path):
            if "python-dist-" in p:
                sys.path.remove(p)


def test_forgetting_survives_modules_imported_while_it_runs(tmp_path):
    """A worker unpickles its functions on several threads, and the cyclic collector may run
    any Python code mid-iteration (a finalizer, a callback) and let another thread import: the
    forgetting must not iterate ``sys.modules`` itself (a clean-clone CI run failed to unpickle
    the operator with "dictionary changed size during iteration"). Here the collector runs at
    each allocation and imports a module whenever it starts."""
    import gc
    import types

    from flink_agents_py.flink._fresh import FORGET_STALE_MODULES, UNFREEZE_AFTER_IMPORTS

    added: list[str] = []

    def import_meanwhile(phase: str, info: dict) -> None:
        if phase == "start" and len(added) < 1000:
            name = f"_fresh_probe_{len(added)}"
            sys.modules[name] = types.ModuleType(name)
            added.append(name)

    threshold = gc.get_threshold()
    gc.callbacks.append(import_meanwhile)
    try:
        for _ in range(3):
            held = [(i, i) for i in range(5000)]  # pairs come from the allocator, not a free list
            gc.set_threshold(1)
            namespace: dict = {}
            exec(FORGET_STALE_MODULES, namespace)  # as the unpickler runs it
            gc.set_threshold(*threshold)
            exec(UNFREEZE_AFTER_IMPORTS, namespace)
            del held
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(import_meanwhile)
        for name in added:
            sys.modules.pop(name, None)
    assert added, "the collector never ran while the stale modules were forgotten"


FROZEN_PROBE = """
import gc

FROZEN_AT_IMPORT = gc.get_freeze_count()


def echo(x):
    return x
"""


def _probe_payload(tmp_path, name: str) -> bytes:
    """A shipped function of a user's module in ``tmp_path``, pickled; the module forgotten."""
    (tmp_path / f"{name}.py").write_text(FROZEN_PROBE)
    sys.path.insert(0, str(tmp_path))
    mod = importlib.import_module(name)
    payload = cloudpickle.dumps(shipped(mod.echo))
    del sys.modules[name]
    return payload


@pytest.fixture
def unfrozen_heap():
    import gc

    gc.unfreeze()  # (nothing else in this process holds it frozen)
    yield gc
    gc.unfreeze()
    gc.enable()


def test_a_function_s_module_is_imported_with_the_heap_frozen_then_unfrozen(
    tmp_path, unfrozen_heap
):
    """What a worker imports while it unpickles runs with the heap frozen, so the collections
    it causes skip PyFlink's objects (a full one took 70-110 ms of a job's start); after the
    load every object is collectable again."""
    gc = unfrozen_heap
    payload = _probe_payload(tmp_path, "fresh_gc_probe_a")
    try:
        fn = pickle.loads(payload)
        assert fn(3) == 3
        assert sys.modules["fresh_gc_probe_a"].FROZEN_AT_IMPORT > 0
        assert gc.get_freeze_count() == 0
        cycle: list = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() > 0  # the collector works as before
    finally:
        sys.modules.pop("fresh_gc_probe_a", None)
        sys.path.remove(str(tmp_path))


def test_a_heap_frozen_by_the_process_stays_frozen(tmp_path, unfrozen_heap):
    gc = unfrozen_heap
    payload = _probe_payload(tmp_path, "fresh_gc_probe_b")
    try:
        gc.freeze()  # e.g. a process that freezes before it forks
        pickle.loads(payload)
        assert gc.get_freeze_count() > 0  # (unfrozen, it would be 0)
    finally:
        sys.modules.pop("fresh_gc_probe_b", None)
        sys.path.remove(str(tmp_path))


def test_an_operator_holding_the_gc_settings_keeps_the_heap_frozen(tmp_path, unfrozen_heap):
    """A job's functions unpickled while another agent operator of the interpreter runs
    (thread mode: one interpreter per TaskManager) do not undo that operator's freeze."""
    from flink_agents_py.flink._gc import hold_gc_settings, release_gc_settings

    gc = unfrozen_heap
    holder = object()
    payload = _probe_payload(tmp_path, "fresh_gc_probe_c")
    hold_gc_settings(holder)
    try:
        pickle.loads(payload)
        assert sys.modules["fresh_gc_probe_c"].FROZEN_AT_IMPORT > 0
        assert gc.get_freeze_count() > 0
    finally:
        release_gc_settings(holder)
        sys.modules.pop("fresh_gc_probe_c", None)
        sys.path.remove(str(tmp_path))
    assert gc.get_freeze_count() == 0  # the operator's release unfroze it


def test_nothing_is_frozen_while_the_collector_is_disabled(tmp_path, unfrozen_heap):
    gc = unfrozen_heap
    payload = _probe_payload(tmp_path, "fresh_gc_probe_d")
    gc.disable()
    try:
        pickle.loads(payload)
        assert sys.modules["fresh_gc_probe_d"].FROZEN_AT_IMPORT == 0
        assert not gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.enable()
        sys.modules.pop("fresh_gc_probe_d", None)
        sys.path.remove(str(tmp_path))
