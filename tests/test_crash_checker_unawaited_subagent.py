"""The crash checker on an action that raises before awaiting its internal sub-agent call.

The runtime cancels such a call when its action ends (nobody can read its result), and a
restore taken while the child ran re-enters the action, which re-attaches to the child's
open call, raises again and cancels it: no call is lost or made twice. The checker reported
``skipped call: ... r0/go/c0`` at that point, since the call, open at the point and never
completed, is neither executed, replayed nor recorded by the recovery: a correct agent
failed its replay-safety test. Run as a user runs it, from their own module in a temporary
directory outside the repository.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(120)

MY_AGENT = """
from flink_agents_py.api import (
    Agent, InputEvent, InternalSubagent, OutputEvent, ResourceDescriptor, ResourceType,
    RunnerContext, action)
from flink_agents_py.testing import check_replay_safety


def lookup(what):
    return {"what": what}


class Child(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        found = await ctx.durable_execute_async(lookup, event.input)
        ctx.send_event(OutputEvent(output=found))


class Parent(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        handle = await ctx.submit_subagent("child", {"q": 1})
        checked = await ctx.durable_execute_async(lookup, "stock")
        if event.input.get("fail"):
            raise ValueError("out of stock")  # before awaiting the handle: it is cancelled
        result = await handle
        ctx.send_event(OutputEvent(output=[checked, result.result]))


def parent():
    agent = Parent()
    agent.add_resource("child", ResourceType.AGENT, ResourceDescriptor(
        InternalSubagent, agent=Child, description="looks up", input_schema='{"type":"object"}'))
    return agent


if __name__ == "__main__":
    report = check_replay_safety(
        parent(), [{"key": "a", "fail": True}, {"key": "b"}], other_process=False)
    print(report.table)
    print("RESULT", report.ok)
"""


def test_an_action_raising_before_awaiting_its_subagent_call_is_replay_safe(
    tmp_path: pathlib.Path,
):
    (tmp_path / "my_agent.py").write_text(textwrap.dedent(MY_AGENT))
    root = pathlib.Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(tmp_path)])}
    done = subprocess.run(
        [sys.executable, "my_agent.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "RESULT True" in done.stdout, done.stdout
    assert "skipped call" not in done.stdout
    assert "outputs compared" in done.stdout  # the restores ran and were compared
