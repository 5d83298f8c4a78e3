"""Identity of durable calls across restores and dispatch modes; journal; bounded state."""

from __future__ import annotations

import copy
import time

import pytest
from support.harness import new_core
from support.probes import gate
from support.tool_dispatch_agents import make_agent

from flink_agents_py.api import (
    Agent,
    InputEvent,
    OutputEvent,
    SerializationError,
    action,
)
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import AgentCore, CallRecord, InMemoryKeyState, SqliteJournal

pytestmark = pytest.mark.timeout(60)


def drive(core: AgentCore, key, state, stop=lambda: False, timeout_s=10.0):
    outputs = []
    idle = state.run is None and not state.queued()
    res = core.on_input(key, "go", state) if idle else core.advance(key, state)
    outputs += res.outputs
    deadline = time.monotonic() + timeout_s
    while res.busy and not stop() and time.monotonic() < deadline:
        core.wait_for(key, 0.05)
        res = core.advance(key, state)
        outputs += res.outputs
    return outputs


def _tool_records(state) -> dict[str, CallRecord]:
    return {o: c for a in state.run.inflight.values() if a.action == "_tool_call_action"
            for o, c in a.calls.items() if c.done}


@pytest.mark.parametrize(("before", "after"), [("concurrent", "serial"), ("serial", "concurrent")])
def test_switching_dispatch_mode_between_checkpoint_and_restore_finds_recorded_outcomes(
        before, after, probes):
    """A snapshot holds some finished tool calls (out of order under concurrent dispatch).

    Restored under the other dispatch mode, only the unfinished calls run again, and each
    result lands on its own call id.
    """
    if before == "serial":
        gate("release").set()  # serial runs 'late' first: let it finish so the snapshot holds it
    want = 2 if before == "concurrent" else 1
    core = new_core(AgentPlan.from_agent(make_agent(before)))
    state = InMemoryKeyState()
    try:
        drive(core, "k", state,
              stop=lambda: state.run is not None and len(_tool_records(state)) >= want)
        snapshot = copy.deepcopy(state)
    finally:
        gate("release").set()
        core.close()
    recorded = _tool_records(snapshot)
    assert len(recorded) >= want
    if before == "concurrent":
        assert "0" not in recorded, "'late' (first in the request) was held back, yet recorded"
    made_before = len(probes.notes())
    restored = new_core(AgentPlan.from_agent(make_agent(after)))
    try:
        outputs = drive(restored, "k", snapshot)
    finally:
        restored.close()
    assert outputs == ["x=result-late y=result-mid z=result-fast"]
    names = {"0": "late", "1": "mid", "2": "fast"}
    made_after = probes.notes()[made_before:]
    assert sorted(made_after) == sorted(n for o, n in names.items() if o not in recorded)


def test_run_state_is_dropped_when_the_run_completes():
    class Once(Agent):
        @action(InputEvent)
        @staticmethod
        async def on_input(event, ctx):
            v = await ctx.durable_execute_async(lambda x: x + 1, event.input)
            ctx.send_event(OutputEvent(output=v))

    core = new_core(AgentPlan.from_agent(Once()))
    state = InMemoryKeyState()
    try:
        for i in range(20):
            state.push_input(i)
        res = core.advance("k", state)
        outs = list(res.outputs)
        while res.busy:
            core.wait_for("k", 1.0)
            res = core.advance("k", state)
            outs += res.outputs
    finally:
        core.close()
    assert outs == list(range(1, 21))
    assert state.run is None and state.queued() == 0
    assert not core.is_live("k")


class _Opaque:
    def __len__(self) -> int:
        return 2


def test_durable_call_argument_without_json_form_names_call_and_type():
    class Bad(Agent):
        @action(InputEvent)
        @staticmethod
        def on_input(event, ctx):
            ctx.durable_execute(len, {1, 2})  # a set has a stored form
            ctx.durable_execute(len, _Opaque())

    core = AgentCore(AgentPlan.from_agent(Bad()))
    res = core.on_input("k", 1, InMemoryKeyState())
    (err,) = res.errors
    assert err.error_type == "SerializationError"
    assert "r0/on_input/c1" in err.message and "_Opaque" in err.message
    assert "builtins:len" in err.message


