"""Spend budgets of a chat model setup: tokens and cost per key or per agent, over a window.

A ``ChatModelSetup`` with a ``budget`` counts what its model calls spend for each key (input
and output tokens as the provider reports them, and their cost by the price table given),
in the key's keyed state, so a restart from a checkpoint does not reset it; or, with
``scope="agent"``, for all keys of the agent together, each of the job's parallel subtasks
holding an equal share of the limits. Before each model
call the runtime checks the key's spend against the budget; when it is spent, the budget's
policy decides (``docs/how-to/budgets.md``). The decision is recorded with the model call (a
durable call), so a replay makes the same decision.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from ._errors import AgentsError, shown_key
from ._field_hints import NamesNearestField
from ._messages import TokenUsage

__all__ = ["Budget", "BudgetExceededError", "BudgetStateError", "ModelPrice"]


MAX_PRICE = 1e12
"""The highest price per million tokens a ``ModelPrice`` takes: with counts bounded by
``TokenUsage`` (2**53) every call's cost stays a finite number keyed state can hold."""

MAX_WINDOW_S = 1e9
"""The longest ``Budget.window_s``, in seconds (about 31 years; ``wait_for`` takes as much)."""


class ModelPrice(NamesNearestField):
    """What a model's tokens cost, in the budget's currency per million tokens.

    Attributes:
        input_per_million: the price of a million input (prompt) tokens, finite, at most
            ``MAX_PRICE``.
        output_per_million: the price of a million output (completion) tokens, likewise.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    input_per_million: float = Field(default=0.0, ge=0, le=MAX_PRICE, allow_inf_nan=False)
    output_per_million: float = Field(default=0.0, ge=0, le=MAX_PRICE, allow_inf_nan=False)


class Budget(NamesNearestField):
    """Limits on what one key (or the whole agent) may spend through a chat model setup.

    Attributes:
        max_input_tokens: input tokens per window (``None``: no limit).
        max_output_tokens: output tokens per window.
        max_tokens: input + output tokens per window.
        max_cost: cost per window, by ``prices``.
        prices: the price of each chat model setup's tokens, by setup name (the setup that
            answered: a fallback's own price applies to its calls); a setup not listed
            costs nothing.
        window_s: the window's length in seconds (``None``: one window for ever; finite,
            at most ``MAX_WINDOW_S``, so a held key is held for a time that ends).
        sliding: ``False``: fixed windows, each starting with the first call after the
            previous one ended; ``True``: a sliding window, the calls of the last
            ``window_s`` seconds count.
        on_exceeded: what a model call does when the key's budget is spent: ``"fail"``
            fails the chat with ``BudgetExceededError`` (the action that asked gets
            ``ChatResponseEvent.error`` and decides); ``"fallback"`` asks the ``fallback``
            setup instead (a cheaper model; its spend counts too); ``"hold"`` holds the
            key's run until the window ends (the key's later records wait; other keys go
            on), then calls.
        fallback: the ``CHAT_MODEL`` setup ``"fallback"`` switches to.
        scope: ``"key"``: each key has the limits; ``"agent"``: all keys of the agent
            share them. At parallelism *n* each subtask holds ``1/n`` of every limit (its
            share), for the keys it runs: a subtask whose share is spent applies the policy
            even when another's is not (no rebalancing; ``docs/how-to/budgets.md``). Fixed
            windows only (``sliding=False``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    max_input_tokens: int | None = Field(default=None, ge=0)
    max_output_tokens: int | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=None, ge=0)
    max_cost: float | None = Field(default=None, ge=0)
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    window_s: float | None = Field(default=None, gt=0, le=MAX_WINDOW_S, allow_inf_nan=False)
    sliding: bool = False
    on_exceeded: Literal["fail", "fallback", "hold"] = "fail"
    fallback: str | None = None
    scope: Literal["key", "agent"] = "key"

    @model_validator(mode="after")
    def _consistent(self) -> Budget:
        if self.on_exceeded == "fallback" and not self.fallback:
            raise ValueError("budget: on_exceeded='fallback' needs fallback=<chat model setup>")
        if self.on_exceeded == "hold" and self.window_s is None:
            raise ValueError("budget: on_exceeded='hold' needs window_s (a window that ends)")
        if self.on_exceeded == "hold":
            for field in ("max_input_tokens", "max_output_tokens", "max_tokens", "max_cost"):
                if getattr(self, field) == 0:  # spent before any call, in every window
                    raise ValueError(
                        f"budget: {field}=0 with on_exceeded='hold' would hold every chat "
                        "for ever (a limit of 0 is spent in each new window before any "
                        "call); use on_exceeded='fail' or 'fallback', or a positive limit")
        if self.scope == "agent" and self.sliding:
            raise ValueError("budget: scope='agent' takes fixed windows (sliding=False)")
        return self

    def share(self, parallelism: int) -> Budget:
        """One subtask's share of an agent budget: each limit divided by ``parallelism``.

        Args:
            parallelism: the number of parallel subtasks running the agent (1: the whole).

        Returns:
            The budget with every limit divided (the policy, prices and window kept).
        """
        n = max(1, parallelism)
        if n == 1:
            return self

        def part(limit: float | None) -> float | None:
            return None if limit is None else limit / n

        return self.model_copy(update={
            "max_input_tokens": part(self.max_input_tokens),
            "max_output_tokens": part(self.max_output_tokens),
            "max_tokens": part(self.max_tokens), "max_cost": part(self.max_cost)})

    def cost(self, setup: str, usage: TokenUsage | None) -> float:
        """The cost of one call's ``usage`` through ``setup`` by the price table.

        Args:
            setup: the chat model setup that answered.
            usage: the tokens it reported (``None``: nothing reported, nothing spent).

        Returns:
            The cost.
        """
        price = self.prices.get(setup)
        if price is None or usage is None:
            return 0.0
        return (usage.input_tokens * price.input_per_million
                + usage.output_tokens * price.output_per_million) / 1e6

    def exceeded_by(self, spent: dict[str, Any]) -> str | None:
        """Which limit ``spent`` has reached, if any.

        Args:
            spent: ``{"input": tokens, "output": tokens, "cost": cost}`` of the window.

        Returns:
            The limit reached, as a sentence (``None``: none is).
        """
        inp, out, cost = spent.get("input", 0), spent.get("output", 0), spent.get("cost", 0.0)
        checks = [("input tokens", inp, self.max_input_tokens),
                  ("output tokens", out, self.max_output_tokens),
                  ("tokens", inp + out, self.max_tokens), ("cost", cost, self.max_cost)]
        for what, value, limit in checks:
            if limit is not None and value >= limit:
                return f"{what} {value:g} of {limit:g}"
        return None


