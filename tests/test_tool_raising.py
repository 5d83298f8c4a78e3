"""A tool that raises what is not an ``Exception``: the model is told, and the chat goes on.

A tool wrapping a command-line program that calls ``sys.exit`` on bad input raises
``SystemExit``; an async tool awaiting something cancelled inside it (a client's own task)
raises ``asyncio.CancelledError`` while its call was not cancelled. Both escaped the tool
call (only ``Exception`` was caught): the tool action failed and the chat never answered,
where any other failure is a tool message the model reads (cuga-agent #625, effectful #757,
nanobot #4788). Now both are the tool's failure, told to the model; the call's own
cancellation still cancels it.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
from support.providers import outputs_of, probe_agent, run_probe

from flink_agents_py.testing import ScriptedRequest, model_from_function, tool_call, tool_calls

pytestmark = pytest.mark.timeout(60)


def exits(flag: str = "") -> str:
    """Run a command-line check that exits on bad input.

    Args:
        flag: the flag to check.
    """
    sys.exit(f"usage: check [--fast]; unknown flag {flag!r}")


async def cancelled_inside(x: int = 0) -> int:
    """Await a task that was cancelled (the caller was not).

    Args:
        x: ignored.
    """
    inner = asyncio.ensure_future(asyncio.sleep(10))
    inner.cancel()
    return await inner


def _script(req: ScriptedRequest) -> Any:
    if req.tool_results:
        return "the model read: " + req.tool_results[-1].content
    name = "exits" if req.last_user_text == "exit" else "cancelled_inside"
    return tool_calls(tool_call(name, "c1"))


def test_a_tool_raising_system_exit_or_its_own_cancellation_is_told_to_the_model():
    res = run_probe(probe_agent(model_from_function(_script),
                                tools=["exits", "cancelled_inside"],
                                tool_fns=[exits, cancelled_inside]),
                    [{"key": "a", "q": "exit"}, {"key": "b", "q": "cancel"}])
    assert res.errors == []
    answers = {a["key"]: a for a in outputs_of(res, "answer")}
    assert answers["a"]["error"] is None
    assert answers["a"]["content"] == ("the model read: Error: SystemExit: usage: check "
                                       "[--fast]; unknown flag ''")
    assert answers["b"]["error"] is None
    assert answers["b"]["content"].startswith("the model read: Error: CancelledError")
    results = {r["key"]: r for r in outputs_of(res, "results")}
    [failed] = results["a"]["results"].values()
    assert not failed["ok"] and "SystemExit" in failed["traceback"]
