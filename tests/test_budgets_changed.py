"""A budget changed between a checkpoint and a restore, and a key's spend entry as found.

A key's spend is kept in its short-term memory (``_budget.<setup>``), so a job restored with
another ``Budget`` reads what the old one counted. Raised or lowered, the new limits apply
to the spend so far (lowered below it: the next chat is refused, naming the budget and the
key); removed, nothing is checked. Two readings were wrong: a budget switched to a sliding
window forgot the spend counted under fixed windows (an entry without per-call times
counted as nothing: the key could spend its whole budget again), and an entry that is not a
spend (written by an action, or by code from before negative usage was counted as 0) either
failed every later chat of the key with a bare ``TypeError`` naming neither the budget nor
the entry, or lowered the spend (a negative count: the budget was never reached). Now
totals without call times count as one call at the start of their window (or at the
restore), a negative count as 0, and an entry that cannot be read fails the chat with a
``BudgetStateError`` naming the setup, the key, the entry and what is wrong.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from support.harness import new_core, run_to_end
from test_budgets import budget_agent

from flink_agents_py.api import Budget
from flink_agents_py.plan import AgentPlan
from flink_agents_py.runtime import InMemoryKeyState

pytestmark = pytest.mark.timeout(120)


def _chat(budget: Budget, state: InMemoryKeyState, q: Any = 0) -> dict[str, Any]:
    """One record of key ``a`` on a new core (a restore, as far as the key's state goes)."""
    core = new_core(AgentPlan.from_agent(budget_agent(budget)))
    try:
        first = core.on_input("a", {"key": "a", "q": q}, state)
        outputs, errors = run_to_end(core, state, key="a")
        outputs[:0], errors[:0] = first.outputs, first.errors
    finally:
        core.close()
    assert errors == []
    [out] = outputs
    return out


@pytest.fixture
def spent_30(probes) -> InMemoryKeyState:
    """Key ``a`` after two chats of 15 tokens under ``Budget(max_tokens=40)``."""
    state = InMemoryKeyState()
    for q in range(2):
        assert _chat(Budget(max_tokens=40), state, q)["error"] is None
    return state


@pytest.mark.parametrize(("budget", "error"), [
    (Budget(max_tokens=20), "BudgetExceededError: the budget of chat model 'model' for key "
                            "'a' is spent: tokens 30 of 20"),
    (Budget(max_tokens=100), None),
    (Budget(max_tokens=40, window_s=3600), None),
    (Budget(max_tokens=30, window_s=3600, sliding=True),
     "BudgetExceededError: the budget of chat model 'model' for key 'a' is spent: tokens 30 "
     "of 30"),
])
def test_a_changed_budget_applies_to_the_spend_so_far(spent_30, budget, error):
    out = _chat(budget, spent_30)
    assert out["error"] == error
    if error is None:
        assert out["metadata"]["budget"]["spent"]["input"] == 30  # 20 before, 10 now


@pytest.mark.parametrize(("entry", "why"), [
    ([1, 2], "is a list, not a spend"),
    ("x", "is a str, not a spend"),
    ({"input": "ten", "output": 0}, "its input is 'ten', not a number"),
    ({"input": 10, "cost": float("inf")}, "its cost is inf, not a number"),
    ({"input": 10, "calls": [[1, 2]]}, "its calls are not"),
])
def test_a_spend_entry_that_cannot_be_read_fails_the_chat_naming_it(probes, entry, why):
    state = InMemoryKeyState()
    state.memory = {"_budget": {"model": copy.deepcopy(entry)}}
    out = _chat(Budget(max_tokens=40, window_s=60, sliding=True), state)
    assert out["error"].startswith(
        "BudgetStateError: the spend of chat model 'model' for key 'a' (short-term memory "
        "'_budget.model') cannot be read: ")
    assert why in out["error"]
    assert probes["big"] == 0  # refused before the model: not spent blind


def test_a_negative_count_in_a_spend_entry_does_not_lower_the_spend(probes):
    state = InMemoryKeyState()
    state.memory = {"_budget": {"model": {"input": -1000, "output": 35, "cost": -5.0}}}
    out = _chat(Budget(max_tokens=40), state)
    assert out["error"] is None
    assert out["metadata"]["budget"]["spent"] == {
        "input": 10, "output": 40, "cost": 0.0, "window_start": None, "calls": []}
    assert _chat(Budget(max_tokens=40), state)["error"].endswith("tokens 50 of 40")
