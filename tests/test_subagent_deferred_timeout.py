"""A deferred external sub-agent whose ``call()`` never returns: ``timeout_s`` bounds it.

Before, the deferred kind had no bound: a hung ``call()`` held its I/O slot and its key's
later records for ever (only the async kind had ``timeout_s``). Now the call ends at its
deadline as a failed result naming the sub-agent and the limit, recorded like any outcome,
and the hung thread holds neither the key nor the process at exit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from pydantic import ValidationError
from support.harness import KEY, new_core, poll_until, resume, run_to_end, snapshot_of
from support.probes import count

from flink_agents_py.api import (
    Agent,
    DeferredSubagentSetup,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    SubagentResult,
    action,
)
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]

AGENTS = textwrap.dedent("""
    import os
    import threading
    from flink_agents_py.api import (Agent, DeferredSubagentSetup, InputEvent, OutputEvent,
                                     ResourceDescriptor, ResourceType, SubagentResult, action)

    NEVER = threading.Event()
    CALLED = os.path.abspath("called.txt")

    class Remote(DeferredSubagentSetup):
        def prepare(self, ctx, input, session_id, call_id):
            def call():
                with open(CALLED, "a") as f:  # (a file: Flink's workers may be others)
                    f.write(f"{input['q']}\\n")
                if input["key"] == "stuck":
                    NEVER.wait()  # a remote that never answers
                return SubagentResult.ok("done")
            return (f"{session_id}#{call_id}", call, None)

    class Caller(Agent):
        @action(InputEvent)
        @staticmethod
        async def go(event, ctx):
            result = await (await ctx.submit_subagent("remote", event.input))
            ctx.send_event(OutputEvent(output={"q": event.input["q"], "ok": result.success,
                                               "error": result.error_message}))

    def build():
        agent = Caller()
        agent.add_resource("remote", ResourceType.AGENT, ResourceDescriptor(
            Remote, description="A remote.", timeout_s=0.5))
        return agent

    RECORDS = [{"key": "stuck", "q": 1}, {"key": "stuck", "q": 2}, {"key": "fine", "q": 3}]
""")

SCRIPT = textwrap.dedent("""
    import json
    import sys
    from flink_agents_py import AgentsExecutionEnvironment
    from my_agents import RECORDS, build

    if sys.argv[1] == "local":
        outs = AgentsExecutionEnvironment.local().from_list(RECORDS).apply(build()).collect()
    else:
        from pyflink.common import Types
        from flink_agents_py.flink import create_stream_environment

        env = create_stream_environment(execution_mode="thread", restart_attempts=0)
        records = env.from_collection(RECORDS, type_info=Types.PICKLED_BYTE_ARRAY())
        out = (AgentsExecutionEnvironment.flink(env, metrics=False)
               .from_datastream(records, key_selector=lambda r: r["key"])
               .apply(build()).to_datastream())
        with out.execute_and_collect("deferred-timeout") as results:
            outs = list(results)
    print(json.dumps({"outputs": outs}))
