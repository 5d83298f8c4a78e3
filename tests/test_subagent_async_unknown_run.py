"""An async sub-agent's remote that answers ``not_started`` for a run whose submit request was
sent and recorded: it lost the run, or does not know the call id.

The poll goes on (a queued run may answer so for a while) until ``timeout_s``, or for ever
without one; before, nothing said why the key's later records waited. Now a WARNING names
the run once it has answered so for ``NOT_STARTED_WARN_S``, and says whether a timeout bounds
the wait.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    AsyncSubagentSetup,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    RunStatus,
    SubagentResult,
    action,
)
from flink_agents_py.runtime.core import _subgraph

pytestmark = pytest.mark.timeout(60)

UNKNOWN_PROBES = 40
PROBES: list[str] = []


class Forgetful(AsyncSubagentSetup):
    """Answers ``not_started`` to its first ``UNKNOWN_PROBES`` probes, then ``completed``."""

    def call_submit_request(self, session_id: str, call_id: str, input: Any) -> None:
        PROBES.clear()

    def call_query_status(self, session_id: str, call_id: str) -> RunStatus:
        PROBES.append(call_id)
        if len(PROBES) <= UNKNOWN_PROBES:
            return RunStatus.not_started()
        return RunStatus.completed()

    def call_fetch_result(self, session_id: str, call_id: str) -> SubagentResult:
        return SubagentResult.ok("found again")


class Caller(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        result = await (await ctx.submit_subagent("remote", {}))
        ctx.send_event(OutputEvent(output=result.result))


@pytest.mark.parametrize("timeout_s", [None, 30.0])
def test_a_run_the_remote_does_not_know_is_warned_about_while_polled(timeout_s, monkeypatch,
                                                                     caplog):
    monkeypatch.setattr(_subgraph, "NOT_STARTED_WARN_S", 0.02, raising=False)
    agent = Caller()
    agent.add_resource("remote", ResourceType.AGENT, ResourceDescriptor(
        Forgetful, status_poll_interval_millis=2, timeout_s=timeout_s))
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"):
        result = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(agent).run()
    assert result.errors == [] and result.outputs == ["found again"]  # polling went on
    warned = [r.getMessage() for r in caplog.records if "never started" in r.getMessage()]
    assert len(warned) == 1, warned  # once per poll
    assert warned[0].startswith("sub-agent 'remote': for ")
    assert 'run "a"/' in warned[0] and f"#{PROBES[0]} was never started" in warned[0]
    assert ("up to timeout_s=30 s" if timeout_s else "for ever: no timeout_s is set") \
        in warned[0]
