"""What reads as data on a result is data, not a method (issue 32's kind).

``r.error`` on a ``SubagentResult`` used to be a bound method: always true, so
``if r.error:`` took the failure branch for every result. The same trap on the replay
safety report: ``if report.findings:`` was always true, ``assert not report.distinct``
always failed.
"""

from __future__ import annotations

import pytest

from flink_agents_py.api import (
    Agent,
    InputEvent,
    OutputEvent,
    RunnerContext,
    SubagentResult,
    action,
)
from flink_agents_py.compat import SubagentResult as CompatSubagentResult
from flink_agents_py.testing import check_replay_safety

pytestmark = pytest.mark.timeout(120)


class Echo(Agent):
    @action(InputEvent)
    @staticmethod
    def on_input(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "in": event.input}))


def test_a_results_error_is_its_message_or_none():
    failed, ok = SubagentResult.failed("remote said no"), SubagentResult.ok({"n": 1})
    assert failed.error == "remote said no" == failed.error_message
    assert ok.error is None and not ok.error  # a success reads as no error
    assert SubagentResult.failed(ValueError("bad")).error == "ValueError: bad"
    assert CompatSubagentResult is SubagentResult


def test_the_class_still_makes_a_failed_result_by_error():
    """``SubagentResult.error(reason)`` (the constructor's old name) keeps working."""
    assert SubagentResult.error("no") == SubagentResult.failed("no")


def test_error_is_no_field_of_the_results_json():
    failed = SubagentResult.failed("no")
    assert "error" not in failed.model_dump()
    again = SubagentResult.model_validate_json(failed.model_dump_json())
    assert again == failed and again.error == "no"


def test_a_replay_safety_reports_findings_read_as_data():
    report = check_replay_safety(Echo(), [{"key": "k", "n": 1}, {"key": "j", "n": 2}])
    assert report.ok
    assert report.findings == [] and report.distinct == [] and not report.findings
    assert len(report.every_point) == len(report.points) + len(report.elsewhere)
    assert isinstance(report.table, str) and report.table.startswith("replay safety of Echo")
    assert report.row["result"] == "ok"
