"""A key's spend entry through a budgeted chat model setup: read, rolled, merged.

The primitives of ``runtime._budgets``: where a key keeps its spend (``_budget.<setup>`` in
its short-term memory, keyed state), how an entry is checked when read back (a restored,
edited or older entry: each count a finite number within 64 bits, never below 0), how a
window rolls on the wall clock, how one call's spend is merged into the entry as its
action ends, and what a provider's usage counts as.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import orjson

from ..api import Budget, BudgetStateError, ChatMessage, ChatResponse, TokenUsage

__all__ = ["ENDS", "MEMORY_PREFIX", "SPEND_CAP", "add_spend", "call_cost", "counted_usage",
           "drop_ended_spends", "estimated_usage", "merged_spend", "spend_key", "stored_spend",
           "spend_windows", "counted", "rolled", "spend_problem", "window_end"]

MEMORY_PREFIX = "_budget"
"""Short-term memory entries ``_budget.<setup>`` hold each key's spend per setup."""


SPEND_CAP = 2**62
"""The most a spend's count (tokens, cost) reaches: sums saturate here, so an entry stays a
value keyed state holds (64 bits) however much a hostile provider reports."""


def _capped(value: Any) -> Any:
    return value if value <= SPEND_CAP else type(value)(SPEND_CAP)


def call_cost(budget: Budget, setup_name: str, usage: TokenUsage | None) -> float:
    """What one call cost by ``budget``'s prices, at most ``SPEND_CAP``.

    Args:
        budget: the budget (its prices per setup).
        setup_name: the setup that answered.
        usage: the answer's usage (counted: no negative counts).

    Returns:
        The cost, in the budget's currency.
    """
    return min(budget.cost(setup_name, usage), float(SPEND_CAP))


def add_spend(state: dict[str, Any], inp: int, out: int, cost: float) -> dict[str, Any]:
    """Add one call's spend to ``state``'s totals, in place, each saturating at ``SPEND_CAP``.

    Args:
        state: a spend (``input``, ``output``, ``cost``).
        inp: the call's input tokens.
        out: its output tokens.
        cost: its cost.

    Returns:
        ``state``.
    """
    state["input"] = _capped(state["input"] + inp)
    state["output"] = _capped(state["output"] + out)
    state["cost"] = _capped(state["cost"] + cost)
    return state


def spend_key(setup_name: str, plan_path: Sequence[str] = ()) -> str:
    """The entry of a setup's spend in the key's short-term memory.

    Args:
        setup_name: the chat model setup's name.
        plan_path: the internal sub-agents the setup is declared in, from the agent down
            (``()``: the agent's own setup).

    Returns:
        The memory path: ``_budget.<setup>``, or ``_budget.<sub-agent>/<setup>`` for a
        sub-agent's setup (its spend is the key's too, across the sub-agent's calls).
    """
    return f"{MEMORY_PREFIX}.{'/'.join([*plan_path, setup_name])}"


def _number(value: Any) -> bool:  # a finite count keyed state can hold (within 64 bits)
    return not isinstance(value, bool) and isinstance(value, (int, float)) \
        and math.isfinite(value) and abs(value) < 2**63


def spend_problem(entry: Any) -> str | None:
    """What makes ``entry`` no spend a budget can read (``None``: it is one).

    Args:
        entry: a ``_budget.<setup>`` value as a key's memory holds it.

    Returns:
        The reason, as the end of a sentence (``"its input is 'ten', not a number..."``).
    """
    if not isinstance(entry, dict):
        return f"it is a {type(entry).__name__}, not a spend (a mapping of input, output, cost)"
    for field in ("input", "output", "cost"):
        value = entry.get(field, 0)
        if not _number(value):
            return f"its {field} is {value!r}, not a number keyed state holds (finite, 64-bit)"
    start = entry.get("window_start")
    if start is not None and not _number(start):
        return f"its window_start is {start!r}, not a time"
    calls = entry.get("calls", [])
    if not isinstance(calls, list) or not all(
            isinstance(c, list) and len(c) == 4 and all(_number(v) for v in c) for c in calls):
        return "its calls are not [time, input, output, cost] lists of numbers"
    return None


