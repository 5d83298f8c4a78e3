"""An outside event's correlation id is the sender's: its error message shows it clipped.

Before: an event whose correlation id was 400,000 characters (a producer putting a document
where the id goes) reached the error output with the whole id in its message, and the
runtime's WARNING log line carried it too, per event. Now the message shows the id as a key
is shown (cut at 200 characters, its length said), and the record's ``input`` keeps the
event whole: nothing is lost.
"""

from __future__ import annotations

import pytest
from support import waits_agents as wa

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.local import AdvanceTime

pytestmark = pytest.mark.timeout(120)

HUGE = "go-" + "x" * 400_000


@pytest.mark.parametrize(
    ("events", "says"),
    [
        # delivered while the run waits for go-a: held for a wait to open, none does
        ([{"key": "a", "correlation_id": HUGE, "payload": 1}], "the run ended without waiting"),
        # after the run ended
        ([AdvanceTime(61), {"key": "a", "correlation_id": HUGE}], "no run of key 'a'"),
        # a whole key of that size too
        ([{"key": "k" * 400_000, "correlation_id": HUGE}], "no run of key 'kkk"),
    ],
)
def test_an_events_huge_correlation_id_is_clipped_in_its_error_and_kept_in_its_input(events, says):
    result = (
        AgentsExecutionEnvironment.local()
        .from_list([{"key": "a", "timeout_s": 60}])
        .connect(events)
        .apply(wa.Approver())
        .run()
    )
    [err] = [e for e in result.errors if e.action == "<outside>"]
    assert err.error_type == "UnmatchedEventError" and says in err.message
    assert len(err.message) < 2_000, len(err.message)
    assert f"'go-{'x' * 100}" in err.message and "(400,005 chars)" in err.message
    assert err.input["correlation_id"] == HUGE  # the event itself is kept whole