class BudgetExceededError(AgentsError):
    """A chat's key has spent its budget (raised under ``on_exceeded="fail"``).

    Args:
        setup: the chat model setup whose budget is spent.
        key: the key that spent it (for an agent budget: the key whose chat was refused).
        reached: which limit was reached (``"tokens 1200 of 1000"``).
        scope: the budget's scope: ``"key"`` or ``"agent"`` (then ``reached`` is of the
            subtask's share).
    """

    def __init__(self, setup: str, key: Any, reached: str, scope: str = "key") -> None:
        self.setup = setup
        self.key = key
        self.reached = reached
        self.scope = scope
        whose = (f"for key {shown_key(key)}" if scope == "key"
                 else f"of the agent (this subtask's share; refused for key {shown_key(key)})")
        super().__init__(f"the budget of chat model {setup!r} {whose} is spent: {reached}")

    def __reduce__(self) -> tuple[Any, ...]:  # picklable, like the other errors
        return (type(self), (self.setup, self.key, self.reached, self.scope))


class BudgetStateError(AgentsError):
    """A key's spend entry in short-term memory is not a spend the budget can read.

    The entry (``_budget.<setup>``) is the runtime's; one that an action overwrote, or that
    is damaged, fails the chat (the model is not called) rather than being read as nothing.
    Delete the entry to start the key's spend from nothing, or write a spend there.

    Args:
        setup: the chat model setup whose budget it is.
        key: the key.
        path: the entry's short-term memory path.
        problem: what is wrong with it.
    """

    def __init__(self, setup: str, key: Any, path: str, problem: str) -> None:
        self.setup = setup
        self.key = key
        self.path = path
        self.problem = problem
        super().__init__(f"the spend of chat model {setup!r} for key {shown_key(key)} (short-term "
                         f"memory {path!r}) cannot be read: {problem}")

    def __reduce__(self) -> tuple[Any, ...]:  # picklable, like the other errors
        return (type(self), (self.setup, self.key, self.path, self.problem))
