"""A worker killed mid-command leaves no cgroup of its command behind for good.

The command's processes die with the worker (``--die-with-parent``), but the cgroup folders
made for it (``pids``, ``memory``: a job run as root) were removed by ``close`` only, which a
killed worker never reaches: one pair more per such death. The next worker's first command
removes those named by a process no longer alive and holding none.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from flink_agents_py.skills import _cgroup


def test_a_dead_workers_empty_cgroups_are_removed_a_live_ones_kept(monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("only a job run as root makes cgroups")
    parent = _cgroup._parent_dir("pids")
    if parent is None:
        pytest.skip("no pids cgroup controller here")
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    stale = parent / f"{_cgroup._PREFIX}{dead}-0123456789ab"
    live = parent / f"{_cgroup._PREFIX}{os.getppid()}-0123456789ab"
    try:
        for path in (stale, live):
            try:
                path.mkdir()
            except OSError as e:
                pytest.skip(f"cannot make a cgroup in {parent}: {e}")
        monkeypatch.setattr(_cgroup, "_moves", [])  # a fresh worker's first command
        cgroup = _cgroup.open_command_cgroup(8, 64 << 20)
        if cgroup is not None:
            cgroup.close()
        assert not stale.exists()
        assert live.exists()  # its process is alive: maybe running a command now
    finally:
        for path in (stale, live):
            if path.exists():
                path.rmdir()
