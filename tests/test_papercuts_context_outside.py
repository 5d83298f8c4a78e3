"""A memory kept from an action and used after it finished is refused, naming what and why.

``ctx.send_event``, ``ctx.durable_execute`` and ``ctx.get_resource`` after the action
finished raised ``NotInActionContextError``; ``ctx.short_term_memory.set(...)`` and
``ctx.sensory_memory.set(...)`` (or a memory kept in a global) went through silently: a
write outside any action, recorded by no run, so lost or applied to the key behind the
runtime's back. It is refused as the other uses are.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    InputEvent,
    NotInActionContextError,
    OutputEvent,
    RunnerContext,
    action,
)

pytestmark = pytest.mark.timeout(120)

KEPT: dict[str, Any] = {}


class Keeps(Agent):
    """Keeps its context and memory (a misuse) and counts in memory."""

    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        KEPT["ctx"], KEPT["memory"] = ctx, ctx.short_term_memory
        n = (ctx.short_term_memory.get("n") or 0) + 1
        ctx.short_term_memory.set("n", n)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": n}))


def test_memory_kept_past_its_action_is_refused_and_the_next_run_sees_only_its_own():
    job = AgentsExecutionEnvironment.local().from_list([{"key": "a"}, {"key": "a"}])
    assert [o["n"] for o in job.apply(Keeps()).run().outputs] == [1, 2]
    ctx, memory = KEPT["ctx"], KEPT["memory"]
    for use in (
        lambda: memory.set("n", 99),
        lambda: memory.get("n"),
        lambda: ctx.short_term_memory.set("n", 99),
        lambda: ctx.sensory_memory.set("x", 1),
    ):
        with pytest.raises(
            NotInActionContextError,
            match=r"was used outside any action \(after "
            r"its action finished, or from a thread of the program's own\)",
        ):
            use()


class FromAThread(Agent):
    """Writes its memory from a thread of its own while the action runs (a misuse)."""

    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        memory, seen = ctx.short_term_memory, []

        def write() -> None:
            try:
                memory.set("n", 1)
            except NotInActionContextError as e:
                seen.append(str(e))

        thread = threading.Thread(target=write)
        thread.start()
        thread.join()
        ctx.send_event(OutputEvent(output={"key": ctx.key, "refused": seen}))


def test_memory_written_from_a_thread_of_the_program_s_own_is_refused():
    [out] = (
        AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(FromAThread()).collect()
    )
    [message] = out["refused"]
    assert message.startswith("short_term_memory was used outside any action")
