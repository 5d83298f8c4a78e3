"""A module two threads resolve at once: the second waits for the first's import to end.

Two chats of one Flink worker resolved a scripted model's ``"offline_model:answer"`` at once;
the second found the module half imported (in ``sys.modules``, ``answer`` not defined yet)
and its chat failed with "has no attribute path 'answer' yet" (the skills example, on a
MiniCluster). ``import_qualified`` now looks again while the other thread's import runs.
"""

from __future__ import annotations

import sys
import threading
import time

import pytest

from flink_agents_py.api import ResourceError
from flink_agents_py.api.internal import import_qualified

pytestmark = pytest.mark.timeout(60)

SLOW_MODULE = '''
import race_gate
race_gate.started.set()
assert race_gate.release.wait(30), "never released"

def answer():
    return 42
'''


@pytest.fixture
def gate(tmp_path, monkeypatch):
    import types

    g = types.ModuleType("race_gate")
    g.started, g.release = threading.Event(), threading.Event()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "race_gate", g)
    (tmp_path / "slow_answers.py").write_text(SLOW_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield g
    g.release.set()  # type: ignore[attr-defined]
    sys.modules.pop("slow_answers", None)


def test_a_function_of_a_module_another_thread_is_importing_is_waited_for(gate, monkeypatch):
    importer = threading.Thread(target=import_qualified, args=("slow_answers:answer",))
    importer.start()
    assert gate.started.wait(30)  # the other thread is inside the module's import
    real_sleep = time.sleep

    def first_look_releases(s: float) -> None:  # the import ends while this thread waits
        gate.release.set()
        real_sleep(s)

    monkeypatch.setattr(time, "sleep", first_look_releases)  # (_resources uses ``time``)
    fn = import_qualified("slow_answers:answer")  # before: ResourceError, 'yet: ...'
    importer.join(30)
    assert fn() == 42


def test_a_name_the_module_never_defines_is_still_an_error_naming_it(gate, monkeypatch):
    gate.release.set()
    import_qualified("slow_answers:answer")
    with pytest.raises(ResourceError, match="'slow_answers' has no attribute path 'nope'"):
        import_qualified("slow_answers:nope")
