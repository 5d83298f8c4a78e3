"""Spend budgets per key: the check before a model call and the spend after it.

The key's spend through a setup with a ``Budget`` lives in its short-term memory under
``_budget.<setup>`` (keyed state: checkpointed, restored, never reset by a restart). The
action hands the spend it read to the model call's durable call; inside it the window is
rolled by the wall clock, the budget checked and its policy applied (fail, a fallback setup,
or a hold until the window ends), the model asked, and the spend after the call returned in
``metadata["budget"]``. That result is recorded, so a replay returns the same decision and
spend without reading the clock again; the action then writes the spend back to memory.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..api import Budget, BudgetExceededError, ChatModelSetup, ChatResponse

__all__ = ["MEMORY_PREFIX", "budgeted_call", "spend_key"]

MEMORY_PREFIX = "_budget"
"""Short-term memory entries ``_budget.<setup>`` hold each key's spend per setup."""


def spend_key(setup_name: str) -> str:
    """The short-term memory entry of a setup's spend.

    Args:
        setup_name: the chat model setup's name.

    Returns:
        The memory path.
    """
    return f"{MEMORY_PREFIX}.{setup_name}"


def _rolled(budget: Budget, spent: dict[str, Any] | None, now: float) -> dict[str, Any]:
    """The spend of the window ``now`` falls in (a fresh one when the last has ended)."""
    state = dict(spent or {})
    calls = [list(c) for c in state.get("calls", [])]
    start = state.get("window_start")
    if budget.window_s is not None and budget.sliding:
        calls = [c for c in calls if c[0] > now - budget.window_s]
        start = calls[0][0] if calls else None
    elif budget.window_s is not None and start is not None and now >= start + budget.window_s:
        start, calls = None, []
        state = {}
    totals = ({"input": sum(c[1] for c in calls), "output": sum(c[2] for c in calls),
               "cost": sum(c[3] for c in calls)} if budget.sliding else
              {"input": state.get("input", 0), "output": state.get("output", 0),
               "cost": state.get("cost", 0.0)})
    return {**totals, "window_start": start, "calls": calls if budget.sliding else []}


def _window_end(budget: Budget, state: dict[str, Any], now: float) -> float:
    assert budget.window_s is not None
    if budget.sliding and state["calls"]:  # when enough of the oldest calls drop out
        return float(state["calls"][0][0]) + budget.window_s
    start = state.get("window_start")
    return (start if start is not None else now) + budget.window_s


async def budgeted_call(
    setup: ChatModelSetup, key: Any, spent: dict[str, Any] | None,
    call: Callable[[ChatModelSetup], Awaitable[ChatResponse]],
    resolve: Callable[[str], ChatModelSetup],
    clock: Callable[[], float] = time.time,
) -> ChatResponse:
    """Check the key's budget, apply its policy, call, and count what the call spent.

    Runs inside the model call's durable call.

    Args:
        setup: the chat's setup (its ``budget`` is set).
        key: the chat's key (for the error's message).
        spent: the key's spend as the action read it from memory (``None``: nothing yet).
        call: asks a setup (with its fallbacks and error policy).
        resolve: the ``CHAT_MODEL`` setup of a name.
        clock: the wall clock, in seconds (injected by tests).

    Returns:
        The response, with ``metadata["budget"]``: the decision (``"within"``,
        ``"fallback"``, ``"held"``), the limit reached if any, and the spend after the call.

    Raises:
        BudgetExceededError: under ``on_exceeded="fail"`` when the budget is spent.
    """
    budget = setup.budget
    assert budget is not None
    now = clock()
    state = _rolled(budget, spent, now)
    reached = first = budget.exceeded_by(state)
    decision, asked = "within", setup
    held_s = 0.0
    if reached is not None:
        if budget.on_exceeded == "fail":
            raise BudgetExceededError(setup.resource_name, key, reached)
        if budget.on_exceeded == "fallback":
            assert budget.fallback is not None
            decision, asked = "fallback", resolve(budget.fallback)
        else:  # hold the key's run until the window ends
            while reached is not None:
                wait = max(0.0, _window_end(budget, state, now) - now)
                await asyncio.sleep(wait + 0.001)
                held_s += wait
                now = clock()
                state = _rolled(budget, state, now)
                reached = budget.exceeded_by(state)
            decision = "held"
    response = await call(asked)
    answered = str(response.metadata.get("model_setup") or asked.resource_name)
    usage = response.usage
    inp = usage.input_tokens if usage else 0
    out = usage.output_tokens if usage else 0
    cost = budget.cost(answered, usage)
    after = dict(state)
    after["input"] = state["input"] + inp
    after["output"] = state["output"] + out
    after["cost"] = state["cost"] + cost
    if budget.window_s is not None and after.get("window_start") is None:
        after["window_start"] = now  # (no window: no clock reading kept)
    if budget.sliding:
        after["calls"] = [*state["calls"], [now, inp, out, cost]]
    info: dict[str, Any] = {"decision": decision, "spent": after}
    if first is not None:
        info["reached"] = first
    if held_s:
        info["held_s"] = held_s
    metadata = {**response.metadata, "budget": info}
    if asked is not setup:  # the budget's fallback answered: say which setup did
        metadata.setdefault("model_setup", asked.resource_name)
    return response.model_copy(update={"metadata": metadata})
