"""Pydantic's bare words, said for this library: a set field of a built event, a misspelt
argument of a budget, a price or a flow control.

``event.output = ...`` gave "Instance is frozen", ``Budget(max_token=10)`` "Extra inputs are
not permitted", with no way forward. Both stay a pydantic ``ValidationError`` (a
``ValueError``), with the same error type and location.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from flink_agents_py.api import Budget, Event, FlowControl, ModelPrice, OutputEvent

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(120)


def test_setting_a_field_of_a_built_event_says_how_to_get_one_with_the_value():
    event = OutputEvent(output={"answer": 1})
    with pytest.raises(ValidationError) as info:
        event.output = {"answer": 2}  # type: ignore[misc]
    (error,) = info.value.errors()
    assert error["type"] == "frozen_instance" and error["loc"] == ("output",)
    assert error["msg"] == (
        "OutputEvent is immutable once built (events are sent, recorded and replayed as "
        "built): to change 'output', make a changed copy, event.model_copy(update={'output': "
        "...}), or build it with the value, OutputEvent(..., output=...)")
    assert event.output == {"answer": 1}
    assert event.model_copy(update={"output": 2}).output == 2


def test_an_ad_hoc_event_is_caught_as_a_value_error_too():
    event = Event(type="Scored", attributes={"score": 1})
    with pytest.raises(ValueError, match="Event is immutable once built"):
        event.attributes = {}  # type: ignore[misc]


@pytest.mark.parametrize(("build", "field", "meant"), [
    (lambda: Budget(max_token=10), "max_token", "max_tokens"),
    (lambda: FlowControl(request_per_minute=30), "request_per_minute", "requests_per_minute"),
    (lambda: ModelPrice(input_per_millon=1.0), "input_per_millon", "input_per_million"),
])
def test_a_misspelt_argument_names_the_field_it_likely_meant(build, field, meant):
    with pytest.raises(ValidationError) as info:
        build()
    (error,) = info.value.errors()
    assert error["type"] == "extra_forbidden" and error["loc"] == (field,)
    assert error["msg"] == f"Extra inputs are not permitted; did you mean {meant!r}?"


def test_other_errors_are_kept_beside_the_hint_and_a_far_name_lists_the_fields():
    with pytest.raises(ValidationError) as info:
        Budget(max_token=10, window_s=-1)
    assert [(e["type"], e["loc"]) for e in info.value.errors()] == [
        ("greater_than", ("window_s",)), ("extra_forbidden", ("max_token",))]
    with pytest.raises(ValueError, match=r"Extra inputs are not permitted \(Budget takes: "
                                         r"fallback, max_cost, "):
        Budget(zzz=1)


SCRIPT = '''
from flink_agents_py.api import Budget, OutputEvent

try:
    Budget(max_token=10)
except ValueError as e:
    print("BUDGET", " ".join(str(e).split()))
event = OutputEvent(output="draft")
try:
    event.output = "final"
except ValueError as e:
    print("EVENT", " ".join(str(e).split()))
'''


def test_a_users_script_gets_the_hints(tmp_path: Path):
    (tmp_path / "main.py").write_text(textwrap.dedent(SCRIPT))
    proc = subprocess.run([str(PYTHON), "main.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=100, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr
    budget, event = proc.stdout.strip().splitlines()
    assert "max_token Extra inputs are not permitted; did you mean 'max_tokens'?" in budget
    assert "event.model_copy(update={'output': ...})" in event
    assert "Instance is frozen" not in event


def test_setting_a_name_that_is_no_field_points_at_the_attributes():
    event = OutputEvent(output=1)
    with pytest.raises(ValidationError, match=r"OutputEvent is immutable once built and has no "
                                              r"field 'score': keep a free value in its "
                                              r"attributes, event.set_attr\('score', \.\.\.\)"):
        event.score = 3
    event.set_attr("score", 3)
    assert event.get_attr("score") == 3
