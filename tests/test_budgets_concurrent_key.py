"""A key's chats running at once reserve their spend before they call (per-key budgets).

Before, each chat of a key checked the spend the key had when its action started, so chats
sent together all passed before any had spent: six chats of 15 tokens at once against a
budget of 40 all went (90 tokens, more than twice the budget). Now a call counts in flight
from admission to answer (as the mean spend of the key's answered calls; the key's first
call goes alone), so the budget is crossed by at most one call, as by calls made one after
the other: here 45 tokens (three calls), the other three chats refused. Keys that Python's
``==`` takes for one (``1``, ``True``, ``1.0``) keep ledgers of their own.
"""

from __future__ import annotations

import pytest
from test_budgets_spend_kept import _run, fan_out

from flink_agents_py.api import Budget

pytestmark = pytest.mark.timeout(120)

REFUSED = "BudgetExceededError: the budget of chat model 'model' for key {key} is spent"


def test_chats_of_one_key_at_once_cross_the_budget_by_one_call_at_most(probes):
    res = _run(fan_out(Budget(max_tokens=40), delay_s=0.1), [{"key": "a", "q": 1, "n": 6}])
    assert res.errors == []
    errors = [o["error"] for o in res.outputs]
    assert errors.count(None) == 3 and probes["big"] == 3  # 45 tokens: one call past 40
    assert all(e.startswith(REFUSED.format(key="'a'")) for e in errors if e is not None)


def test_keys_python_takes_for_one_keep_budgets_of_their_own(probes):
    records = [{"key": k, "q": 1, "n": 2} for k in (1, True, 1.0, "1")]
    res = _run(fan_out(Budget(max_tokens=20), delay_s=0.05), records)
    assert res.errors == []
    by_key: dict[str, list[object]] = {}
    for o in res.outputs:
        by_key.setdefault(repr(o["key"]), []).append(o["error"])
    # each key: its first call goes alone (15 tokens), its second then fits (30 >= 20: the
    # crossing call); had two keys shared a ledger, the later ones would be refused
    assert {k: v.count(None) for k, v in by_key.items()} == {"1": 2, "True": 2, "1.0": 2, "'1'": 2}
    assert probes["big"] == 8


def test_the_process_keeps_ledgers_of_the_keys_that_called_last_only(monkeypatch):
    from flink_agents_py.api import ChatModelSetup
    from flink_agents_py.runtime import _key_spend

    monkeypatch.setattr(_key_spend, "KEY_LEDGERS", 3)
    monkeypatch.setattr(_key_spend, "_LEDGERS", type(_key_spend._LEDGERS)())
    setup = ChatModelSetup.model_construct(budget=Budget(max_tokens=5))
    busy = _key_spend.key_spend(setup, "busy")
    busy.in_flight = 1  # a call in flight: its ledger is never dropped
    for key in range(10):
        _key_spend.key_spend(setup, key)
    # the last three keys' ledgers, and the one with a call in flight beside them
    assert [k for _, k in _key_spend._LEDGERS] == ['"busy"', "7", "8", "9"]
    assert _key_spend.key_spend(setup, "busy") is busy
