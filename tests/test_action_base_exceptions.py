"""An action that raises what is not an ``Exception`` fails its record alone.

An ``asyncio.CancelledError`` or a ``GeneratorExit`` an action raises itself, or a
``BaseException`` subclass of the user's, went past the core's ``except Exception``: out of
the local runner (the job stopped) and out of the Flink operator's callback with the action
still live, so a restarted job restored into the same action and raised again, for ever.
The core steps an action's coroutine itself, so such an error is never the runtime
cancelling it: each now fails its action like any exception (an error record with the key,
its position and the error; the key goes on), on either path of the core and the same way
at every crash point. ``KeyboardInterrupt`` and ``SystemExit`` still end the process
(``test_breaker_at_once_hostile``, ``test_at_once``).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from support.base_exception_agents import (
    FAILED,
    GOOD,
    RECORDS,
    Abort,
    PlainRaiseBase,
    RaiseBase,
    key_or_cancelled,
)

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    DeferredSubagentSetup,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents_py.testing import check_replay_safety

ROOT = pathlib.Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(180)


def _errors(result) -> list[tuple[str, int, str, str]]:
    return sorted((e.key, e.seq, e.error_type, e.message.split(" (at ")[0]) for e in result.errors)


@pytest.mark.parametrize("agent", [RaiseBase, PlainRaiseBase])
def test_each_failing_record_is_an_error_record_and_its_key_goes_on(agent):
    records = (
        RECORDS
        if agent is RaiseBase
        else [{k: v for k, v in r.items() if k != "after"} for r in RECORDS]
    )
    result = AgentsExecutionEnvironment.local().from_list(records).apply(agent()).run()
    assert sorted(result.outputs, key=lambda o: o["n"]) == GOOD
    assert _errors(result) == sorted(FAILED)
    failed = {e.seq: e for e in result.errors if e.key == "a"}
    assert "on_input" in failed[1].traceback and failed[1].action == "on_input"


def test_the_same_failures_at_every_crash_point():
    report = check_replay_safety(RaiseBase(), RECORDS, other_process=False)
    assert report.ok, report.table


def test_a_users_script_with_its_own_base_exception(tmp_path):
    script = tmp_path / "user_job.py"
    script.write_text(
        textwrap.dedent("""
        import asyncio, json
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action

        class Stop(BaseException):
            pass

        class Worker(Agent):
            @action(InputEvent)
            @staticmethod
            async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
                if event.input["do"] == "cancel":
                    raise asyncio.CancelledError("gave up")
                if event.input["do"] == "stop":
                    raise Stop("halt")
                ctx.send_event(OutputEvent(output={"key": ctx.key, "do": event.input["do"]}))

        records = [{"key": "a", "do": "cancel"}, {"key": "a", "do": "ok"},
                   {"key": "b", "do": "stop"}, {"key": "b", "do": "fine"}]
        result = AgentsExecutionEnvironment.local().from_list(records).apply(Worker()).run()
        print(json.dumps({"outputs": sorted(o["do"] for o in result.outputs),
                          "errors": sorted([e.key, e.seq, e.error_type, e.message]
                                           for e in result.errors)}))
    """)
    )
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["outputs"] == ["fine", "ok"]
    assert [e[:3] for e in out["errors"]] == [["a", 0, "CancelledError"], ["b", 0, "Stop"]]
    assert out["errors"][0][3].startswith("gave up") and out["errors"][1][3].startswith("halt")


# -- the neighbours: other code of the user's that runs on the operator's thread -----------
def test_a_key_selector_raising_a_cancelled_error_rejects_that_record_alone():
    records = [{"key": "a", "n": 0}, {"key": "a", "n": 1, "cancel": True}, {"key": "a", "n": 2}]
    result = (
        AgentsExecutionEnvironment.local()
        .from_list(records, key_selector=key_or_cancelled)
        .apply(RaiseBase())
        .run()
    )
    assert [o["n"] for o in result.outputs] == [0, 2]
    [error] = result.errors
    assert (error.action, error.error_type, error.message) == (
        "<key_selector>",
        "CancelledError",
        "no key for 1",
    )


class Refusing(DeferredSubagentSetup):
    """A deferred sub-agent whose ``prepare`` raises a user's ``BaseException``."""

    def prepare(self, ctx: Any, input: Any, session_id: str, call_id: str) -> Any:
        raise Abort(f"refused {input['n']}")


class Delegates(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        n = event.input["n"]
        if n % 2:
            await (await ctx.submit_subagent("remote", {"n": n}))
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": n}))


def _delegates() -> Agent:
    agent = Delegates()
    agent.add_resource(
        "remote",
        ResourceType.AGENT,
        ResourceDescriptor(clazz=f"{__name__}.Refusing", description="refuses"),
    )
    return agent


def test_a_deferred_setups_prepare_raising_a_base_exception_fails_its_caller_alone():
    records = [{"key": "a", "n": i} for i in range(4)]
    result = AgentsExecutionEnvironment.local().from_list(records).apply(_delegates()).run()
    assert [o["n"] for o in result.outputs] == [0, 2]
    assert [(e.seq, e.error_type) for e in result.errors] == [
        (1, "DurableExecutionError"),
        (3, "DurableExecutionError"),
    ]
    assert "Abort: refused 1" in result.errors[0].message
    report = check_replay_safety(_delegates(), records, other_process=False)
    assert report.ok, report.table
