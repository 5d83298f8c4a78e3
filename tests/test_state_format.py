"""State format upgrade: keyed state written by format 1 restores with today's code.

``tests/fixtures/state_v1/`` holds, per case, one key's keyed state as the Flink operator
stored it in format 1 (commit eff527a) at a point where a run was in flight, plus what the
fault-free run produced after that point (``make_fixture.py`` wrote them; the agents are in
``state_v1_agents.py``). Each test restores that state through the operator's own key state
(``support.flink_state``) on a new ``AgentCore`` and checks what a user upgrading relies on:
every run completes with the outputs the fault-free run had, no call whose outcome was
recorded runs again, and queued records run in order after it.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap
from types import ModuleType
from typing import Any

import pytest
from support.flink_state import RUN, FlinkKeyedState

from flink_agents_py.local import LocalExecutionEnvironment
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore

pytestmark = pytest.mark.timeout(60)

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "state_v1"
CASES = ["echo", "durable", "chat", "subagent"]


def _load(name: str) -> dict[str, Any]:
    return json.loads((FIXTURE / f"{name}.json").read_text())


STARTED_AFTER: dict[str, dict[int, dict[str, Any]]] = {
    "chat": {1: {"word": "pear", "pre": "PEAR", "answer": "answer(def-pear)"}},
}
"""Outputs of records a restore starts (queued at the snapshot) that today's code gives
otherwise than format 1's, by case and position in ``outputs_after``: a tool's text result
reaches the model as its text (``answer("def-pear")`` then). A run in flight at the snapshot
gives what format 1's code gave: its chat keeps sending tool results as it did."""


def _outputs_after(case: str, data: dict[str, Any]) -> list[Any]:
    expected = list(data["outputs_after"])
    for at, now in STARTED_AFTER.get(case, {}).items():
        expected[at] = now
    return expected