""")


@pytest.mark.parametrize("host", ["local", pytest.param("flink", marks=pytest.mark.flink)])
def test_a_hung_deferred_call_times_out_and_the_key_goes_on(tmp_path, host):
    (tmp_path / "my_agents.py").write_text(AGENTS)
    (tmp_path / "caller.py").write_text(SCRIPT)
    env = {"PYTHONPATH": str(ROOT), "PATH": ""}
    if host == "flink":
        pytest.importorskip("pyflink")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "caller.py", host],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=100,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert time.monotonic() - t0 < 90  # the hung threads did not hold the process at exit
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    by_q = {o["q"]: o for o in found["outputs"]}
    assert sorted(by_q) == [1, 2, 3]  # the stuck key's second record ran too
    for q in (1, 2):
        assert by_q[q]["ok"] is False
        assert "sub-agent 'remote': the deferred call timed out" in by_q[q]["error"]
        assert "timeout_s=0.5 s" in by_q[q]["error"]
    assert by_q[3] == {"q": 3, "ok": True, "error": None}
    called = (tmp_path / "called.txt").read_text().split()
    assert sorted(called) == ["1", "2", "3"]  # each call once


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf")])
def test_a_deferred_timeout_that_cannot_work_is_refused_when_declared(bad):
    with pytest.raises(ValidationError, match="timeout_s"):
        Hung(timeout_s=bad)


def test_an_unset_timeout_stays_out_of_the_setups_json_form():
    # recorded calls' digests hold the setup's JSON form: unset, it is as before
    from flink_agents_py.runtime._serde import to_json_value

    assert "timeout_s" not in json.dumps(to_json_value(Hung(description="d"), "setup"))


TIMEOUT_S = 2.0


class Hung(DeferredSubagentSetup):
    """A deferred call that never returns (its thread is abandoned at the deadline)."""

    def prepare(self, ctx, input, session_id, call_id):
        def call():
            count("called")
            while True:
                time.sleep(3600)

        return (f"{session_id}#{call_id}", call, None)


class DeferredCaller(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event, ctx):
        result = await (await ctx.submit_subagent("remote", event.input))
        ctx.send_event(OutputEvent(output={"ok": result.success, "error": result.error_message}))


def _plan() -> AgentPlan:
    agent = DeferredCaller()
    agent.add_resource(
        "remote",
        ResourceType.AGENT,
        ResourceDescriptor(Hung, description="A remote.", timeout_s=TIMEOUT_S),
    )
    return AgentPlan.from_agent(agent)


def _deadline(state: InMemoryKeyState) -> int | None:
    run = state.run
    found = [w for cid, w in run.waits.items() if cid.startswith("#poll/")] if run else []
    return found[0].deadline_ms if found else None


@pytest.mark.parametrize("how", ["deepcopy", "json"])
def test_a_restore_past_the_deadline_gives_the_timeout_without_calling_again(probes, how):
    plan = _plan()
    core = new_core(plan)
    state = InMemoryKeyState()
    try:
        assert core.on_input(KEY, {"q": 1}, state).errors == []
        poll_until(core, state, lambda s: _deadline(s) is not None and probes["called"])
        saved = snapshot_of(state, how)  # the checkpoint: the call was running
    finally:
        core.close()
    deadline_ms = _deadline(saved)
    assert deadline_ms is not None
    while time.time_ns() // 1_000_000 < deadline_ms:  # the job was down past the deadline
        time.sleep(0.01)
    t0 = time.monotonic()
    outputs, errors, _ = resume(plan, saved)
    assert errors == []
    [out] = outputs
    assert out["ok"] is False and "the deferred call timed out" in out["error"]
    assert time.monotonic() - t0 < TIMEOUT_S / 2, "the restore started the timeout anew"
    assert probes["called"] == 1  # not called again


def test_a_recorded_timeout_replays_without_calling(probes):
    plan = _plan()
    core = new_core(plan)
    state = InMemoryKeyState()
    try:
        core.on_input(KEY, {"q": 1}, state)
        outputs, errors = run_to_end(core, state)
    finally:
        core.close()
    assert errors == [] and [o["ok"] for o in outputs] == [False]
    assert f"timeout_s={TIMEOUT_S:g} s" in outputs[0]["error"]
    assert probes["called"] == 1


class Quick(DeferredSubagentSetup):
    """A deferred call that answers at once (well within its timeout)."""

    def prepare(self, ctx, input, session_id, call_id):
        def call():
            return SubagentResult.ok({"echo": input})

        return (f"{session_id}#{call_id}", call, None)


def test_a_deferred_call_with_a_timeout_is_replay_safe_at_every_crash_point():
    # with timeout_s the call runs in a thread of its own: its answer is still the call's
    # recorded outcome, replayed at every crash point
    from flink_agents_py.testing import check_replay_safety

    agent = DeferredCaller()
    agent.add_resource(
        "remote",
        ResourceType.AGENT,
        ResourceDescriptor(Quick, description="A remote.", timeout_s=30),
    )
    report = check_replay_safety(agent, [{"key": k, "q": 1} for k in "abc"])
    report.assert_ok()
    assert report.outputs == 3 and report.points_total >= 3


def test_a_call_returning_after_the_loop_closed_is_ignored_quietly():
    # an abandoned call that returns once the job (its executor's loop) is gone: its thread
    # ends without a traceback, and the call timed out as it did
    import asyncio
    import threading

    from flink_agents_py.runtime.core._deferred_timeout import _within

    release = threading.Event()
    ended = threading.Event()
    raised: list[BaseException] = []
    hook = threading.excepthook
    threading.excepthook = lambda args: raised.append(args.exc_value)

    def call():
        release.wait()
        ended.set()
        return SubagentResult.ok("late")

    try:
        deadline_ms = time.time_ns() // 1_000_000 + 100
        result = asyncio.run(_within(call, "remote", 0.1, deadline_ms))
        release.set()  # the loop is closed by now
        assert ended.wait(10)
        for thread in threading.enumerate():  # its last lines, after the call returned
            if thread.name == "flink-agents-deferred-remote":
                thread.join(10)
    finally:
        threading.excepthook = hook
    assert result.success is False and "timeout_s=0.1 s" in result.error_message
    assert raised == []
