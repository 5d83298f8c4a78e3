"""What a key's budget spend leaves in keyed state once it no longer counts.

A key's spend through a budgeted setup is kept in its short-term memory (``_budget.<setup>``).
Before, every entry stayed for ever: a job running for months over customer or session ids
kept one entry per budgeted setup for every key it had ever seen, long after the entry's
window had ended and it counted nothing. Now an entry whose window has ended is deleted
when the key's spends are next written (a chat's action ends), and a key left with no
memory keeps no memory state at all.

What must survive, and why: the spend of a budget without a window (``window_s=None``) is
the key's spend for ever, so it stays as long as the key's state does; and the key's next
input sequence number (the local snapshot's ``next_seq``, Flink's ``agent-queue-tail``), a
few bytes, since a journal names recorded calls by the run's position in its key's sequence
(a key starting again from 0 would be answered from an earlier run's records).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_budgets import Metered
from test_flow_control import asker

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import Budget, ResourceDescriptor
from flink_agents_py.runtime import _spend

pytestmark = pytest.mark.timeout(120)

KEYS = 200
WINDOW_S = 3600.0


def _agent() -> Any:
    return asker(
        {"conn": ResourceDescriptor(Metered, label="bounded")},
        {
            "daily": {"connection": "conn", "budget": Budget(max_tokens=10_000, window_s=WINDOW_S)},
            "sliding": {
                "connection": "conn",
                "budget": Budget(max_tokens=10_000, window_s=WINDOW_S, sliding=True),
            },
            "lifetime": {"connection": "conn", "budget": Budget(max_tokens=10_000)},
            "free": {"connection": "conn"},
        },
    )


def _keys(snapshot: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k["key"]: k for k in snapshot["keys"]}


def test_spends_of_ended_windows_leave_no_state_per_key(monkeypatch, probes):
    first = [
        {"key": f"k{i}", "q": 0, "model": m} for i in range(KEYS) for m in ("daily", "sliding")
    ]
    first += [{"key": f"l{i}", "q": 0, "model": "lifetime"} for i in range(KEYS)]
    job = AgentsExecutionEnvironment.local().from_list(first).apply(_agent())
    res = job.run()
    assert res.errors == [] and len(res.outputs) == 3 * KEYS
    keys = _keys(job.snapshot())
    for i in range(KEYS):  # within their windows: every spend still counts, and is kept
        assert set(keys[f"k{i}"]["memory"]["_budget"]) == {"daily", "sliding"}
        assert keys[f"k{i}"]["memory"]["_budget"]["daily"]["input"] == 10

    # a window later, each key chats once more through a setup without a budget's window
    ended = _spend._clock() + WINDOW_S + 1
    monkeypatch.setattr(_spend, "_clock", lambda: ended)
    second = [{"key": f"k{i}", "q": 1, "model": "lifetime"} for i in range(KEYS)]
    second += [{"key": f"l{i}", "q": 1, "model": "lifetime"} for i in range(KEYS)]
    job2 = AgentsExecutionEnvironment.local().from_list(first + second).apply(_agent())
    job2.restore(job.snapshot())
    res = job2.run()
    assert res.errors == []
    keys = _keys(job2.snapshot())
    for i in range(KEYS):
        # the ended windows' entries are gone; the lifetime spend stays (it counts for ever)
        assert keys[f"k{i}"]["memory"] == {
            "_budget": {
                "lifetime": {
                    "input": 10,
                    "output": 5,
                    "cost": 0.0,
                    "window_start": None,
                    "calls": [],
                }
            }
        }
        assert keys[f"l{i}"]["memory"]["_budget"]["lifetime"]["input"] == 20
        assert keys[f"k{i}"]["next_seq"] == 3  # the sequence goes on (see the docstring)
        assert keys[f"k{i}"]["run"] is None and keys[f"k{i}"]["queue"] == []


def test_the_entry_says_when_its_window_ends():
    fixed = Budget(max_tokens=10, window_s=60)
    info = {"call": [1000.0, 1, 2, 0.0]}
    assert _spend.merged_spend(fixed, None, info)["ends"] == 1060.0
    sliding = Budget(max_tokens=10, window_s=60, sliding=True)
    entry = _spend.merged_spend(sliding, None, info)
    assert _spend.merged_spend(sliding, entry, {"call": [1030.0, 1, 2, 0.0]})["ends"] == 1090.0
    assert "ends" not in _spend.merged_spend(Budget(max_tokens=10), None, info)
    memory = {
        "_budget": {
            "a": {"input": 1, "ends": 5.0},
            "sub/b": {"input": 1, "ends": 9.0},
            "dotted": {"name": {"input": 1, "ends": 5.0}},
            "old": {"input": 1},
        },
        "mine": 1,
    }
    _spend._clock, saved = (lambda: 6.0), _spend._clock
    try:
        _spend.drop_ended_spends(memory)
    finally:
        _spend._clock = saved
    assert memory == {
        "_budget": {"sub/b": {"input": 1, "ends": 9.0}, "old": {"input": 1}},
        "mine": 1,
    }


def _strip_ends(snapshot: dict[str, Any]) -> dict[str, Any]:
    """``snapshot`` as code before the ``ends`` field wrote it (the field taken out)."""
    for key in snapshot["keys"]:
        for entry in (key["memory"] or {}).get("_budget", {}).values():
            entry.pop("ends", None)
    return snapshot


@pytest.mark.parametrize("model", ["daily", "sliding"])
def test_an_entry_written_before_ends_existed_still_counts_and_gets_its_end(
    model, monkeypatch, probes
):
    # keyed state of the version before: the key's spend has no ``ends``; restored by today's
    # code it counts in its window, and the next spend through it says when it ends (so it
    # is dropped once its window is over)
    first = [{"key": "k", "q": 0, "model": model}]
    job = AgentsExecutionEnvironment.local().from_list(first).apply(_agent())
    assert job.run().errors == []
    old = _strip_ends(job.snapshot())
    assert "ends" not in _keys(old)["k"]["memory"]["_budget"][model]
    again = first + [{"key": "k", "q": 1, "model": model}]
    job2 = AgentsExecutionEnvironment.local().from_list(again).apply(_agent())
    job2.restore(old)
    assert job2.run().errors == []
    entry = _keys(job2.snapshot())["k"]["memory"]["_budget"][model]
    assert entry["input"] == 20  # the old spend counted, with the new call's
    assert entry["ends"] > _spend._clock()
    # a window later, a chat through another setup drops it
    ended = entry["ends"] + 1
    monkeypatch.setattr(_spend, "_clock", lambda: ended)
    later = again + [{"key": "k", "q": 2, "model": "lifetime"}]
    job3 = AgentsExecutionEnvironment.local().from_list(later).apply(_agent())
    job3.restore(job2.snapshot())
    assert job3.run().errors == []
    assert set(_keys(job3.snapshot())["k"]["memory"]["_budget"]) == {"lifetime"}


@pytest.mark.parametrize("model", ["daily", "sliding"])
def test_an_entry_written_before_ends_existed_goes_once_its_window_is_over(
    model, monkeypatch, probes
):
    # keyed state of the version before: the key's spend through ``model`` has no ``ends``,
    # and the key never chats through ``model`` again. Its window is known from the plan's
    # budget, so once it is over the entry goes when the key's spends are next written
    # (before, it stayed for ever: the leak the ``ends`` field was made to end)
    first = [{"key": "k", "q": 0, "model": model}]
    job = AgentsExecutionEnvironment.local().from_list(first).apply(_agent())
    assert job.run().errors == []
    old = _strip_ends(job.snapshot())
    within = first + [{"key": "k", "q": 1, "model": "lifetime"}]
    job2 = AgentsExecutionEnvironment.local().from_list(within).apply(_agent())
    job2.restore(json.loads(json.dumps(old)))
    assert job2.run().errors == []
    kept = _keys(job2.snapshot())["k"]["memory"]["_budget"]
    assert set(kept) == {model, "lifetime"} and kept[model]["input"] == 10  # still counting
    ended = _spend._clock() + WINDOW_S + 1
    monkeypatch.setattr(_spend, "_clock", lambda: ended)
    later = within + [{"key": "k", "q": 2, "model": "lifetime"}]
    job3 = AgentsExecutionEnvironment.local().from_list(later).apply(_agent())
    job3.restore(old)
    assert job3.run().errors == []
    assert set(_keys(job3.snapshot())["k"]["memory"]["_budget"]) == {"lifetime"}


def test_the_windows_of_a_plans_setups_name_their_entries():
    from test_budgets_spend_kept import caller

    from flink_agents_py.plan import AgentPlan

    windows = _spend.spend_windows(AgentPlan.from_agent(_agent()))
    assert set(windows) == {"daily", "sliding"}  # the lifetime budget has no window
    nested = _spend.spend_windows(AgentPlan.from_agent(caller(Budget(max_tokens=5, window_s=9))))
    assert [w.window_s for w in nested.values()] == [9]
    assert all("/" in name for name in nested)  # a sub-agent's setup: ``<sub-agent>/<setup>``
