"""A sub-agent call its action never awaited, when that action ends (raises or returns).

A handle is valid only within the action execution that submitted it, so once that execution
has ended nobody can ever read the call's result. Yet the child went on: an internal
sub-agent kept dispatching, polled its remote runs to their end (never asking the remote to
cancel) and waited for outside events that might never come, and the key's later records
waited for all of it (a wait with no timeout: held for good), silently. As structured
concurrency has it (a task group, Temporal's parent-close policy), a child does not outlive
the action that made it: such a call is now cancelled when its action ends, as
``handle.cancel()`` would (its polls send the cancel request, its waits end), and a WARNING
names the line that submitted it.
"""

from __future__ import annotations

import inspect
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.harness import KEY, new_core, run_to_end
from support.probes import count
from support.subagent_neighbour_agents import LINGER_POLLS, Lingering
from support.subagent_orphan_agents import leaving

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Agent, InputEvent, ResourceDescriptor, ResourceType, action
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState
from flink_agents_py.testing import check_replay_safety

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]


def _run(records):
    return _run_agent(leaving(), records)


def _run_agent(agent, records):
    return AgentsExecutionEnvironment.local().from_list(records).apply(agent).run()


@pytest.mark.parametrize("end", ["raise", "return"])
def test_a_remote_run_polled_by_a_child_left_behind_is_cancelled(end, probes, caplog):
    records = [{"key": "a", "end": end, "kid": "polling"}, {"key": "a", "end": "next"}]
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        result = _run(records)
    assert result.outputs == (["next"] if end == "raise" else ["returned", "next"])
    assert [(e.action, e.message) for e in result.errors] == (
        [("on_input", "the parent failed")] if end == "raise" else [])
    assert probes["submit"] == 1
    assert probes["cancel"] == 1  # the remote was asked to cancel its run
    assert probes["fetch"] == 0
    assert probes["status"] < LINGER_POLLS  # the polling ended with the action
    [warned] = [r.getMessage() for r in caplog.records if "never awaited" in r.getMessage()]
    assert "sub-agent 'polling'" in warned and "was cancelled" in warned
    assert f"subagent_orphan_agents.py:{_line_of('# LEFT')}" in warned


@pytest.mark.parametrize("end", ["raise", "return"])
def test_an_async_run_its_own_action_left_behind_is_sent_its_cancel_request(end, probes, caplog):
    # before: the run, started at submit, was never polled nor cancelled; raising said nothing
    records = [{"key": "a", "end": end, "kid": "remote"}, {"key": "a", "end": "next"}]
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        result = _run(records)
    assert result.outputs == (["next"] if end == "raise" else ["returned", "next"])
    assert [(e.action, e.message) for e in result.errors] == (
        [("on_input", "the parent failed")] if end == "raise" else [])
    assert (probes["submit"], probes["cancel"], probes["status"], probes["fetch"]) == (1, 1, 0, 0)
    [warned] = [r.getMessage() for r in caplog.records if "never awaited" in r.getMessage()]
    assert "async sub-agent 'remote'" in warned and "cancel request" in warned
    assert f"subagent_orphan_agents.py:{_line_of('# LEFT')}" in warned


class FailingSubmit(Lingering):
    """An async remote whose submit request raises: no run starts."""

    def call_submit_request(self, session_id, call_id, input):
        count("submit")
        raise ConnectionError("the remote refused the run")


class SubmitFails(Agent):
    @action(InputEvent)
    @staticmethod
    async def on_input(event, ctx):
        await ctx.submit_subagent("remote", {})


def test_a_submit_that_raised_leaves_no_run_to_cancel(probes, caplog):
    agent = SubmitFails()
    agent.add_resource("remote", ResourceType.AGENT, ResourceDescriptor(FailingSubmit))
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        result = _run_agent(agent, [{"key": "a"}])
    [error] = result.errors
    assert error.error_type == "ConnectionError"
    assert (probes["submit"], probes["cancel"]) == (1, 0)
    assert not [r for r in caplog.records if "never awaited" in r.getMessage()]


@pytest.mark.parametrize("end", ["raise", "return"])
def test_an_async_run_left_behind_replays_at_every_crash_point(end):
    report = check_replay_safety(leaving(), [{"key": "a", "end": end, "kid": "remote"},
                                             {"key": "a", "end": "next"}], other_process=False)
    report.assert_ok()


