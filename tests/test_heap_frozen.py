"""Imports of many modules run with the process's older objects frozen (``flink/_gc.py``).

A full collection during a large import otherwise walks every object the process held
before it again: creating the first PyFlink environment imports Beam and pandas into a
client holding this package's classes (three full collections, 148 ms of CPU against 66 ms
for a program of PyFlink alone). ``heap_frozen`` freezes around such a block and unfreezes
after it, leaving alone a heap the process froze itself or an agent operator holds frozen.
"""

from __future__ import annotations

import gc
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from flink_agents_py.flink._gc import heap_frozen, hold_gc_settings, release_gc_settings

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture
def unfrozen():
    gc.unfreeze()  # (nothing else in this process holds it frozen)
    yield
    gc.unfreeze()
    gc.enable()


def test_the_block_runs_frozen_and_every_object_is_collectable_after(unfrozen):
    cycle: list = []
    cycle.append(cycle)  # garbage-to-be that exists when the block starts
    with heap_frozen():
        assert gc.get_freeze_count() > 0
        del cycle
        assert gc.collect() == 0  # frozen: not looked at inside the block
    assert gc.get_freeze_count() == 0
    assert gc.collect() > 0  # collected after it


def test_the_heap_is_unfrozen_when_the_block_raises(unfrozen):
    with pytest.raises(RuntimeError), heap_frozen():
        raise RuntimeError("an import failed")
    assert gc.get_freeze_count() == 0


def test_a_heap_the_process_froze_stays_frozen(unfrozen):
    gc.freeze()  # e.g. a server that freezes before it forks
    with heap_frozen():
        pass
    assert gc.get_freeze_count() > 0  # (unfrozen, it would be 0)


def test_an_operator_holding_the_gc_settings_keeps_its_freeze(unfrozen):
    holder = object()
    with heap_frozen():
        hold_gc_settings(holder)  # an agent operator opens meanwhile (another thread)
    try:
        assert gc.get_freeze_count() > 0
    finally:
        release_gc_settings(holder)
    assert gc.get_freeze_count() == 0  # its release unfroze it


def test_a_disabled_collector_is_left_alone(unfrozen):
    gc.disable()
    with heap_frozen():
        assert gc.get_freeze_count() == 0
    assert not gc.isenabled() and gc.get_freeze_count() == 0


USER_PROGRAM = """
import gc

from flink_agents_py.flink import create_stream_environment
from pyflink.datastream import StreamExecutionEnvironment

seen = []
real = StreamExecutionEnvironment.get_execution_environment


def watched(*args, **kwargs):
    seen.append(gc.get_freeze_count())
    return real(*args, **kwargs)


StreamExecutionEnvironment.get_execution_environment = staticmethod(watched)
env = create_stream_environment()
assert seen and seen[0] > 0, seen  # PyFlink's first environment is made frozen
assert gc.get_freeze_count() == 0, gc.get_freeze_count()  # and unfrozen after

gc.freeze()  # a program that froze its heap itself keeps it frozen
create_stream_environment()
assert gc.get_freeze_count() > 0  # (unfrozen, it would be 0)
print("ok", type(env).__name__)
"""


@pytest.mark.flink
@pytest.mark.timeout(300)
def test_a_users_program_creates_its_environment_frozen_and_gets_its_heap_back(tmp_path):
    pytest.importorskip("pyflink")
    (tmp_path / "my_job.py").write_text(textwrap.dedent(USER_PROGRAM))
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    )
    proc = subprocess.run(
        [sys.executable, "my_job.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ok StreamExecutionEnvironment" in proc.stdout
