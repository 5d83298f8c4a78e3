"""An action that catches ``CallLimitError`` itself handles it (docs/how-to/limits.md).

It goes on and its output ends the record, with no error record (as for any exception an
action catches; Apache Flink Agents has no such limit), while every further durable call of
the run raises the error again, so the fan-out still stops at the limit. The key's next
record starts counting anew.
"""

from __future__ import annotations

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    CallLimitError,
    InputEvent,
    OutputEvent,
    RunnerContext,
    action,
)
from flink_agents_py.testing import check_replay_safety

pytestmark = pytest.mark.timeout(60)


def page(n: int) -> int:
    return n


class Crawler(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        pages: list[int] = []
        refused = 0
        for n in range(6):
            try:
                pages.append(await ctx.durable_execute_async(page, n))
            except CallLimitError:
                refused += 1
        ctx.send_event(OutputEvent(output={"pages": pages, "refused": refused}))


def test_an_action_that_catches_the_call_limit_goes_on_without_an_error_record(monkeypatch):
    monkeypatch.setattr(CallLimitError, "LIMIT", 3)
    records = [{"key": "a"}, {"key": "a"}]
    result = AgentsExecutionEnvironment.local().from_list(records).apply(Crawler()).run()
    assert result.errors == []
    # each record: three calls, then every further one refused (the next record anew)
    assert result.outputs == [{"pages": [0, 1, 2], "refused": 3}] * 2
    report = check_replay_safety(Crawler(), records, other_process=False)
    assert report.ok, report.table
