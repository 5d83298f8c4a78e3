"""An exception group raised by a durable call replays as the group it was.

A durable call whose function raises an ``ExceptionGroup`` (an ``asyncio.TaskGroup`` in a
``durable_execute_async`` function does) was recorded with its message only and replayed as
a ``DurableExecutionError``: an action whose ``except*`` clauses matched its members took
another branch after a restore than in the first run. The record now keeps the members'
forms (nested groups too) and a replay rebuilds the group.
"""

from __future__ import annotations

import builtins
import json
import os
import subprocess
import sys

import pytest

from flink_agents_py.runtime.recorder._outcomes import rebuild_exception, store_outcome
from flink_agents_py.runtime.recorder._state import CallRecord

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="except* is Python 3.11+")
GROUP = getattr(builtins, "ExceptionGroup", None)  # (Python 3.11+)

USER_AGENT = """
from flink_agents_py.api import Agent, InputEvent, OutputEvent, action


class Refused(Exception):
    def __init__(self, sku, reason):
        super().__init__(sku, reason)
        self.sku = sku


def check_all(skus):
    raise ExceptionGroup("checks failed", [
        Refused(skus[0], "out of stock"),
        ExceptionGroup("lookups", [KeyError(skus[1])]),
    ])


def settle():
    return "settled"


class Checker(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event, ctx):
        seen = []
        try:
            await ctx.durable_execute_async(check_all, event.input["skus"])
        except* Refused as group:
            seen += [["refused", e.sku, str(e)] for e in group.exceptions]
        except* KeyError as group:
            seen.append(["missing", type(group.exceptions[0]).__name__,
                         [repr(e) for e in group.exceptions[0].exceptions]])
        await ctx.durable_execute_async(settle)  # a checkpoint can find the action here
        ctx.send_event(OutputEvent(output=seen))
"""

USER_CHECK = """
import json
from flink_agents_py.testing import check_replay_safety
from checker import Checker

report = check_replay_safety(Checker(), [{"key": "a", "skus": ["s1", "s2"]}])
print(json.dumps({"ok": report.ok, "findings": report.findings}))
"""


def test_a_replayed_exception_group_takes_the_same_except_star_branches(tmp_path):
    # as a user runs it: their agent and check in their own directory; restores in this
    # process and in others (other hash seeds), each must match the fault-free run
    (tmp_path / "checker.py").write_text(USER_AGENT)
    (tmp_path / "check.py").write_text(USER_CHECK)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "check.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"ok": True, "findings": []}


def test_a_group_is_recorded_with_its_members_and_rebuilt_from_the_record():
    rec = CallRecord(digest="")
    group = GROUP("outer", [ValueError("v"), GROUP("inner", [KeyError("k")])])
    ok, live = store_outcome(rec, "r0/a/c0", False, group)
    assert not ok and live is group
    json.dumps(rec.to_builtins())  # keyed state holds it
    rebuilt = rebuild_exception(CallRecord.model_validate(json.loads(json.dumps(
        rec.to_builtins()))))
    assert type(rebuilt) is GROUP and str(rebuilt) == str(group)
    [value, inner] = rebuilt.exceptions
    assert type(value) is ValueError and value.args == ("v",)
    assert type(inner) is GROUP and inner.message == "inner"
    assert type(inner.exceptions[0]) is KeyError and inner.exceptions[0].args == ("k",)
