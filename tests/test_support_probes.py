"""The test helpers' per-test probes (``support.probes``): what test authors rely on."""

from __future__ import annotations

import threading

import pytest
from support import probes as module
from support.probes import Probes, count, gate, note, store


def test_a_finished_test_releases_every_thread_waiting_at_its_gates():
    p = Probes()
    waited: list[bool] = []
    t = threading.Thread(target=lambda: waited.append(p.gate("tool").wait(10)))
    t.start()
    p.finish()
    t.join(5)
    assert waited == [True]
    assert p.gate("made_after_the_end").is_set()  # a late fake does not block either


def test_wait_names_the_gate_that_never_opened():
    with pytest.raises(AssertionError, match="'model'"):
        Probes().wait("model", timeout_s=0.01)


def test_counts_notes_and_stores_are_per_probes_and_resettable():
    p = Probes()
    assert (p.count("a"), p.count("a"), p.count("b", 3)) == (1, 2, 3)
    p.reset("a")
    assert p.counts() == {"b": 3} and p["a"] == 0
    p.note("x")
    assert p.notes() == ["x"] and Probes().notes() == []
    assert p.store("seen", list) is p.store("seen", list)


def test_the_fixture_installs_new_probes_that_the_module_functions_use(probes):
    assert module.current() is probes
    count("fake")
    note("fake ran")
    store("ids", list).append(1)
    assert (probes["fake"], probes.notes(), probes.store("ids")) == (1, ["fake ran"], [1])
    assert not gate().is_set()
