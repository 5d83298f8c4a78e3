"""The fallbacks a chat model setup names are other declared setups, checked at compile.

A setup's ``fallbacks`` and its budget's ``fallback`` were looked up only when used: a typo
surfaced once the budget was spent or the provider throttled, days into the job, and every
chat of the setup failed from then on with a ``ResourceNotFoundError`` that named neither
the budget nor the setup's fallbacks; a budget whose fallback was its own setup went on
spending past the budget, silently. Like a setup's connection and tools, they are now
checked when the agent is compiled (``PlanError`` naming the setup and the name).
"""

from __future__ import annotations

import pytest
from test_budgets import Metered
from test_budgets_spend_kept import FanOut

from flink_agents_py.api import (
    Budget,
    ChatModelSetup,
    ModelPrice,
    PlanError,
    ResourceDescriptor,
    ResourceType,
)
from flink_agents_py.plan import AgentPlan


@pytest.mark.parametrize(("setup", "says"), [
    ({"budget": Budget(max_tokens=20, on_exceeded="fallback", fallback="nope")},
     "chat_model resource 'model' names 'nope' as its budget's fallback, which is not a "
     "declared chat_model resource (declared: cheap, model)"),
    ({"budget": {"max_tokens": 20, "on_exceeded": "fallback", "fallback": "conn"}},
     "chat_model resource 'model' names 'conn' as its budget's fallback, which is not a "
     "declared chat_model resource"),
    ({"budget": Budget(max_tokens=20, on_exceeded="fallback", fallback="model")},
     "chat_model resource 'model' names itself as its budget's fallback"),
    ({"fallbacks": ["cheap", "nope"]},
     "chat_model resource 'model' names 'nope' in its fallbacks, which is not a declared "
     "chat_model resource"),
    ({"fallbacks": ["model"]}, "chat_model resource 'model' names itself in its fallbacks"),
])
def test_a_fallback_that_is_not_another_declared_setup_is_refused_at_compile(setup, says):
    agent = FanOut()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(Metered))
    agent.add_resource("model", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn", **setup))
    agent.add_resource("cheap", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn"))
    with pytest.raises(PlanError) as info:
        AgentPlan.from_agent(agent)
    assert says in str(info.value)


# a cost limit counts each call by the price of the setup that answered: with no price for
# the budget's own setup (prices left out, or keyed by a misspelt name) every call cost 0
# and the budget never ran out, silently
@pytest.mark.parametrize(("budget", "says"), [
    (Budget(max_cost=0.01), "chat_model resource 'model' has a budget with max_cost but no "
     "price for 'model' in its prices"),
    ({"max_cost": 0.01, "prices": {"modle": {"input_per_million": 1, "output_per_million": 2}}},
     "chat_model resource 'model': its budget prices 'modle', which is not a declared "
     "chat_model resource (declared: cheap, model)"),
])
def test_a_cost_budget_with_no_price_for_its_setup_is_refused_at_compile(budget, says):
    agent = FanOut()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(Metered))
    agent.add_resource("model", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn", budget=budget))
    agent.add_resource("cheap", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn"))
    with pytest.raises(PlanError) as info:
        AgentPlan.from_agent(agent)
    assert says in str(info.value)


def test_a_cost_budget_may_leave_its_fallback_unpriced():  # a free local model
    agent = FanOut()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(Metered))
    agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", budget=Budget(
            max_cost=0.01, on_exceeded="fallback", fallback="cheap",
            prices={"model": ModelPrice(input_per_million=1, output_per_million=2)})))
    agent.add_resource("cheap", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn"))
    AgentPlan.from_agent(agent)
