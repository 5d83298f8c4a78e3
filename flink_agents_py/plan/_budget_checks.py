"""Plan-build checks of a chat model setup's budget prices."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["check_budget_prices"]


def check_budget_prices(name: str, arguments: Mapping[str, Any], setups: Mapping[str, Any],
                        problems: list[str]) -> None:
    """Add a problem when a cost budget cannot count its own setup's calls.

    A ``max_cost`` counts each call by the price of the setup that answered, looked up by
    name in ``prices``: with no price for the budget's own setup (``prices`` left out, or
    keyed by a misspelt name) every call costs 0 and the limit never runs out, silently. A
    price must name a declared chat model setup; the budget's fallback may go unpriced (a
    free model).

    Args:
        name: the chat model setup's resource name.
        arguments: its descriptor's arguments (``budget`` a ``Budget`` or its dict).
        setups: the plan's chat model setups, by name.
        problems: where the problems go.
    """
    budget = arguments.get("budget")
    if isinstance(budget, Mapping):
        max_cost, prices = budget.get("max_cost"), budget.get("prices")
    else:
        max_cost, prices = getattr(budget, "max_cost", None), getattr(budget, "prices", None)
    if max_cost is None:
        return
    priced = [str(p) for p in prices] if isinstance(prices, Mapping) else []
    for other in priced:
        if other not in setups:
            problems.append(
                f"chat_model resource {name!r}: its budget prices {other!r}, which is not a "
                f"declared chat_model resource (declared: {', '.join(sorted(setups))})")
    if name not in priced:
        problems.append(
            f"chat_model resource {name!r} has a budget with max_cost but no price for "
            f"{name!r} in its prices (priced: {', '.join(map(repr, priced)) or 'none'}): "
            f"its calls would cost nothing and the limit never run out; add "
            f"prices={{{name!r}: ModelPrice(input_per_million=..., output_per_million=...)}}")
