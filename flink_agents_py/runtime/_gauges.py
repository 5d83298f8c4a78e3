"""Live gauges of an operator's model calls: flow-control limits and agent budgets left.

Read by the metrics when they are pushed (``AgentMetrics.watch``): each chat model setup
built so far reports its connection's current concurrency limit (when flow control limits
it) and, for an agent budget (``Budget.scope="agent"``), what is left of this subtask's
share in the current window.
"""

from __future__ import annotations

from ..api import ChatModelConnection, ChatModelSetup, ResourceType
from ._budgets import existing_agent_spend
from ._flow import flow_controller
from ._resources import ResourceEnvironment

__all__ = ["live_gauges"]


def live_gauges(resources: ResourceEnvironment) -> dict[str, dict[str, int]]:
    """The gauges of the setups built in ``resources``, by metric name and setup name.

    Args:
        resources: an operator's resources.

    Returns:
        ``flow_concurrency_limit`` (calls in flight allowed, rounded down),
        ``budget_remaining_tokens`` and ``budget_remaining_cost_micros`` (millionths of the
        price table's currency), each ``{setup name: value}``.
    """
    connections = dict(resources.built(ResourceType.CHAT_MODEL_CONNECTION))
    out: dict[str, dict[str, int]] = {"flow_concurrency_limit": {},
                                      "budget_remaining_tokens": {},
                                      "budget_remaining_cost_micros": {}}
    for name, setup in resources.built(ResourceType.CHAT_MODEL):
        if not isinstance(setup, ChatModelSetup):
            continue
        conn = connections.get(setup.connection)
        if isinstance(conn, ChatModelConnection):
            limit = flow_controller(conn).limit
            if limit is not None:
                out["flow_concurrency_limit"][name] = int(limit)
        if setup.budget is not None and setup.budget.scope == "agent":
            ledger = existing_agent_spend(setup)
            if ledger is not None:
                left = ledger.remaining()
                if "tokens" in left:
                    out["budget_remaining_tokens"][name] = int(left["tokens"])
                if "cost" in left:
                    out["budget_remaining_cost_micros"][name] = round(left["cost"] * 1e6)
    return out