@pytest.mark.parametrize("end", ["raise", "return"])
def test_a_wait_of_a_child_left_behind_ends_and_frees_the_key(end, probes):
    state = InMemoryKeyState()
    core = new_core(AgentPlan.from_agent(leaving()))
    try:
        first = core.on_input(KEY, {"key": KEY, "end": end, "kid": "waiting"}, state)
        outputs, errors = run_to_end(core, state)
    finally:
        core.close()
    assert probes["waiting"] >= 1
    assert [*first.outputs, *outputs] == ([] if end == "raise" else ["returned"])
    assert [e.message for e in [*first.errors, *errors]] == (
        ["the parent failed"] if end == "raise" else [])
    # the run is over: the key takes its next record (before, the child's wait held it)
    assert state.run is None or not state.run.inflight, state.run.inflight


def test_a_call_left_behind_replays_at_every_crash_point():
    report = check_replay_safety(leaving(), [{"key": "a", "end": "raise", "kid": "waiting"},
                                             {"key": "a", "end": "next"}], other_process=False)
    report.assert_ok()


def _line_of(marker: str) -> int:
    import support.subagent_orphan_agents as agents

    lines = inspect.getsource(agents).splitlines()
    return next(i for i, line in enumerate(lines, 1) if marker in line)


USER_SCRIPT = '''\
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, InputEvent, InternalSubagent, OutputEvent,
    ResourceDescriptor, ResourceType, action)


class Researcher(Agent):
    @action(InputEvent)
    @staticmethod
    async def research(event, ctx):
        answer = await ctx.wait_for("human-" + event.input["topic"])
        ctx.send_event(OutputEvent(output=answer))


class Lead(Agent):
    @action(InputEvent)
    @staticmethod
    async def plan(event, ctx):
        if event.input.get("topic"):
            await ctx.submit_subagent("researcher", {"topic": event.input["topic"]})
            raise ValueError("no budget left")
        ctx.send_event(OutputEvent(output="next record"))


lead = Lead()
lead.add_resource("researcher", ResourceType.AGENT, ResourceDescriptor(
    InternalSubagent, agent=Researcher, input_schema='{"type": "object"}'))
result = AgentsExecutionEnvironment.local().from_list(
    [{"key": "k", "topic": "tides"}, {"key": "k"}]).apply(lead).run()
print(result.outputs, [e.message for e in result.errors])
'''


def test_a_user_module_is_told_which_line_left_a_call_behind(tmp_path):
    (tmp_path / "lead.py").write_text(USER_SCRIPT)
    proc = subprocess.run([sys.executable, "lead.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=150,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "['next record'] ['no budget left']"
    line = USER_SCRIPT.splitlines().index(
        '            await ctx.submit_subagent("researcher", {"topic": event.input["topic"]})')
    [warned] = [w for w in proc.stderr.splitlines() if "was never awaited" in w]
    assert "sub-agent 'researcher'" in warned and f"lead.py:{line + 1}" in warned, warned
    assert "so it was cancelled" in warned


ASYNC_USER_SCRIPT = '''\
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, AsyncSubagentSetup, InputEvent, OutputEvent,
    ResourceDescriptor, ResourceType, RunStatus, SubagentResult, action)

SENT = []


class Crawl(AsyncSubagentSetup):
    def call_submit_request(self, session_id, call_id, input):
        SENT.append("submit")

    def call_query_status(self, session_id, call_id):
        SENT.append("status")
        return RunStatus.running()

    def call_fetch_result(self, session_id, call_id):
        return SubagentResult.ok("never")

    def call_cancel_request(self, session_id, call_id):
        SENT.append("cancel")


class Lead(Agent):
    @action(InputEvent)
    @staticmethod
    async def plan(event, ctx):
        if event.input.get("site"):
            await ctx.submit_subagent("crawler", {"site": event.input["site"]})
            raise ValueError("no budget left")
        ctx.send_event(OutputEvent(output="next record"))


lead = Lead()
lead.add_resource("crawler", ResourceType.AGENT, ResourceDescriptor(
    Crawl, status_poll_interval_millis=5))
result = AgentsExecutionEnvironment.local().from_list(
    [{"key": "k", "site": "a.example"}, {"key": "k"}]).apply(lead).run()
print(result.outputs, [e.message for e in result.errors], SENT)
'''


def test_a_user_module_is_told_which_line_left_an_async_run_behind(tmp_path):
    (tmp_path / "lead.py").write_text(ASYNC_USER_SCRIPT)
    proc = subprocess.run([sys.executable, "lead.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=150,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == (
        "['next record'] ['no budget left'] ['submit', 'cancel']")
    line = ASYNC_USER_SCRIPT.splitlines().index(
        '            await ctx.submit_subagent("crawler", {"site": event.input["site"]})')
    [warned] = [w for w in proc.stderr.splitlines() if "was never awaited" in w]
    assert "async sub-agent 'crawler'" in warned and f"lead.py:{line + 1}" in warned, warned
    assert "cancel request" in warned
