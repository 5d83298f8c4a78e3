"""Calls waiting for an agent budget's calls in flight sleep until one is answered.

Before: a call that did not fit beside the calls in flight (the first call of each window
goes alone; then what is in flight is projected) looked again every 20 ms until they were
answered. With a slow model that is every waiting key's call, 50 times a second, for as long
as a model answer takes: 100 keys behind one 4 s answer looked about 19,000 times. Now a
waiting call sleeps until a call of the budget is answered (or its window ends), and looks
again then.
"""

from __future__ import annotations

import pytest
from test_budgets import budget_agent, run

from flink_agents_py.api import Budget
from flink_agents_py.runtime import _budgets

pytestmark = pytest.mark.timeout(120)


def test_calls_waiting_for_the_calls_in_flight_do_not_poll(monkeypatch):
    looks = [0]
    rolled = _budgets._rolled

    def counting(*args, **kwargs):
        looks[0] += 1
        return rolled(*args, **kwargs)

    monkeypatch.setattr(_budgets, "_rolled", counting)
    budget = Budget(max_tokens=10**6, scope="agent", window_s=3600)
    res = run(budget_agent(budget, delay_s=1.0), [{"key": f"k{i}", "q": i} for i in range(40)],
              max_in_flight=64)
    assert res.errors == [] and all(o["error"] is None for o in res.outputs)
    assert len(res.outputs) == 40
    # each call looks when it comes, when the first answer comes, and when it goes; settling
    # rolls once more. Before: every 20 ms for the 1 s the first call took, 39 calls: ~2,000
    assert looks[0] < 40 * 6, looks[0]


def test_a_waiting_call_still_sees_its_window_end_without_an_answer():
    # the budget is spent by the first call; the window's end (not an answer) lets the
    # held call go: it must not sleep past it
    budget = Budget(max_tokens=15, scope="agent", window_s=1.5, on_exceeded="hold")
    res = run(budget_agent(budget), [{"key": f"k{i}", "q": i} for i in range(2)], max_in_flight=8)
    assert [o["error"] for o in res.outputs] == [None, None]
    assert sorted(o["metadata"]["budget"]["decision"] for o in res.outputs) == ["held", "within"]