def test_sqlite_journal_round_trip_and_pruning(tmp_path):
    j = SqliteJournal(str(tmp_path / "j.db"), retention_s=10)
    rec = CallRecord(digest="d", done=True, value={"a": 1})
    j.append({"k": 1}, "r0/act/c0", rec)
    j.append({"k": 1}, "r1/act/c0", rec)
    j.append("other", "r0/act/c0", CallRecord(digest="e", done=True, ok=False,
                                              error_type="builtins:ValueError", error_message="x"))
    assert j.lookup({"k": 1}, "r0/act/c0") == rec
    assert j.lookup("other", "r0/act/c0").error_message == "x"
    assert j.lookup({"k": 1}, "r9/act/c0") is None
    j.run_completed({"k": 1}, "r0", now_s=1000.0)
    j.run_completed("nobody", "r0", now_s=1005.0)  # within retention: r0 of {"k":1} kept
    assert j.lookup({"k": 1}, "r0/act/c0") == rec
    j.run_completed("nobody", "r0", now_s=1011.0)  # past retention: pruned; r1 still open
    assert j.lookup({"k": 1}, "r0/act/c0") is None
    assert j.lookup({"k": 1}, "r1/act/c0") == rec
    assert j.count() == 2


def test_a_journal_opened_while_another_process_holds_the_file_waits_for_it(tmp_path):
    """Switching a journal file to WAL needs it alone; SQLite answers "database is locked"
    at once while another connection (a restore in another process, a second TaskManager)
    writes to it. The journal waits for the lock (up to its timeout) instead of failing."""
    import sqlite3
    import threading

    path = str(tmp_path / "j.db")
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE t (x)")
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO t VALUES (1)")
    appending = threading.Event()

    def release() -> None:
        appending.wait(10)
        time.sleep(0.2)  # the append has met the lock by now (or waits for it anyway)
        other.execute("COMMIT")

    releaser = threading.Thread(target=release)
    releaser.start()
    journal = SqliteJournal(path)
    rec = CallRecord(digest="d", done=True, value={"a": 1})
    appending.set()
    journal.append("k", "r0/act/c0", rec)
    releaser.join()
    assert journal.lookup("k", "r0/act/c0") == rec
    other.close()


def test_serialization_error_is_a_durable_execution_error():
    from flink_agents_py.api import DurableExecutionError

    assert issubclass(SerializationError, DurableExecutionError)


# -- the journal answers only the call that made its record ----------------------------------
PRICED: list[str] = []


def price(item: str) -> dict:
    PRICED.append(item)
    return {"item": item, "price": len(item)}


class Pricer(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx) -> None:
        answer = await ctx.durable_execute_async(price, event.input["item"])
        ctx.send_event(OutputEvent(output={"asked": event.input["item"], "answer": answer}))


def _one_job(journal: SqliteJournal, item: str) -> list:
    core = new_core(AgentPlan.from_agent(Pricer()), journal=journal)
    try:
        state = InMemoryKeyState()
        res = core.on_input("alice", {"item": item}, state)
        outputs = list(res.outputs)
        while state.run is not None:
            assert core.wait_for("alice", 10)
            outputs += core.advance("alice", state).outputs
        return outputs
    finally:
        core.close()


def test_a_new_job_on_an_old_journal_gets_its_own_results_not_the_old_jobs(tmp_path):
    """Two jobs (no restore between them) share a journal file: the second job's run has the
    same key and call ids as the first one's, but other arguments; the first job's record
    must not answer it."""
    PRICED.clear()
    path = str(tmp_path / "journal.db")
    assert _one_job(SqliteJournal(path), "apple") == [
        {"asked": "apple", "answer": {"item": "apple", "price": 5}}]
    assert _one_job(SqliteJournal(path), "watermelon") == [
        {"asked": "watermelon", "answer": {"item": "watermelon", "price": 10}}]
    assert PRICED == ["apple", "watermelon"]


class _Crash(BaseException):
    """A crash injected by the failpoint (not an ``Exception``: the core lets it through)."""


def test_a_journal_record_of_the_same_call_still_answers_it(tmp_path):
    """What the journal is for: a call whose outcome reached the journal but no checkpoint is
    answered from the journal when the source delivers its record again after the restore."""
    PRICED.clear()
    journal = SqliteJournal(str(tmp_path / "journal.db"))

    def crash(point, key, info):
        if point == "call_recorded":
            raise _Crash

    core = new_core(AgentPlan.from_agent(Pricer()), journal=journal, failpoint=crash)
    try:
        state = InMemoryKeyState()
        core.on_input("alice", {"item": "fig"}, state)
        assert core.wait_for("alice", 10)
        with pytest.raises(_Crash):
            core.advance("alice", state)
    finally:
        core.close()
    assert PRICED == ["fig"]  # executed once, journaled, then the process died
    # restored from a checkpoint taken before the record: the source delivers it again
    assert _one_job(journal, "fig") == [{"asked": "fig", "answer": {"item": "fig", "price": 3}}]
    assert PRICED == ["fig"]  # answered from the journal, not executed again