@pytest.fixture
def v1_agents(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The fixture's agent module (importable by the name its keyed state refers to), with
    its call log empty."""
    monkeypatch.syspath_prepend(str(FIXTURE))
    import state_v1_agents

    state_v1_agents.reset_calls()
    yield state_v1_agents
    state_v1_agents.reset_calls()


def _agent(agents: ModuleType, ref: str) -> Any:
    module, _, name = ref.partition(":")
    assert module == agents.__name__
    return getattr(agents, name)()


def _restore_to_end(plan: AgentPlan, key: str, held: FlinkKeyedState
                    ) -> tuple[list[Any], list[Any]]:
    """Advance ``key`` on a new core until idle, with a new key state per host callback (as
    the operator makes one per callback); ``(outputs, errors)``."""
    core = AgentCore(plan, max_in_flight=8)
    core.open()
    try:
        res = core.advance(key, held.key_state())
        outputs, errors = list(res.outputs), list(res.errors)
        while res.busy:
            assert core.wait_for(key, 10), "no I/O completed for the key"
            res = core.advance(key, held.key_state())
            outputs.extend(res.outputs)
            errors.extend(res.errors)
    finally:
        core.close()
    return outputs, errors


@pytest.mark.parametrize("case", CASES)
def test_keyed_state_of_format_1_restores_and_completes_its_runs(case, v1_agents):
    data = _load(case)
    assert data["format_version"] == 1
    plan = AgentPlan.from_agent(_agent(v1_agents, data["agent"]))
    held = FlinkKeyedState(data["keyed_state"])
    assert held.key_state().run is not None, "the fixture holds a run in flight"

    outputs, errors = _restore_to_end(plan, data["key"], held)

    assert errors == []
    # the in-flight run and the queued records complete, in order, as in the fault-free run
    assert outputs == _outputs_after(case, data)
    ran = v1_agents.calls()
    recorded = set(data["calls_all"]) - set(data["calls_after_restore"])
    assert recorded, "the fixture has recorded calls"
    assert [c for c in ran if c in recorded] == [], "a recorded call ran again"
    assert sorted(ran) == sorted(data["calls_after_restore"])
    after = held.key_state()
    assert after.run is None and after.queued() == 0


def test_memory_of_format_1_is_kept_across_the_restore(v1_agents):
    data = _load("durable")
    plan = AgentPlan.from_agent(v1_agents.Durable())
    held = FlinkKeyedState(data["keyed_state"])
    _restore_to_end(plan, data["key"], held)
    # run 0's committed memory (from the fixture) plus runs 1 and 2 after the restore
    assert held.key_state().memory == {"runs": 3, "inputs": [3, 4, 5]}


def _future_version(raw: str, version: int) -> str:
    run = json.loads(raw)
    run["v"] = version
    return json.dumps(run)


def test_decoding_a_run_of_an_unknown_future_format_names_the_version():
    from flink_agents_py.runtime import RunState, StateFormatError

    raw = _load("durable")["keyed_state"][RUN]
    with pytest.raises(StateFormatError, match=r"\b99\b"):
        RunState.from_stored(_future_version(raw, 99))
    assert RunState.from_stored(raw).seq == 1  # format 1 (no "v") still decodes


def test_a_run_of_an_unknown_future_format_fails_naming_the_version(v1_agents):
    from flink_agents_py.runtime import StateFormatError

    data = _load("durable")
    stored = dict(data["keyed_state"])
    stored[RUN] = _future_version(stored[RUN], 99)
    held = FlinkKeyedState(stored)
    plan = AgentPlan.from_agent(v1_agents.Durable())
    core = AgentCore(plan, max_in_flight=8)
    core.open()
    try:
        with pytest.raises(StateFormatError, match=r"\b99\b") as info:
            core.advance(data["key"], held.key_state())
    finally:
        core.close()
    assert info.value.found == 99
    assert 1 in info.value.supported
    # nothing good is lost: the stored run is still there, for a version that can read it
    assert held.store[RUN] == stored[RUN]
    assert v1_agents.calls() == []


def _by_key(pairs: list[list[Any]]) -> dict[Any, list[Any]]:
    out: dict[Any, list[Any]] = {}
    for key, value in pairs:
        out.setdefault(key, []).append(value)
    return out


def test_local_runner_snapshot_of_format_1_restores(v1_agents):
    data = _load("local_snapshot")
    job = LocalExecutionEnvironment(8, metrics=False).from_list(data["records"])
    result = job.apply(v1_agents.Durable()).restore(data["snapshot"]).run()

    assert result.errors == []
    assert _by_key([[k, o] for k, o in result.keyed_outputs]) == _by_key(data["outputs_after"])
    ran = v1_agents.calls()
    recorded = set(data["calls_all"]) - set(data["calls_after_restore"])
    assert [c for c in ran if c in recorded] == []
    assert sorted(ran) == sorted(data["calls_after_restore"])


def test_a_local_snapshot_of_an_unknown_future_format_fails_before_anything_runs(v1_agents):
    from flink_agents_py.runtime import StateFormatError

    data = _load("local_snapshot")
    snapshot = json.loads(json.dumps(data["snapshot"]))
    for entry in snapshot["keys"]:
        if entry["run"] is not None:
            entry["run"]["v"] = 99
    job = LocalExecutionEnvironment(8, metrics=False).from_list(data["records"])
    with pytest.raises(StateFormatError, match=r"\b99\b"):
        job.apply(v1_agents.Durable()).restore(snapshot).run()
    assert v1_agents.calls() == []  # no call ran, no record was read past the snapshot


def test_a_user_restores_a_format_1_snapshot_from_their_own_directory(tmp_path):
    """As a user upgrading does: their module, their script, a snapshot file, a new
    interpreter started outside the repository."""
    (tmp_path / "state_v1_agents.py").write_text((FIXTURE / "state_v1_agents.py").read_text())
    data = _load("local_snapshot")
    (tmp_path / "snapshot.json").write_text(json.dumps(data["snapshot"]))
    (tmp_path / "records.json").write_text(json.dumps(data["records"]))
    (tmp_path / "resume.py").write_text(textwrap.dedent("""
        import json

        import state_v1_agents
        from flink_agents_py.local import LocalExecutionEnvironment

        records = json.load(open("records.json"))
        snapshot = json.load(open("snapshot.json"))
        job = LocalExecutionEnvironment(8, metrics=False).from_list(records)
        result = job.apply(state_v1_agents.Durable()).restore(snapshot).run()
        print(json.dumps({"outputs": result.keyed_outputs, "errors": len(result.errors),
                          "calls": state_v1_agents.calls()}))
    """))
    proc = subprocess.run([sys.executable, "resume.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["errors"] == 0
    assert _by_key(got["outputs"]) == _by_key(data["outputs_after"])
    assert sorted(got["calls"]) == sorted(data["calls_after_restore"])