def stored_spend(entry: Any, setup_name: str, key: Any, path: str) -> dict[str, Any] | None:
    """A key's spend entry as a budget reads it: checked, each count at least 0.

    A negative count (an entry written by an action, or by code from before a provider's
    negative usage was counted as 0) would lower the spend, so it counts as 0.

    Args:
        entry: the value at ``path`` in the key's short-term memory (``None``: none yet).
        setup_name: the chat model setup (for the error).
        key: the key (for the error).
        path: the entry's path (for the error).

    Returns:
        The spend (``None`` when there is none).

    Raises:
        BudgetStateError: when the entry is not a spend (naming the setup, key and path).
    """
    if entry is None:
        return None
    problem = spend_problem(entry)
    if problem is not None:
        raise BudgetStateError(setup_name, key, path, problem)
    return counted(entry)


def counted(entry: dict[str, Any]) -> dict[str, Any]:
    """A readable spend entry with each count at least 0."""
    spend = dict(entry)
    for field in ("input", "output", "cost"):
        spend[field] = max(0, spend.get(field, 0))
    spend["calls"] = [[c[0], *(max(0, v) for v in c[1:])] for c in entry.get("calls", [])]
    return spend


def _tally(state: dict[str, Any]) -> tuple[float, float, float]:
    return (state.get("window_start") or 0.0, state.get("input", 0) + state.get("output", 0),
            state.get("cost", 0.0))


def merged_spend(budget: Budget, committed: Any, info: dict[str, Any]) -> dict[str, Any]:
    """The key's spend entry once one call's spend is counted in it (at its action's end).

    A per-key budget's call adds what it spent (``info["call"]``: its time, ``None``
    without a window, its input and output tokens and cost) to the spend committed when its
    action ends, not to the one it read when it started: chats of a key that run at once
    (or in a sub-agent) each count.
    An agent budget's entry keeps the subtask's latest spend (the larger one of the later
    window), read back after a restore.

    Args:
        budget: the setup's budget.
        committed: the entry as the key's memory holds it (``None``: none yet).
        info: the call's ``metadata["budget"]``.

    Returns:
        The entry's new value.
    """
    before = counted(committed) if spend_problem(committed) is None else None  # else: gone
    call = info.get("call")
    if info.get("scope") == "agent" or not isinstance(call, list) or len(call) != 4:
        spent = dict(info.get("spent") or {})  # a subtask's spend; a record of older code
        return _with_end(budget, spent if before is None else max(before, spent, key=_tally))
    now, inp, out, cost = call
    state = add_spend(rolled(budget, before, now), inp, out, cost)
    if budget.window_s is not None and state.get("window_start") is None:
        state["window_start"] = now
    if budget.sliding:
        state["calls"] = sorted([*state["calls"], list(call)])
    return _with_end(budget, state)


ENDS = "ends"
"""The field of a spend entry saying when it stops counting (wall clock, s; see ``_with_end``)."""


def _with_end(budget: Budget, state: dict[str, Any]) -> dict[str, Any]:
    """``state`` with ``ENDS``: when nothing of it counts any more (no window: never).

    A fixed window's spend counts until the window ends, a sliding window's until its newest
    call drops out; after that the entry holds nothing a budget reads (``rolled`` starts a
    fresh window), so ``drop_ended_spends`` may delete it.

    Returns:
        ``state``, changed in place.
    """
    state.pop(ENDS, None)
    if budget.window_s is None:
        return state  # a spend for ever: the key keeps it as long as it lives
    calls = state.get("calls") or []
    start: Any = max(c[0] for c in calls) if budget.sliding and calls else state.get("window_start")
    if _number(start):
        state[ENDS] = start + budget.window_s
    return state


def _clock() -> float:
    return time.time()


