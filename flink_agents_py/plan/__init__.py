"""The agent plan: an agent compiled to validated, serializable data."""

from ._plan import BUILTIN_ACTIONS, ActionPlan, AgentPlan, FunctionRef, ResourcePlan

__all__ = ["ActionPlan", "AgentPlan", "BUILTIN_ACTIONS", "FunctionRef", "ResourcePlan"]
