"""A generator function given to a durable call is refused clearly, with nothing run.

A generator's body runs only as it is iterated, and a durable call records one result: the
call fails with a ``SerializationError`` that names the function and says what to do, the
body never runs, and a replay after a restore gives the same failure (recorded) without
calling anything (the crash checker restores at every point).
"""

from __future__ import annotations

from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    InputEvent,
    OutputEvent,
    RunnerContext,
    SerializationError,
    action,
)
from flink_agents_py.testing import CallCounter, check_replay_safety

pytestmark = pytest.mark.timeout(120)

BODIES = CallCounter()


def numbers(n: int) -> Any:
    BODIES.count("numbers")
    yield from range(n)


async def async_numbers(n: int) -> Any:
    BODIES.count("async_numbers")
    for i in range(n):
        yield i


class Streams(Agent):
    """Gives a generator function to ``durable_execute`` or ``durable_execute_async``."""

    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        fn = async_numbers if event.input["fn"] == "async" else numbers
        try:
            if event.input["how"] == "sync":
                got: Any = ctx.durable_execute(fn, 3)
            else:
                got = await ctx.durable_execute_async(fn, 3)
        except SerializationError as e:
            got = f"refused: {e}"
        ctx.send_event(OutputEvent(output=got))


RECORDS = [{"key": f"{fn}-{how}", "fn": fn, "how": how}
           for fn in ("sync", "async") for how in ("sync", "async")]


@pytest.mark.parametrize("record", RECORDS, ids=[r["key"] for r in RECORDS])
def test_a_generator_function_is_refused_naming_it_and_nothing_runs(record):
    BODIES.reset()
    result = AgentsExecutionEnvironment.local().from_list([record]).apply(Streams()).run()
    assert result.errors == []
    [out] = result.outputs
    name = "async_numbers" if record["fn"] == "async" else "numbers"
    assert out.startswith("refused: ") and f"test_durable_generators:{name}" in out
    assert "generator function" in out and "list" in out
    assert BODIES.total == 0


def test_the_refusal_is_replayed_at_every_crash_point():
    BODIES.reset()
    check_replay_safety(Streams(), RECORDS, reset=BODIES.reset).assert_ok()
    assert BODIES.total == 0