def spend_windows(plan: Any) -> dict[str, Budget]:
    """The windowed budgets of a plan's chat model setups, by their spend entry's path.

    The path is the one under ``_budget`` (``spend_key`` without the prefix), the
    sub-agents' setups included: what ``drop_ended_spends`` reads the window of an entry
    written before entries said when they end from.

    Args:
        plan: the root ``AgentPlan``.

    Returns:
        ``{"<setup>" or "<sub-agent>/<setup>": budget}`` for each budget with a window
        (one given as its dict form too; one that does not validate is left out).
    """
    from ..api import ResourceType  # (the api's enum; kept out of the module's hot imports)

    found: dict[str, Budget] = {}

    def walk(at: Any, path: tuple[str, ...]) -> None:
        for name, resource in at.resources.get(ResourceType.CHAT_MODEL, {}).items():
            budget = resource.descriptor.arguments.get("budget")
            if isinstance(budget, dict):
                try:
                    budget = Budget.model_validate(budget)
                except ValueError:
                    continue  # (the plan names it; the setup's build fails on it)
            if isinstance(budget, Budget) and budget.window_s is not None:
                found[spend_key(name, path).partition(".")[2]] = budget
        for name, child in at.subagents.items():
            walk(child, (*path, name))

    walk(plan, ())
    return found


def drop_ended_spends(memory: dict[str, Any], windows: dict[str, Budget] | None = None) -> None:
    """Delete the key's spend entries whose windows have ended.

    Without it a key's ``_budget.<setup>`` entry stayed in keyed state for ever, one per
    budgeted setup per key ever seen, long after its window had ended and it counted
    nothing. An entry of a budget without a window is the key's spend for ever and stays.
    One without ``ENDS`` was written by older code (or edited): its end is found from the
    budget ``windows`` gives for its path (``spend_windows``), else it stays (its window
    is not known). ``_budget`` itself goes once empty.

    Only ``memory``'s root is changed in place: a level that loses entries is replaced by a
    new one, as a commit replaces the nodes it writes (``context._memory._apply``), since the
    actions in flight share the committed nodes.

    Args:
        memory: the key's committed short-term memory.
        windows: the windowed budgets by entry path (``spend_windows``; ``None``: none).
    """
    spends = memory.get(MEMORY_PREFIX)
    if not isinstance(spends, dict):
        return
    kept = _drop_ended(spends, _clock(), windows or {}, "")
    if not kept:
        del memory[MEMORY_PREFIX]
    elif kept is not spends:
        memory[MEMORY_PREFIX] = kept


def _drop_ended(level: dict[str, Any], now: float, windows: dict[str, Budget],
                prefix: str) -> dict[str, Any]:
    """``level`` without its ended entries: itself when none ended, else a new dict."""
    out = level
    for name, entry in level.items():
        if not isinstance(entry, dict):
            continue
        path = f"{prefix}{name}"
        if "input" in entry or ENDS in entry:  # a spend (else a level of a dotted name)
            ends: Any = entry.get(ENDS)
            if ENDS not in entry and path in windows and spend_problem(entry) is None:
                ends = _with_end(windows[path], dict(entry)).get(ENDS)  # written before ENDS
            if not (_number(ends) and ends <= now):
                continue
            kept = None
        else:
            kept = _drop_ended(entry, now, windows, f"{path}.")
            if kept is entry and entry:  # (an empty level goes too)
                continue
        if out is level:
            out = dict(level)
        if kept:
            out[name] = kept
        else:
            del out[name]
    return out


def counted_usage(usage: TokenUsage | None) -> TokenUsage | None:
    """The usage a budget counts: what the provider reported, a negative count as 0.

    A provider's answer is not trusted to lower a spend: a negative token count (a broken
    or hostile provider, a gateway's rewrite) would otherwise take that much off the key's
    (or the subtask's) spend, and the budget would never be reached.

    Args:
        usage: the usage the answer reported (``None``: none).

    Returns:
        The usage with every count at least 0 (``None`` for ``None``).
    """
    if usage is None or (usage.input_tokens >= 0 and usage.output_tokens >= 0):
        return usage
    return TokenUsage(input_tokens=max(0, usage.input_tokens),
                      output_tokens=max(0, usage.output_tokens))


