"""The agent plan: an agent compiled to validated, serializable data."""

from ._action_checks import signature_problem, warn_if_returned
from ._plan import (
    BUILTIN_ACTIONS,
    OBSERVED_EVENTS,
    RUNS_FIRST,
    ActionPlan,
    AgentPlan,
    BuiltinAction,
    FunctionRef,
    ResourcePlan,
    register_builtin_actions,
)

__all__ = ["ActionPlan", "AgentPlan", "BUILTIN_ACTIONS", "BuiltinAction", "FunctionRef",
           "OBSERVED_EVENTS", "ResourcePlan", "RUNS_FIRST",
           "register_builtin_actions", "signature_problem", "warn_if_returned"]
