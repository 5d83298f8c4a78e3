"""Built-in agents: ``ReActAgent`` (reason, call tools, observe, until an answer)."""

from .react import DEFAULT_CHAT_MODEL, ReActAgent, ReActAgentError

__all__ = ["DEFAULT_CHAT_MODEL", "ReActAgent", "ReActAgentError"]