CHARS_PER_TOKEN = 4
"""Characters a token is counted as when a provider reports no usage (OpenAI's rule of
thumb for English text; code and other scripts take more tokens, so it undercounts)."""


def estimated_usage(messages: Sequence[ChatMessage], response: ChatResponse) -> ChatResponse:
    """``response`` with a usage estimated from the text, when its provider reported none.

    A budget counts what the provider reports; an answer without usage (a server that
    leaves it out, ``"usage": null``) would spend nothing, and the budget never be
    reached. Its tokens are estimated instead: the characters of the messages sent (their
    text and tool calls) and of the answer, ``CHARS_PER_TOKEN`` a token, rounded up, at
    least one output token. The tools' schemas are not counted, so the estimate is low.
    ``metadata["usage_estimated"]`` is ``True`` on such an answer.

    Args:
        messages: the messages the call sent.
        response: the provider's answer.

    Returns:
        ``response`` as it is when it has a usage, else a copy with the estimate.
    """
    if response.usage is not None:
        return response

    def tokens(sent: Sequence[ChatMessage]) -> int:
        chars = sum(len(m.content) + sum(len(c.name) + len(orjson.dumps(c.arguments, default=str))
                                         for c in m.tool_calls) for m in sent)
        return -(-chars // CHARS_PER_TOKEN)

    usage = TokenUsage(input_tokens=tokens(messages),
                       output_tokens=max(1, tokens([response.message])))
    return response.model_copy(update={"usage": usage, "metadata": {
        **response.metadata, "usage_estimated": True}})


def rolled(budget: Budget, spent: dict[str, Any] | None, now: float) -> dict[str, Any]:
    """The spend of the window ``now`` falls in (a fresh one when the last has ended).

    A window (or a sliding window's call) starting more than one window after ``now`` is
    no current window: written where the clock was ahead (a restore on a machine whose
    clock is behind), it would hold the key for the whole skew; it counts as ended.

    Args:
        budget: the budget (its window).
        spent: the spend as kept (``None``: nothing yet).
        now: the wall clock, in seconds.

    Returns:
        ``input``, ``output``, ``cost``, ``window_start`` (``None``: no window started)
        and ``calls`` (a sliding window's calls, ``[time, input, output, cost]``).
    """
    state = dict(spent or {})
    calls = [list(c) for c in state.get("calls", [])]
    start = state.get("window_start")
    if budget.window_s is not None and budget.sliding:
        if not calls and (state.get("input") or state.get("output") or state.get("cost")):
            # counted under fixed windows, or none: its totals as one call, at its window's
            # start (none: now), so a switch to a sliding window does not forget them
            calls = [[start if start is not None else now, state.get("input", 0),
                      state.get("output", 0), state.get("cost", 0.0)]]
        calls = [c for c in calls if now - budget.window_s < c[0] <= now + budget.window_s]
        start = calls[0][0] if calls else None
    elif budget.window_s is not None and start is not None and not (
            start - budget.window_s <= now < start + budget.window_s):
        start, calls, state = None, [], {}  # ended, or over a window ahead (a clock behind)
    totals = ({"input": _capped(sum(c[1] for c in calls)),
               "output": _capped(sum(c[2] for c in calls)),
               "cost": _capped(sum(c[3] for c in calls))} if budget.sliding else
              {"input": state.get("input", 0), "output": state.get("output", 0),
               "cost": state.get("cost", 0.0)})
    return {**totals, "window_start": start, "calls": calls if budget.sliding else []}


def window_end(budget: Budget, state: dict[str, Any], now: float) -> float:
    """When the spend ``state`` (as ``rolled`` returns it) stops counting, in seconds.

    Returns:
        The wall-clock time: a fixed window's end, or when a sliding window's oldest call
        drops out.
    """
    assert budget.window_s is not None
    if budget.sliding and state["calls"]:  # when enough of the oldest calls drop out
        return float(state["calls"][0][0]) + budget.window_s
    start = state.get("window_start")
    return (start if start is not None else now) + budget.window_s
