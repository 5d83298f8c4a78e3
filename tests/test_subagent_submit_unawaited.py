"""A sub-agent submit that is never awaited: ``ctx.submit_subagent(...)`` (or
``setup.submit(ctx, ...)``) without ``await``.

Submitting is itself awaited (``handle = await ctx.submit_subagent(...)``), and nothing is
submitted until then. Written without the ``await`` (in a plain action, where it cannot be
awaited, or by a slip in an async one), the sub-agent was silently never called: the action
went on as if it had delegated, and only Python's own ``RuntimeWarning`` about a coroutine,
pointing into the runtime, hinted at it (a plain action's ``ctx.wait_for`` is a
``UsageError``). Now a WARNING names the line, the sub-agent and the fix, once per line.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    InputEvent,
    InternalSubagent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _warn_afresh():
    """Each line is warned about once per process: forget the lines warned about before."""
    from flink_agents_py.runtime.context._calls import MustAwait

    MustAwait._warned.clear()

RAN: list[Any] = []


class Kid(Agent):
    @action(InputEvent)
    @staticmethod
    def go(event: InputEvent, ctx: RunnerContext) -> None:
        RAN.append(event.input)
        ctx.send_event(OutputEvent(output="kid"))


class PlainParent(Agent):
    @action(InputEvent)
    @staticmethod
    def go(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input["how"] == "setup":
            ctx.get_resource("kid", ResourceType.AGENT).submit(ctx, {"n": 1})  # DROPPED-SETUP
        else:
            ctx.submit_subagent("kid", {"n": 1})  # DROPPED-PLAIN
        ctx.send_event(OutputEvent(output="went on"))


class AsyncParent(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.submit_subagent("kid", {"n": 1})  # DROPPED-ASYNC
        handle = await ctx.submit_subagent("kid", {"n": 2})
        ctx.send_event(OutputEvent(output=(await handle).result))


def parent(cls: type[Agent]) -> Agent:
    agent = cls()
    agent.add_resource("kid", ResourceType.AGENT, ResourceDescriptor(InternalSubagent, agent=Kid))
    return agent


def _line(marker: str) -> str:
    with open(__file__, encoding="utf-8") as f:
        n = next(i for i, line in enumerate(f, 1) if line.rstrip().endswith(marker))
    return f"test_subagent_submit_unawaited.py:{n}"


@pytest.mark.parametrize(("cls", "how", "marker", "outputs"), [
    (PlainParent, "ctx", "# DROPPED-PLAIN", ["went on"]),
    (PlainParent, "setup", "# DROPPED-SETUP", ["went on"]),
    (AsyncParent, "ctx", "# DROPPED-ASYNC", [["kid"]]),
], ids=["plain", "plain-setup", "async"])
def test_a_submit_never_awaited_is_warned_about_naming_its_line(cls, how, marker, outputs,
                                                                 caplog):
    RAN.clear()
    with caplog.at_level(logging.WARNING, logger="flink_agents_py.runtime"), \
            warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no bare coroutine warning instead
        result = (AgentsExecutionEnvironment.local()
                  .from_list([{"key": "a", "how": how}, {"key": "b", "how": how}])
                  .apply(parent(cls)).run())
    assert result.errors == [] and result.outputs == outputs * 2
    assert RAN == ([{"n": 2}] * 2 if cls is AsyncParent else [])  # the dropped one: never
    warned = [r.getMessage() for r in caplog.records if "never awaited" in r.getMessage()]
    assert len(warned) == 1, warned  # once per line
    assert _line(marker) in warned[0], warned[0]
    assert "sub-agent 'kid'" in warned[0] and "never called" in warned[0]
    assert "handle = await ctx.submit_subagent(" in warned[0]
