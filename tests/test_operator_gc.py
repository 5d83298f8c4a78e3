"""The operator's process-wide GC settings: held while it runs, given back when it closes.

``AgentOperator.open`` freezes the heap it finds (``gc.freeze``) and raises CPython's young
generation threshold, because in thread mode the TaskManager's one interpreter would
otherwise traverse every long-lived module object again on each full collection. A user's
other code in the same interpreter relies on both being undone when the last operator of the
interpreter closes, and on garbage made meanwhile still being collected.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

pytest.importorskip("pyflink")

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action  # noqa: E402
from flink_agents_py.plan import AgentPlan  # noqa: E402


class Echo(Agent):
    @action(InputEvent)
    @staticmethod
    def echo(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output=event.input))


class _State:
    def __init__(self) -> None:
        self.data: dict[Any, Any] = {}


class _Context:
    """The runtime context ``open`` asks for its keyed state handles (none used here)."""

    def get_state(self, descriptor: Any) -> _State:
        return _State()

    def get_map_state(self, descriptor: Any) -> _State:
        return _State()

    def get_index_of_this_subtask(self) -> int:
        return 0

    def get_attempt_number(self) -> int:
        return 0


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def _operator() -> Any:
    from flink_agents_py.flink import AgentOperator

    return AgentOperator(AgentPlan.from_agent(Echo()), metrics=False)


def test_gc_settings_are_held_while_an_operator_runs_and_restored_after_the_last_closes():
    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()
    assert frozen == 0, "another test left the heap frozen"
    first, second = _operator(), _operator()
    first.open(_Context())
    try:
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold()[0] >= 10_000
        assert gc.get_threshold()[1:] == threshold[1:]
        second.open(_Context())
        first.close()
        # the other operator of this interpreter still runs: its settings stay
        assert gc.get_freeze_count() > 0 and gc.get_threshold()[0] >= 10_000
        # cyclic garbage made while frozen is still collected
        ref = weakref.ref(_Cycle())
        gc.collect()
        assert ref() is None
    finally:
        first.close()  # twice: a no-op
        second.close()
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == threshold


def test_a_threshold_changed_by_someone_else_meanwhile_is_left_alone():
    threshold = gc.get_threshold()
    op = _operator()
    op.open(_Context())
    try:
        gc.set_threshold(1234, *threshold[1:])  # the user's own choice, after open
    finally:
        op.close()
    try:
        assert gc.get_threshold()[0] == 1234
        assert gc.get_freeze_count() == 0
    finally:
        gc.set_threshold(*threshold)
