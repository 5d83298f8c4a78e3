"""An async (pub/sub) sub-agent's remote run that never ends: ``timeout_s`` bounds its polls.

Before, the poll went on for ever, and the key's later records waited behind the run for
good. With ``timeout_s`` the run is sent its cancel request once the time is up, the call
fails saying it timed out, and the key's next record runs. Run as a user runs it: their
module, from a directory outside the repository.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from flink_agents_py.api import AsyncSubagentSetup, RunStatus, SubagentResult

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent('''
    import json
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import (Agent, AsyncSubagentSetup, InputEvent, OutputEvent,
                                     ResourceDescriptor, ResourceType, RunStatus,
                                     SubagentResult, action)

    CANCELLED = []

    class Remote(AsyncSubagentSetup):
        def call_submit_request(self, session_id, call_id, input):
            pass

        def call_query_status(self, session_id, call_id):
            if "stuck" in session_id:
                return RunStatus.running()  # a remote run that never ends
            return RunStatus.completed()

        def call_fetch_result(self, session_id, call_id):
            return SubagentResult.ok("done")

        def call_cancel_request(self, session_id, call_id):
            CANCELLED.append(session_id.split("/")[0])

    class Caller(Agent):
        @action(InputEvent)
        @staticmethod
        async def go(event, ctx):
            result = await (await ctx.submit_subagent("remote", event.input))
            ctx.send_event(OutputEvent(output={"input": event.input, "ok": result.success,
                                               "error": result.error_message}))

    agent = Caller()
    agent.add_resource("remote", ResourceType.AGENT, ResourceDescriptor(
        Remote, description="A remote.", input_schema='{"type":"object"}',
        status_poll_interval_millis=50, timeout_s=0.5))
    records = [{"key": "stuck", "q": 1}, {"key": "stuck", "q": 2}, {"key": "fine", "q": 3}]
    outs = AgentsExecutionEnvironment.local().from_list(
        records, key_selector=lambda r: r["key"]).apply(agent).collect()
    print(json.dumps({"outputs": outs, "cancelled": CANCELLED}))
''')


def test_a_remote_run_past_its_timeout_is_cancelled_and_the_key_goes_on(tmp_path):
    (tmp_path / "caller.py").write_text(SCRIPT)
    proc = subprocess.run([sys.executable, "caller.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=100, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    by_q = {o["input"]["q"]: o for o in found["outputs"]}
    assert sorted(by_q) == [1, 2, 3]  # the stuck key's second record ran too
    for q in (1, 2):
        assert by_q[q]["ok"] is False
        assert "the remote run timed out" in by_q[q]["error"]
        assert "timeout_s=0.5 s" in by_q[q]["error"]
    assert by_q[3] == {"input": {"key": "fine", "q": 3}, "ok": True, "error": None}
    assert found["cancelled"] == ['"stuck"', '"stuck"']  # each timed-out run, once


class _Remote(AsyncSubagentSetup):
    def call_submit_request(self, session_id: str, call_id: str, input: object) -> None:
        pass

    def call_query_status(self, session_id: str, call_id: str) -> RunStatus:
        return RunStatus.running()

    def call_fetch_result(self, session_id: str, call_id: str) -> SubagentResult:
        return SubagentResult.ok(None)


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf")])
def test_a_timeout_that_cannot_work_is_refused_when_declared(bad):
    with pytest.raises(ValidationError, match="timeout_s"):
        _Remote(timeout_s=bad)


DOWN_SCRIPT = textwrap.dedent('''
    import json
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import (Agent, AsyncSubagentSetup, InputEvent, OutputEvent,
                                     ResourceDescriptor, ResourceType, RunStatus,
                                     SubagentResult, action)

    class Remote(AsyncSubagentSetup):
        def call_submit_request(self, session_id, call_id, input):
            pass

        def call_query_status(self, session_id, call_id):
            return RunStatus.running()

        def call_fetch_result(self, session_id, call_id):
            return SubagentResult.ok("done")

        def call_cancel_request(self, session_id, call_id):
            raise ConnectionError("cancel endpoint down")

    class Caller(Agent):
        @action(InputEvent)
        @staticmethod
        async def go(event, ctx):
            result = await (await ctx.submit_subagent("remote", event.input))
            ctx.send_event(OutputEvent(output={"q": event.input["q"], "ok": result.success,
                                               "error": result.error_message}))

    agent = Caller()
    agent.add_resource("remote", ResourceType.AGENT, ResourceDescriptor(
        Remote, description="A remote.", input_schema='{"type":"object"}',
        status_poll_interval_millis=20, timeout_s=0.2))
    res = AgentsExecutionEnvironment.local().from_list(
        [{"key": "k", "q": 1}, {"key": "k", "q": 2}]).apply(agent).run()
    print(json.dumps({"outputs": res.outputs, "errors": [str(e) for e in res.errors]}))
''')


def test_a_timed_out_run_whose_cancel_request_fails_still_fails_as_timed_out(tmp_path):
    # before: the cancel request's ConnectionError replaced the time-out at the caller's
    # await (the action failed with the cancel's error, the time-out unsaid)
    (tmp_path / "caller.py").write_text(DOWN_SCRIPT)
    proc = subprocess.run([sys.executable, "caller.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=100, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["errors"] == []
    assert [o["q"] for o in found["outputs"]] == [1, 2]
    for out in found["outputs"]:
        assert out["ok"] is False
        assert "the remote run timed out" in out["error"]
        assert "its cancel request failed (ConnectionError: cancel endpoint down)" in out["error"]
    assert "the cancel request of remote run" in proc.stderr  # and logged


class _Stuck(AsyncSubagentSetup):
    failing_cancel: bool = True
    reason: str | None = None

    def call_submit_request(self, session_id, call_id, input):
        pass

    def call_query_status(self, session_id, call_id):
        return RunStatus(state="failed", error=self.reason) if self.reason is not None \
            else RunStatus.running()

    def call_fetch_result(self, session_id, call_id):
        return SubagentResult.ok("done")

    def call_cancel_request(self, session_id, call_id):
        if self.failing_cancel:
            raise ConnectionError("cancel endpoint down")


def test_a_cancelled_poll_whose_cancel_request_fails_ends_cancelled():
    import asyncio
    import threading

    from flink_agents_py.runtime.core._subgraph import poll_result

    stop = threading.Event()
    stop.set()  # the sub-agent call the caller runs in was cancelled
    result = asyncio.run(poll_result(_Stuck(), "s", "c", "remote", stop))
    assert result.cancelled is True


@pytest.mark.parametrize(("reason", "said"), [
    ("", "the remote run failed (its status gave no reason)"),
    ("quota", "the remote run failed: quota"),
])
def test_a_failed_status_without_a_reason_says_so_not_none(reason, said):
    import asyncio

    from flink_agents_py.runtime.core._subgraph import poll_result

    result = asyncio.run(poll_result(_Stuck(reason=reason), "s", "c", "remote"))
    assert result.success is False
    assert result.error_message == f"sub-agent 'remote': {said}"
