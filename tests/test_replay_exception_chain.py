"""A replayed durable call's exception has the chain the live run's had: cause and context.

Before, a failure replayed after a restore had its recorded traceback as its ``__cause__``
(an ``OriginalFailure``) where the live run's exception had none, lost the exception it was
raised while handling (``__context__``) and a ``raise ... from None`` (``__suppress_context__``).
An action that branches on ``e.__cause__`` (``if e.__cause__ is None: ...``) took another
branch after a crash. Now the record keeps the context and the suppression beside the cause,
and the recorded traceback is kept apart: a note Python's formatting shows, and the text of
the failure the runtime reports. The crash checker compares what the action saw at every
point against the fault-free run.
"""

from __future__ import annotations

import traceback
from typing import Any

import pytest

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents_py.testing import check_replay_safety

pytestmark = pytest.mark.timeout(120)


def plain() -> str:
    error = ValueError("no price")
    error.__notes__ = ["looked up in the eu catalogue"]  # (``add_note``: Python 3.11+)
    raise error


def in_except() -> str:
    try:
        {}["sku"]
    except KeyError:
        raise ValueError("no price, the sku missing")  # noqa: B904 - the case tested
    return "unreachable"


def from_none() -> str:
    try:
        {}["sku"]
    except KeyError:
        raise ValueError("no price, quietly") from None
    return "unreachable"


def from_cause() -> str:
    try:
        {}["sku"]
    except KeyError as e:
        raise ValueError("no price, caused") from e
    return "unreachable"


def _chain(e: BaseException | None) -> Any:
    if e is None:
        return None
    context = (
        "=cause"
        if e.__context__ is not None and e.__context__ is e.__cause__
        else _chain(e.__context__)
    )
    return {
        "type": type(e).__name__,
        "str": str(e),
        "cause": _chain(e.__cause__),
        "context": context,
        "suppressed": e.__suppress_context__,
        "notes": [n for n in getattr(e, "__notes__", []) if "flink-agents-py" not in n],
    }


FUNCTIONS = {
    "plain": plain,
    "in_except": in_except,
    "from_none": from_none,
    "from_cause": from_cause,
}


class Chains(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        seen = {}
        for name, fn in FUNCTIONS.items():
            try:
                await ctx.durable_execute_async(fn)
            except ValueError as e:
                seen[name] = _chain(e)
        await ctx.durable_execute_async(len, "after")  # a point after the failures
        ctx.send_event(OutputEvent(output=seen))


def test_a_crash_never_changes_the_chain_an_action_sees():
    report = check_replay_safety(Chains(), [{"key": "a"}], other_process=False)
    report.assert_ok()
    assert sum(p.replayed for p in report.points) > 0


def test_the_live_chain_is_python_s():
    """The live run hands the action the chain Python made (what replays must match)."""
    from flink_agents_py import AgentsExecutionEnvironment

    [seen] = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(Chains()).collect()
    assert seen["plain"]["cause"] is None and seen["plain"]["context"] is None
    assert seen["in_except"]["cause"] is None
    assert seen["in_except"]["context"]["type"] == "KeyError"
    assert seen["from_none"]["suppressed"] is True and seen["from_none"]["cause"] is None
    assert seen["from_cause"]["cause"]["type"] == "KeyError"


def test_a_replayed_failure_still_shows_where_it_happened():
    from flink_agents_py.runtime._failures import failure_text
    from flink_agents_py.runtime.recorder._outcomes import rebuild_exception, store_outcome
    from flink_agents_py.runtime.recorder._state import CallRecord
    from flink_agents_py.runtime.recorder._versioning import replayed_outcome

    try:
        in_except()
    except ValueError as e:
        raised = e
    rec = CallRecord(digest="d")
    store_outcome(rec, "r0/go/c0", False, raised)
    assert rec.done and not rec.ok
    again = replayed_outcome(None, None, rec)  # type: ignore[arg-type]
    assert type(again) is ValueError and again.__cause__ is None
    assert type(again.__context__) is KeyError and not again.__suppress_context__
    shown = "".join(traceback.format_exception(again))
    assert "in in_except" in shown  # the recorded traceback: a note Python prints
    assert "in in_except" in failure_text(again)  # and what the runtime reports
    assert rebuild_exception(rec).__cause__ is None
