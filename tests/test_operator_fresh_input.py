"""The Flink operator's per-record path: a decoded record reaches its action without a second
copy, and an operator with no Flink metric group asks nothing about metrics per record
(issue 31, part 4: the echo record's cost)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pyflink")

from test_operator_costs import harness  # noqa: E402,F401 - the fixture

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action  # noqa: E402
from flink_agents_py.observability._host import HostObservability  # noqa: E402

SEEN: list[Any] = []


class Keeps(Agent):
    @action(InputEvent)
    @staticmethod
    def keep(event: InputEvent, ctx: RunnerContext) -> None:
        SEEN.append(event.input)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": event.input["n"]}))


class Sub(dict):  # type: ignore[type-arg]
    pass


def test_a_decoded_flat_record_reaches_its_action_as_it_is(harness):  # noqa: F811
    SEEN.clear()
    h = harness(Keeps())
    record = {"n": 1, "t": 0.5}
    h.feed("a", record)
    assert h.out == [{"key": "a", "n": 1}] and SEEN[0] is record
    h.feed("b", Sub(n=2))  # a dict subclass: a plain dict, as after a replay
    h.feed("c", {"n": (1, 2)})  # a tuple: a list, as after a replay
    assert [type(s) for s in SEEN[1:]] == [dict, dict] and SEEN[2] == {"n": [1, 2]}


def test_no_metric_group_no_question_about_unflushed_metrics_per_record(harness, monkeypatch):  # noqa: F811
    asked = []
    real = HostObservability.unflushed

    def counted(self: HostObservability) -> bool:
        asked.append(1)
        return real.fget(self)  # type: ignore[misc]

    monkeypatch.setattr(HostObservability, "unflushed", property(counted))
    h = harness(Keeps())  # metrics off: no Flink metric group takes them
    for i in range(3):
        h.feed(f"k{i}", {"n": i})
    assert len(h.out) == 3 and asked == []


def test_no_call_pending_no_question_about_waiting_calls_per_record(harness, monkeypatch):  # noqa: F811
    """``executor.pending`` is a plain count; ``waiting`` is asked only when calls are pending."""
    from flink_agents_py.runtime.core._executor import IOExecutor

    asked = []
    real = IOExecutor.waiting

    def counted(self: IOExecutor) -> int:
        asked.append(1)
        return real.fget(self)  # type: ignore[no-any-return,attr-defined]

    monkeypatch.setattr(IOExecutor, "waiting", property(counted))
    h = harness(Keeps())
    out = []
    for i in range(3):  # (``h.feed`` reads ``waiting`` itself: the operator is driven here)
        h.backend.key = f"k{i}"
        out.extend(h.op.process_element({"n": i}, h.ctx))
    assert len(out) == 3 and asked == [] and h.op.core.executor.pending == 0
