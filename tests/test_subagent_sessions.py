"""Sub-agent session ids across jobs: a new job never reuses an earlier job's ids.

An external sub-agent's ``session_id`` is ``<key>/r<seq>``, and a new job's keys start at
``seq`` 0 again: a remote service keeping its results by ``session_id#call_id`` (what the
docs recommend) handed the second job's call the first job's result. A job with a lineage
token (every Flink job has one) now gives each key a session epoch, drawn as its first run
starts and kept in its state: ids stay the same across the job's failovers and restores,
and differ in a new job. A run started before epochs existed keeps its ids.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.harness import KEY, new_core, run_to_end, snapshot_of
from support.probes import gate
from support.subagent_agents import PLAN

from flink_agents_py.runtime import AgentCore, InMemoryKeyState

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("probes")]  # fresh gates

CALL = {"do": "call", "name": "remote", "input": {"mode": "ok"}}


def remote_key(core: AgentCore, state: InMemoryKeyState) -> str:
    """The key the deferred remote was called with (``session_id#call_id``), one run."""
    res = core.on_input(KEY, CALL, state)
    outputs, errors = run_to_end(core, state)
    assert errors == [] and res.errors == [], errors or res.errors
    [out] = [*res.outputs, *outputs]
    assert out["result"]["success"] is True, out
    key: str = out["result"]["result"]["key"]
    return key


def job(lineage: str | None) -> AgentCore:
    return new_core(PLAN, lineage=lineage)


def test_a_new_job_gives_the_same_key_and_run_other_session_ids():
    first, second = job("job-1"), job("job-2")
    try:
        a = remote_key(first, InMemoryKeyState())
        b = remote_key(second, InMemoryKeyState())
    finally:
        first.close()
        second.close()
    assert a != b  # before: '"k1"/r0#r0/go/c0' both times
    assert a.startswith('"k1"/') and a.endswith("/r0#r0/go/c0")


def test_a_failover_of_one_job_keeps_the_key_s_session_ids():
    # a key whose first record came after the last checkpoint runs it again on the new
    # attempt, from no state: the same lineage gives it the same ids (its remote dedupes)
    one, again = job("job-1"), job("job-1")
    try:
        assert remote_key(one, InMemoryKeyState()) == remote_key(again, InMemoryKeyState())
    finally:
        one.close()
        again.close()


def test_a_key_keeps_its_epoch_across_runs_and_a_resubmission():
    core = job("job-1")
    state = InMemoryKeyState()
    try:
        first = remote_key(core, state)
        second = remote_key(core, state)
    finally:
        core.close()
    assert first.split("/")[:2] == second.split("/")[:2]  # the key and its epoch
    assert first.endswith("/r0#r0/go/c0") and second.endswith("/r1#r1/go/c0")
    resubmitted = job("job-2")  # a new submission from a savepoint holding the key
    try:
        third = remote_key(resubmitted, snapshot_of(state))
    finally:
        resubmitted.close()
    assert third.split("/")[:2] == first.split("/")[:2] and third.endswith("/r2#r2/go/c0")


def test_without_a_lineage_token_ids_are_as_before():
    core = job(None)
    try:
        assert remote_key(core, InMemoryKeyState()) == '"k1"/r0#r0/go/c0'
    finally:
        core.close()


def test_a_run_started_before_session_epochs_keeps_its_ids():
    # state written before this change: a run in flight, no session epoch in the key's
    # memory; restored by a job with a lineage, the run's calls keep the ids they had
    old = job(None)
    state = InMemoryKeyState()
    try:
        res = old.on_input(KEY, {**CALL, "after": True}, state)  # waits at gate "after"
        assert res.errors == [] and state.run is not None
        snapshot = snapshot_of(state)
    finally:
        gate("after").set()
        old.close()
    held: dict[str, Any] = snapshot.memory
    assert "session_epoch" not in str(held)
    new = job("job-1")
    try:
        outputs, errors = run_to_end(new, snapshot)
    finally:
        new.close()
    assert errors == []
    assert [o["result"]["result"]["key"] for o in outputs] == ['"k1"/r0#r0/go/c0']
