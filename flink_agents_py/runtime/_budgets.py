"""Spend budgets per key and per agent: the check before a model call and the spend after.

The key's spend through a setup with a ``Budget`` lives in its short-term memory under
``_budget.<setup>`` (keyed state: checkpointed, restored, never reset by a restart; a
sub-agent's setup under ``_budget.<sub-agent>/<setup>``, in the key's memory too, not the
call's). The action hands the spend it read to the model call's durable call; inside it the
window is rolled by the wall clock, the budget checked and its policy applied (fail, a
fallback setup, or a hold until the window ends), the model asked, and the spend after the
call returned in ``metadata["budget"]`` with the call's own (``"call"``). That result is
recorded, so a replay returns the same decision and spend without reading the clock again;
when the action ends the call's own spend is added to the key's entry as it is then
(``merged_spend``), so chats of one key running at once each count.

An agent budget (``Budget.scope="agent"``) is counted by an ``AgentSpend`` per setup per
operator instance (one subtask), shared by all its keys, against the subtask's share of the
limits (``Budget.share``). A call in flight counts as the mean spend of the calls answered
before it (the first call of a window goes alone), so calls running at once do not
overshoot the share together: a call goes when the spend so far plus that of the calls in
flight is below every limit. After each call the subtask's spend is also written to the
key's ``_budget.<setup>`` entry; after a restore the subtask's spend starts from the
largest one of the current window its restored keys recorded (``spend_adopter``, which a
host calls for every restored key before the first call; in process mode, where the Flink
operator cannot list its keys, a key's reading is adopted when it calls again), and a
replayed answer counts as it is handed back (``count_replayed``). The in-process count is
lost with the process; what the keys and the recorded answers hold is not.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..api import (
    Budget,
    BudgetExceededError,
    ChatModelSetup,
    ChatResponse,
    ResourceType,
)
from ._per_object import PerObject
from ._spend import MEMORY_PREFIX, add_spend, call_cost, counted_usage, spend_key, stored_spend
from ._spend import counted as _counted
from ._spend import rolled as _rolled
from ._spend import spend_problem as _spend_problem
from ._spend import window_end as _window_end
from .context._memory import read_path
from .core._executor import IOSlot, given_up_slot, sleep_without_slot

__all__ = ["AgentSpend", "agent_spend", "budgeted_call", "count_replayed", "fallback_guard",
           "fallback_spends", "spend_adopter"]

_SAFETY_WAKE_S = 5.0
"""The longest a call waiting for an agent budget's calls in flight sleeps without looking
again (it is woken when one is answered, or when the window ends)."""

class AgentSpend:
    """What one subtask spent of an agent budget, shared by its keys (thread-safe).

    Args:
        budget: the setup's budget (``scope="agent"``).
        parallelism: the number of subtasks sharing it (each holds ``1/parallelism``).

    Attributes:
        share: this subtask's share of the limits.
        state: the spend of the current window (``input``, ``output``, ``cost``,
            ``window_start``), as a key's spend is kept.
        in_flight: calls admitted and not answered yet.
    """

    def __init__(self, budget: Budget, parallelism: int) -> None:
        self.budget = budget
        self.parallelism = max(1, parallelism)
        self.share = budget.share(self.parallelism)
        self.state: dict[str, Any] = _rolled(self.share, None, 0.0)
        self.in_flight = 0
        self._answered = 0
        self._mean = (0.0, 0.0, 0.0)  # input, output, cost of an answered call
        self._lock = threading.Lock()
        # calls waiting for the calls in flight: woken by ``settle`` and ``adopt``
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def _wake(self) -> None:
        """Wake every waiting call, to look again (called under the lock)."""
        for loop, fut in self._waiters:
            loop.call_soon_threadsafe(_resolve, fut)
        self._waiters.clear()

    def adopt(self, recorded: dict[str, Any] | None, now: float, own: bool = False) -> None:
        """Start from what a key recorded, when it is more than what is counted here.

        Args:
            recorded: the subtask spend a key's entry holds (``None``: none).
            now: the wall clock, in seconds.
            own: the ledger is the key's own (``_key_spend``): a spend recorded without a
                window (before the budget had one) counts in the current window, as the
                key's entry is read without a ledger.
        """
        if not recorded:
            return
        with self._lock:
            theirs = _rolled(self.share, recorded, now)
            mine = _rolled(self.share, self.state, now)
            if theirs.get("window_start") is None and self.share.window_s is not None \
                    and not own:
                return  # its window has ended
            if (theirs["input"] + theirs["output"], theirs["cost"]) > (
                    mine["input"] + mine["output"], mine["cost"]):
                self.state = theirs
                self._wake()  # a waiting call may find the share spent now

    def restart(self, now: float) -> None:
        """Start from nothing spent, unless calls are in flight (a key's spend was reset)."""
        with self._lock:
            if self.in_flight == 0:
                self.state = _rolled(self.share, None, now)

    def remaining(self) -> dict[str, float]:
        """What is left of the share in the current window, by limit (for metrics).

        Returns:
            ``{"tokens": ..., "cost": ...}`` for the limits set (tokens: the tightest of
            the token limits).
        """
        with self._lock:
            state = _rolled(self.share, self.state, time.time())
        b, out = self.share, {}
        inp, outp = state["input"], state["output"]
        left = [lim - used for lim, used in ((b.max_input_tokens, inp),
                                             (b.max_output_tokens, outp),
                                             (b.max_tokens, inp + outp)) if lim is not None]
        if left:
            out["tokens"] = max(0.0, float(min(left)))
        if b.max_cost is not None:
            out["cost"] = max(0.0, b.max_cost - state["cost"])
        return out

    def _projected(self, state: dict[str, Any], calls: int) -> dict[str, Any]:
        mi, mo, mc = self._mean
        return {"input": state["input"] + calls * mi, "output": state["output"] + calls * mo,
                "cost": state["cost"] + calls * mc}

    async def admit(self, clock: Callable[[], float]) -> tuple[dict[str, Any], str | None]:
        """Wait until a call fits in the share beside the calls in flight, and count it.

        Args:
            clock: the wall clock, in seconds.

        Returns:
            The window's spend before the call and ``None`` (the call is counted in
            flight: ``settle`` must follow), or the spend and the limit reached (nothing
            counted: the policy decides).
        """
        slot: IOSlot | None = None  # the I/O executor slot, given up while the call waits
        loop = asyncio.get_running_loop()
        try:
            while True:
                with self._lock:
                    now = clock()
                    state = self.state = _rolled(self.share, self.state, now)
                    reached = self.share.exceeded_by(state)
                    if reached is not None:
                        return state, reached
                    fits = self.in_flight == 0 or (
                        self._answered and self.share.exceeded_by(
                            self._projected(state, self.in_flight)) is None)
                    if fits and (slot is None or not slot.given_up):
                        self.in_flight += 1
                        return dict(state), None
                    if not fits:  # woken when a call is answered (or at the window's end)
                        fut: asyncio.Future[None] = loop.create_future()
                        self._waiters.append((loop, fut))
                        sleep = _SAFETY_WAKE_S if self.share.window_s is None else min(
                            _SAFETY_WAKE_S, max(0.001, _window_end(self.share, state, now) - now))
                if fits:  # it may go: first its slot back, then look again
                    assert slot is not None
                    await slot.take_back()
                    continue
                slot = given_up_slot(slot)  # other calls run meanwhile
                try:  # what is in flight decides (before: a look every 20 ms)
                    await asyncio.wait_for(asyncio.shield(fut), sleep)
                except asyncio.TimeoutError:
                    pass
                finally:
                    with self._lock:
                        if (loop, fut) in self._waiters:
                            self._waiters.remove((loop, fut))
        finally:
            if slot is not None and slot.given_up:
                await slot.take_back()

    def settle(self, now: float, spent: tuple[int, int, float] | None,
               counted: bool = True) -> dict[str, Any]:
        """Count what a call spent (``None``: it failed).

        Args:
            now: the wall clock, in seconds.
            spent: the call's input and output tokens and cost.
            counted: whether ``admit`` counted the call in flight.

        Returns:
            The subtask's spend after it.
        """
        with self._lock:
            if counted:
                self.in_flight -= 1
            state = _rolled(self.share, self.state, now)
            if spent is not None:
                inp, out, cost = spent
                add_spend(state, inp, out, cost)
                if self.share.window_s is not None and state.get("window_start") is None:
                    state["window_start"] = now
                n = self._answered = self._answered + 1
                mi, mo, mc = self._mean
                self._mean = (mi + (inp - mi) / n, mo + (out - mo) / n, mc + (cost - mc) / n)
            self.state = state
            self._wake()
            return dict(state)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


_LEDGERS: PerObject[AgentSpend] = PerObject()


def agent_spend(setup: ChatModelSetup, parallelism: int = 1) -> AgentSpend:
    """The ``AgentSpend`` of a setup's agent budget (made on first use, dropped with it).

    One per setup object: an operator builds its own resources, so this is one per setup
    per operator instance (per subtask), shared by all its keys.

    Args:
        setup: the chat model setup (its ``budget`` has ``scope="agent"``).
        parallelism: the number of parallel subtasks running the agent.

    Returns:
        Its ledger.
    """
    budget = setup.budget
    assert budget is not None
    return _LEDGERS.get_or_make(setup, lambda: AgentSpend(budget, parallelism))


def existing_agent_spend(setup: ChatModelSetup) -> AgentSpend | None:
    """The setup's ledger if one was made (for metrics; ``None``: none yet)."""
    return _LEDGERS.get(setup)


def count_replayed(resources: Any, model: str, outcome: Any) -> None:
    """Count a replayed chat answer's agent-budget spend in its subtask's ledger.

    An answer replayed after a failure (from keyed state or the journal, its action not
    ended, so its key's entry unwritten) passed no ledger in this process; the ledger adopts
    the subtask spend it recorded (``metadata["budget"]["spent"]``) unless its window ended.

    Args:
        resources: the execution's resources (``get`` by name, ``parallelism``).
        model: the chat model setup's name the call was made through.
        outcome: the replayed value (only a ``ChatResponse`` of an agent budget counts: its
            setup's, or an answering fallback's own, ``metadata["fallback_budget"]``).
    """
    if not isinstance(outcome, ChatResponse):
        return
    own = outcome.metadata.get("fallback_budget")  # an answering fallback's own budget
    for name, info in ((model, outcome.metadata.get("budget")),
                       (own.get("setup") if isinstance(own, dict) else None, own)):
        if not isinstance(info, dict) or info.get("scope") != "agent" \
                or not isinstance(name, str):
            continue
        try:
            setup = resources.get(name, ResourceType.CHAT_MODEL)
        except Exception:  # noqa: BLE001 - the setup is gone (an upgrade): nothing to count
            continue
        budget, spent = getattr(setup, "budget", None), info.get("spent", {})
        if isinstance(setup, ChatModelSetup) and getattr(budget, "scope", None) == "agent" \
                and _spend_problem(spent) is None:
            agent_spend(setup, resources.parallelism).adopt(_counted(spent), time.time())


def spend_adopter(core: Any, now: float | None = None
                  ) -> Callable[[dict[str, Any]], int] | None:
    """After a restore: what hands each key's recorded agent-budget spend to its subtask.

    Every chat model setup of the core's plan and of its internal sub-agents declared with a
    budget of ``scope="agent"`` (its descriptor's ``budget`` argument) is built and opened,
    as its first chat would, and its ``AgentSpend`` made (no other resource is); the
    function returned reads one key's short-term memory and lets each ledger ``adopt`` the
    subtask spend the key's ``_budget.<setup>`` entry holds. A host calls it for every key
    of its restored keyed state before the first call goes out, so the subtask starts from
    the largest spend of the current window any of its keys recorded, not only from those
    of keys that call again (a restored subtask would otherwise spend its share anew on
    keys that never spent before). An entry that cannot be read is skipped: the key's next
    chat through the setup reports it (``BudgetStateError``).

    Args:
        core: the host's ``AgentCore`` (its plan, its resources by sub-agent path
            (``resources_at``), the subtasks sharing each agent budget
            (``resources.parallelism``)).
        now: the wall clock at the restore, in seconds (default: now); a window that has
            ended by then is not carried over.

    Returns:
        The function (memory -> the number of entries adopted), or ``None`` when no setup
        has an agent budget (a host then need not read any key's memory).
    """
    ledgers: list[tuple[str, AgentSpend]] = []
    parallelism = core.resources.parallelism
    at_restore = time.time() if now is None else now

    def visit(at: Any, path: tuple[str, ...]) -> None:
        resources = core.resources_at(path)
        for name, rp in at.resources.get(ResourceType.CHAT_MODEL, {}).items():
            declared = rp.descriptor.arguments.get("budget")
            scope = declared.get("scope") if isinstance(declared, dict) else getattr(
                declared, "scope", None)
            if scope != "agent":  # nothing is built (or opened) for the other setups
                continue
            try:
                setup = resources.get(name, ResourceType.CHAT_MODEL)
            except Exception:  # noqa: BLE001 - its first chat reports it
                continue
            budget = getattr(setup, "budget", None)
            if isinstance(setup, ChatModelSetup) and budget is not None \
                    and budget.scope == "agent":
                ledgers.append((spend_key(name, path), agent_spend(setup, parallelism)))
        for sub, child in at.subagents.items():
            visit(child, (*path, sub))

    visit(core.plan, ())
    if not ledgers:
        return None

    def adopt(memory: dict[str, Any]) -> int:
        if MEMORY_PREFIX not in memory:
            return 0
        adopted = 0
        for entry_path, ledger in ledgers:
            entry = read_path(memory, entry_path)
            if entry is not None and _spend_problem(entry) is None:
                ledger.adopt(_counted(entry), at_restore)
                adopted += 1
        return adopted

    return adopt


async def _agent_call(
    setup: ChatModelSetup, key: Any, spent: dict[str, Any] | None, ledger: AgentSpend,
    call: Callable[[ChatModelSetup], Awaitable[ChatResponse]],
    resolve: Callable[[str], ChatModelSetup], clock: Callable[[], float],
    scope: str = "agent",
) -> ChatResponse:
    """``budgeted_call`` through a ledger: the subtask's (an agent budget) or the key's."""
    budget = ledger.share
    if spent is None and scope == "key":  # none, or an action deleted it: the key starts
        ledger.restart(clock())  # afresh (unless calls are in flight)
    ledger.adopt(spent, clock(), own=scope == "key")
    state, reached = await ledger.admit(clock)
    first, decision, asked, held_s = reached, "within", setup, 0.0
    while reached is not None:
        if budget.on_exceeded == "fail":
            raise BudgetExceededError(setup.resource_name, key, reached, scope=scope)
        if budget.on_exceeded == "fallback":
            assert budget.fallback is not None
            decision, asked = "fallback", resolve(budget.fallback)
            break
        now = clock()  # hold until the window ends
        wait = max(0.0, _window_end(budget, state, now) - now)
        await sleep_without_slot(wait + 0.001)
        held_s += wait
        decision = "held"
        state, reached = await ledger.admit(clock)
    counted, admitted = reached is None, clock()
    try:
        response = await call(asked)
    except BaseException:
        ledger.settle(clock(), None, counted)
        raise
    answered = str(response.metadata.get("model_setup") or asked.resource_name)
    usage = counted_usage(response.usage)
    inp = usage.input_tokens if usage else 0
    out = usage.output_tokens if usage else 0
    cost = call_cost(budget, answered, usage)
    after = ledger.settle(clock(), (inp, out, cost), counted)
    info: dict[str, Any] = {"decision": decision, "scope": "agent", "spent": after,
                            "cost": cost}
    if scope == "key":  # the call's own spend, added to the key's entry as its action ends
        del info["scope"]
        info["call"] = [admitted if budget.window_s is not None else None, inp, out, cost]
    if first is not None:
        info["reached"] = first
    if held_s:
        info["held_s"] = held_s
    metadata = {**response.metadata, "budget": info}
    if asked is not setup:
        metadata.setdefault("model_setup", asked.resource_name)
    return response.model_copy(update={"metadata": metadata})


def fallback_spends(setup: ChatModelSetup, resolve: Callable[[str], ChatModelSetup],
                    memory: dict[str, Any], key: Any,
                    entry_of: Callable[[str], str] = spend_key,
                    ) -> dict[str, dict[str, Any] | None] | None:
    """The key's spend through each setup a chat may fall back to that has its own budget.

    A setup's fallbacks (``fallbacks``, its budget's ``fallback``, and theirs in turn) are
    resolved; each with a ``budget`` gets the key's entry read, as the chat's own setup's is.

    Args:
        setup: the chat's setup.
        resolve: the ``CHAT_MODEL`` setup of a name (one that fails is skipped here: the
            call reports it when it gets there).
        memory: the key's short-term memory.
        key: the key (for errors).
        entry_of: the memory entry of a setup's spend, by its name (``spend_key`` of the
            plan declaring it: a sub-agent's own setup's entries are under its path, one
            it names from an ancestor shares the ancestor's entry).

    Returns:
        The spends by setup name (``None``: nothing yet), or ``None`` when no fallback has
        a budget (the model call's arguments then stay as before).

    Raises:
        BudgetStateError: when an entry is not a spend.
    """
    seen, todo, spends = {setup.resource_name}, [setup], {}
    while todo:
        at = todo.pop()
        names = [*at.fallbacks, *([at.budget.fallback] if at.budget is not None
                                  and at.budget.fallback else [])]
        for name in names:
            if name in seen:
                continue
            seen.add(name)
            try:
                found = resolve(name)
            except Exception:  # noqa: BLE001 - reported by the call, if it gets there
                continue
            todo.append(found)
            if found.budget is not None:
                entry = entry_of(name)
                spends[name] = stored_spend(read_path(memory, entry), name, key, entry)
    return spends or None


def fallback_guard(own: str, key: Any, spends: dict[str, dict[str, Any] | None],
                   resolve: Callable[[str], ChatModelSetup], parallelism: int = 1
                   ) -> Callable[[ChatModelSetup, Callable[[ChatModelSetup],
                                                           Awaitable[ChatResponse]]],
                                 Awaitable[ChatResponse]]:
    """What asks a fallback setup through its own budget (``model_calls.call_model``'s guard).

    A fallback reached by a chat of another setup (one of its ``fallbacks``, or its budget's
    ``fallback``) is checked against its own budget as a chat naming it would be, and its
    spend counted in the key's (or, for ``scope="agent"``, the subtask's) entry for it: a
    budget on a fallback is not bypassed by reaching it as a fallback. Its decision and spend
    are in the answer's ``metadata["fallback_budget"]`` (``setup`` names it).

    Args:
        own: the chat's setup name (its budget is checked by the chat itself).
        key: the chat's key.
        spends: the key's spend through each budgeted fallback (``fallback_spends``).
        resolve: the ``CHAT_MODEL`` setup of a name (the fallback's budget's own fallback).
        parallelism: the subtasks sharing an agent budget.

    Returns:
        ``guard(setup, ask)``: ``ask(setup)``, through the setup's budget when it has one.
    """
    async def guard(current: ChatModelSetup,
                    ask: Callable[[ChatModelSetup], Awaitable[ChatResponse]]) -> ChatResponse:
        name = current.resource_name
        if name == own or current.budget is None or name not in spends:
            return await ask(current)
        response = await budgeted_call(current, key, spends[name], ask, resolve,
                                       parallelism=parallelism)
        metadata = dict(response.metadata)
        metadata["fallback_budget"] = {"setup": name, **metadata.pop("budget")}
        return response.model_copy(update={"metadata": metadata})

    return guard


async def budgeted_call(
    setup: ChatModelSetup, key: Any, spent: dict[str, Any] | None,
    call: Callable[[ChatModelSetup], Awaitable[ChatResponse]],
    resolve: Callable[[str], ChatModelSetup],
    clock: Callable[[], float] = time.time, parallelism: int = 1,
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
        parallelism: the subtasks sharing an agent budget (``scope="agent"``).

    Returns:
        The response, with ``metadata["budget"]``: the decision (``"within"``,
        ``"fallback"``, ``"held"``), the limit reached if any, the call's ``cost`` and the
        spend after the call (the key's, or the subtask's for an agent budget).

    Raises:
        BudgetExceededError: under ``on_exceeded="fail"`` when the budget is spent.
    """
    budget = setup.budget
    assert budget is not None
    if budget.scope == "agent":
        return await _agent_call(setup, key, spent, agent_spend(setup, parallelism), call,
                                 resolve, clock)
    if not budget.sliding:  # chats of the key at once reserve before they call
        from ._key_spend import key_spend

        return await _agent_call(setup, key, spent, key_spend(setup, key), call, resolve,
                                 clock, scope="key")
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
                await sleep_without_slot(wait + 0.001)  # its slot runs other calls
                held_s += wait
                now = clock()
                state = _rolled(budget, state, now)
                reached = budget.exceeded_by(state)
            decision = "held"
    response = await call(asked)
    answered = str(response.metadata.get("model_setup") or asked.resource_name)
    usage = counted_usage(response.usage)
    inp = usage.input_tokens if usage else 0
    out = usage.output_tokens if usage else 0
    cost = call_cost(budget, answered, usage)
    after = add_spend(dict(state), inp, out, cost)
    if budget.window_s is not None and after.get("window_start") is None:
        after["window_start"] = now  # (no window: no clock reading kept)
    if budget.sliding:
        after["calls"] = [*state["calls"], [now, inp, out, cost]]
    info: dict[str, Any] = {"decision": decision, "spent": after, "cost": cost,
                            "call": [now if budget.window_s is not None else None, inp, out,
                                     cost]}  # (no window: no clock reading kept)
    if first is not None:
        info["reached"] = first
    if held_s:
        info["held_s"] = held_s
    metadata = {**response.metadata, "budget": info}
    if asked is not setup:  # the budget's fallback answered: say which setup did
        metadata.setdefault("model_setup", asked.resource_name)
    return response.model_copy(update={"metadata": metadata})
