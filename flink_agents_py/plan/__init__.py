"""The agent plan: an agent compiled to validated, serializable data."""

from ._plan import (
    BUILTIN_ACTIONS,
    ActionPlan,
    AgentPlan,
    BuiltinAction,
    FunctionRef,
    ResourcePlan,
    register_builtin_actions,
)

__all__ = ["ActionPlan", "AgentPlan", "BUILTIN_ACTIONS", "BuiltinAction", "FunctionRef",
           "ResourcePlan",
           "register_builtin_actions"]
