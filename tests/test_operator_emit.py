"""What ``process_element`` gives Flink for a record: its outputs in order, then its errors.

The usual record (outputs, no error, no failpoint) is handed on without ``_emit``'s generator
(issue 31, part 4: the echo record's cost); a record with error records, or an operator with
a failpoint, still goes through it. Both must give Flink the same items in the same order.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pyflink")

from test_operator_costs import harness  # noqa: E402,F401 - the fixture

from flink_agents_py.api import Agent, InputEvent, OutputEvent, RunnerContext, action  # noqa: E402
from flink_agents_py.flink import ERROR_TAG  # noqa: E402


class Outputs(Agent):
    """``n`` outputs per record; a record with ``fail`` sends them, then raises."""

    @action(InputEvent)
    @staticmethod
    def send(event: InputEvent, ctx: RunnerContext) -> None:
        for i in range(event.input["n"]):
            ctx.send_event(OutputEvent(output={"key": ctx.key, "i": i}))
        if event.input.get("fail"):
            raise ValueError("failed after its outputs")


def test_outputs_come_in_order_and_none_for_a_record_without_any(harness):  # noqa: F811
    h = harness(Outputs())
    h.feed("a", {"n": 3})
    h.feed("b", {"n": 0})
    h.feed("c", {"n": 1})
    assert h.out == [
        {"key": "a", "i": 0},
        {"key": "a", "i": 1},
        {"key": "a", "i": 2},
        {"key": "c", "i": 0},
    ]


def test_a_failing_record_gives_its_error_record_and_the_next_its_outputs(harness):  # noqa: F811
    h = harness(Outputs())
    h.feed("a", {"n": 1, "fail": True})  # a failed action's events are not sent on
    h.feed("b", {"n": 1})
    assert len(h.out) == 2 and h.out[1] == {"key": "b", "i": 0}
    tag, row = h.out[0]
    assert tag == ERROR_TAG and (row["key"], row["action"], row["error_type"]) == (
        "a",
        "send",
        "ValueError",
    )


def test_a_failpoint_still_sees_the_outputs_emitted(harness):  # noqa: F811
    seen: list[tuple[str, Any]] = []

    def failpoint(site: str, key: Any, info: dict[str, Any]) -> None:
        if site == "outputs_emitted":
            seen.append((site, list(info["outputs"])))

    h = harness(Outputs(), failpoint=failpoint)
    h.feed("a", {"n": 2})
    h.feed("b", {"n": 0})
    assert h.out == [{"key": "a", "i": 0}, {"key": "a", "i": 1}]
    assert seen == [("outputs_emitted", [{"key": "a", "i": 0}, {"key": "a", "i": 1}])]


def test_a_usual_record_needs_no_emit_generator(harness, monkeypatch):  # noqa: F811
    from flink_agents_py.flink import AgentOperator

    made: list[int] = []
    real = AgentOperator._emit

    def counted(self: AgentOperator, res: Any) -> Any:
        made.append(1)
        return real(self, res)

    monkeypatch.setattr(AgentOperator, "_emit", counted)
    h = harness(Outputs())
    for n in range(3):
        h.feed(f"k{n}", {"n": n})
    assert len(h.out) == 3 and made == []
    h.feed("x", {"n": 1, "fail": True})  # error records: through ``_emit``
    assert made == [1] and isinstance(h.out[-1], tuple)
