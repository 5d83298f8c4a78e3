"""An answer that comes before its key's run exists is an error row naming key and position.

An outside event is held only for a run in flight (``docs/how-to/wait-for-approval.md``):
one that arrives before the key's record started its run (two sources racing, or items
placed before the records) cannot be claimed by any run. It went to the error output saying
only ``no run of key 'a' is in flight``, which read as a bug of the runtime to a user who sent
the answer first; the message now says why and what to do, and nothing else is lost: the
run the record starts waits on, and every other key runs.
"""

from __future__ import annotations

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    InputEvent,
    OutputEvent,
    RunnerContext,
    WaitTimeoutError,
    action,
)
from flink_agents_py.local import AfterRecords

pytestmark = pytest.mark.timeout(120)


class Waits(Agent):
    """Waits for ``go-<key>``; outputs the payload (or the timeout)."""

    @action(InputEvent)
    @staticmethod
    async def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        try:
            got = await ctx.wait_for(f"go-{ctx.key}", timeout_s=60)
        except WaitTimeoutError as e:
            got = f"timed out: {e}"
        ctx.send_event(OutputEvent(output={"key": ctx.key, "got": got}))


def test_an_answer_before_its_run_is_an_error_row_naming_key_position_and_why():
    events = [
        {"key": "a", "correlation_id": "go-a", "payload": 1},  # before any record
        AfterRecords(2),
        {"key": "b", "correlation_id": "go-b", "payload": 2},
    ]
    result = (
        AgentsExecutionEnvironment.local()
        .from_list([{"key": "a"}, {"key": "b"}])
        .connect(events, interleaved=True)
        .apply(Waits())
        .run()
    )
    [error] = result.errors
    assert (error.key, error.action, error.execution_id, error.error_type) == (
        "a",
        "<outside>",
        "outside event 0",
        "UnmatchedEventError",
    )
    assert error.message == (
        "outside event with correlation id 'go-a' arrived for no waiter: no run of key 'a' is "
        "in flight (an event is held only for a run in flight: it came before the key's record "
        "started one, or after the run ended; send it once the run waits, as an answer to the "
        "request read from the outputs is)"
    )
    assert error.input == {"key": "a", "correlation_id": "go-a", "payload": 1}
    got = {o["key"]: o["got"] for o in result.outputs}
    assert got["b"] == 2 and got["a"].startswith("timed out")
