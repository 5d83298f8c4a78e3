"""A run given up (it can never finish) sends its never-polled async runs their cancel requests.

An async sub-agent's remote run starts at submit. When its action ends without awaiting the
handle, the run is sent its cancel request (``cancel_unpolled``). But a run the runtime gives
up (``AgentCore.give_up``: at the end of input on Flink and locally, or where the local
runner waits for I/O) only had its actions' coroutines closed: the remote runs they submitted
and never polled were left going, with nobody to read their results. Now each is sent its
cancel request, once, and the error record names them. Run as a user runs it: their module,
from a directory outside the repository.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import json
    import sys
    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import (Agent, AsyncSubagentSetup, InputEvent, OutputEvent,
                                     ResourceDescriptor, ResourceType, RunStatus,
                                     SubagentResult, action)
    from flink_agents_py.runtime.core._inbox import Inbox

    # a broken invariant of the runtime, as the runtime's own tests make it: the outcome of
    # key "lost"'s lookup never reaches the core, so its run can never finish
    put, SEEN = Inbox.put, []

    def dropping(self, key, item):
        if key == "lost":
            SEEN.append(item)
            if len(SEEN) == 2:  # the lookup's (the first is the submit's)
                return
        put(self, key, item)

    Inbox.put = dropping
    SUBMITTED, CANCELLED = [], []

    class Remote(AsyncSubagentSetup):
        def call_submit_request(self, session_id, call_id, input):
            SUBMITTED.append(session_id.split("/")[0] + " " + call_id)

        def call_query_status(self, session_id, call_id):
            return RunStatus.running()

        def call_fetch_result(self, session_id, call_id):
            return SubagentResult.ok("done")

        def call_cancel_request(self, session_id, call_id):
            CANCELLED.append(session_id.split("/")[0] + " " + call_id)

    def lookup(n):
        return n * 100

    class Caller(Agent):
        @action(InputEvent)
        @staticmethod
        async def go(event, ctx):
            handle = await ctx.submit_subagent("remote", event.input)  # its run starts now
            got = await ctx.durable_execute_async(lookup, event.input["i"])
            await handle.cancel()
            ctx.send_event(OutputEvent(output={"key": event.input["key"], "got": got}))

    agent = Caller()
    agent.add_resource("remote", ResourceType.AGENT, ResourceDescriptor(
        Remote, description="A remote.", input_schema='{"type":"object"}'))
    records = [{"key": "lost", "i": 1}, {"key": "ok", "i": 2}]
    res = AgentsExecutionEnvironment.local().from_list(records).apply(agent).run(
        one_at_a_time=sys.argv[1] == "1")
    print(json.dumps({"outputs": res.outputs, "errors": [e.message for e in res.errors],
                      "submitted": SUBMITTED, "cancelled": CANCELLED}))
""")


@pytest.mark.parametrize("one_at_a_time", ["0", "1"])
def test_a_given_up_run_cancels_the_remote_runs_it_never_polled(tmp_path, one_at_a_time):
    (tmp_path / "caller.py").write_text(SCRIPT)
    proc = subprocess.run(
        [sys.executable, "caller.py", one_at_a_time],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=100,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["outputs"] == [{"key": "ok", "got": 200}]
    [message] = found["errors"]
    assert "the run of key 'lost' (input 0) could not finish" in message
    assert "waits for function call r0/go/c2" in message  # the lookup's outcome was lost
    # the given-up run's remote run got its cancel request once; the other key's, by its
    # own handle.cancel(), once too
    runs = ['"lost" r0/go/c0', '"ok" r0/go/c0']
    assert sorted(found["submitted"]) == runs and sorted(found["cancelled"]) == runs
    assert message.endswith(
        "the async sub-agent runs it never polled are sent their "
        "cancel requests: sub-agent 'remote' (r0/go/c0)"
    )
