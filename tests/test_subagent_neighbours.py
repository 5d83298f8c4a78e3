"""Sub-agent calls at their edges: a cancelled call whose child polls a remote run, and a
handle awaited outside the action execution that submitted it.

A cancelled internal call ends its child's waits for outside events at once; a child awaiting
an async remote run waited for that run to end instead, polling it all the while (a remote
run that never ends: a call that never completes, and a poll that holds an I/O slot for
ever), and the remote was never asked to cancel. Now the poll of an async sub-agent inside a
cancelled call sends the run's cancel request and ends as cancelled, at its next probe; a
poll started inside an already cancelled call ends so at once. A deferred call started inside
a cancelled call issued its request (an internal one there is cancelled at once); now it is
cancelled before ``prepare``, as one cancelled before its first await.

A handle (as any call's future) is valid only within the action execution that made it.
Awaited in another action (its own ended, or another key's), the other waited for a call
nobody would complete: at the end of all input an ``UnfinishedRunError`` blaming the wrong
action, and on a job that runs for ever a key stuck for good. Now the await raises
``NotInActionContextError`` saying so.

A setup returning the wrong type (a status probe answering text, ``prepare`` forgetting the
reconciler) failed its caller with ``'str' object has no attribute 'state'`` or ``not enough
values to unpack``, naming no sub-agent; now a ``TypeError`` names the sub-agent and what was
expected, as a fetch returning no ``SubagentResult`` does.

An async sub-agent's handle never awaited was warned about as a lazy call that "never ran",
though its remote run had been submitted and was left going; the warning now says so.
"""

from __future__ import annotations

import inspect
import logging

import pytest
from support.subagent_neighbour_agents import (
    LINGER_POLLS,
    caller,
    cancelling_parent,
    handing_parent,
)

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.testing import check_replay_safety

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("when", ["while", "before"])
def test_cancelling_a_call_whose_child_polls_a_remote_run_ends_the_poll(when, probes):
    records = [{"key": "a", "cancel": when}]
    result = (AgentsExecutionEnvironment.local().from_list(records)
              .apply(cancelling_parent()).run())
    assert result.errors == [], [(e.action, e.message) for e in result.errors]
    [out] = result.outputs
    assert out["success"] is False and out["cancelled"] is True, out
    assert out["error_message"] == "sub-agent 'kid' call was cancelled"
    assert probes["submit"] == 1
    assert probes["cancel"] == 1  # the remote was asked to cancel its run, once
    assert probes["fetch"] == 0
    assert probes["status"] < LINGER_POLLS  # the polling ended with the call


def test_a_deferred_call_started_inside_a_cancelled_call_never_issues_its_request(probes):
    records = [{"key": "a", "cancel": "deferred"}]
    result = (AgentsExecutionEnvironment.local().from_list(records)
              .apply(cancelling_parent()).run())
    assert result.errors == [], [(e.action, e.message) for e in result.errors]
    [out] = result.outputs
    assert out["cancelled"] is True and out["error_message"] == "sub-agent 'kid' call was cancelled"
    assert (probes["prepare"], probes["request"]) == (0, 0)  # as a call cancelled before it ran
    report = check_replay_safety(cancelling_parent(), records, other_process=False)
    report.assert_ok()


def test_a_cancelled_poll_replays_at_every_crash_point():
    report = check_replay_safety(cancelling_parent(), [{"key": "a", "cancel": "while"}],
                                 other_process=False)
    report.assert_ok()


@pytest.mark.parametrize(("what", "finish"), [("kid", True), ("kid", False), ("call", False)],
                         ids=["its-action-ended", "another-key", "a-durable-call"])
def test_a_handle_awaited_outside_its_action_is_refused(what, finish, probes):
    records = [{"key": "a", "role": "give", "what": what, "finish": finish},
               {"key": "b", "role": "take"}]
    result = (AgentsExecutionEnvironment.local().from_list(records)
              .apply(handing_parent()).run())
    assert result.errors == [], [(e.action, e.message) for e in result.errors]
    taken = next(o for o in result.outputs if "given" not in o)
    assert taken["error"] == "NotInActionContextError", taken
    made = "the handle of sub-agent 'kid'" if what == "kid" else "durable call r0/on_input/c0"
    assert taken["message"].startswith(f"{made} was awaited ")
    assert "action execution r0/on_input that made it" in taken["message"]
    if not finish:  # the action that made it still gets its outcome
        [given] = [o["given"] for o in result.outputs if "given" in o]
        assert given == ("call" if what == "call" else
                         {**given, "success": True, "result": [{"gated": True}]})


@pytest.mark.parametrize(("name", "message"), [
    ("text_status", "call_query_status of sub-agent 'text_status' returned str, not a RunStatus"),
    ("pair_prepare", "prepare of sub-agent 'pair_prepare' returned a tuple of 2, not (key, call, "
                     "reconciler_or_None) with call and reconciler callables"),
])
def test_a_setup_returning_the_wrong_type_fails_the_call_naming_it(name, message):
    result = (AgentsExecutionEnvironment.local().from_list([{"key": "a", "name": name}])
              .apply(caller()).run())
    assert result.outputs == []
    [err] = result.errors  # a fault of the setup, as what it raises is: fails the caller
    assert (err.action, err.error_type, err.message) == ("on_input", "TypeError", message)


@pytest.mark.parametrize("name", ["lingering", "deferred"], ids=["async", "deferred"])
def test_a_handle_never_awaited_is_warned_about_as_what_it_left(name, probes, caplog):
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        result = (AgentsExecutionEnvironment.local()
                  .from_list([{"key": "a", "name": name, "abandon": True}])
                  .apply(caller()).run())
    assert result.errors == [] and result.outputs == ["went on"]
    [warned] = [r.getMessage() for r in caplog.records if "never awaited" in r.getMessage()]
    assert f"subagent_neighbour_agents.py:{_line_of('# ABANDONED')}" in warned
    if name == "lingering":  # its remote run was submitted: it ran, and is sent its cancel
        assert (probes["submit"], probes["status"], probes["cancel"]) == (1, 0, 1)
        assert "never ran" not in warned
        assert "its remote run was sent its cancel request" in warned
    else:  # a deferred call starts on its first await
        assert probes["prepare"] == 0 and "so it never ran" in warned


def _line_of(marker: str) -> int:
    path = inspect.getsourcefile(caller)
    assert path is not None
    with open(path) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line)
