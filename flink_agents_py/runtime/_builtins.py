"""The built-in actions, declared once: the runtime owns them and hands them to the plan.

Every plan carries these actions (``AgentPlan.from_agent`` adds them, as registered here
when the runtime is imported). The core gives them the ``ActionExecution`` itself instead
of a user's ``ActionContext``, and routes the events of a chat (``ctx.chat``'s private
event route) to those that serve chats.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..api import ChatRequestEvent, ToolRequestEvent, ToolResponseEvent
from ..plan import BuiltinAction, register_builtin_actions
from ._builtin_actions import chat_model_action, tool_call_action
from ._knowledge import context_retrieval_action

__all__ = ["BUILTINS", "BUILTIN_NAMES", "CHAT_ROUTES"]


@dataclass(frozen=True, slots=True)
class Builtin:
    """One built-in action.

    Attributes:
        name: its name in every plan (a name no user action may take).
        function: ``(event, execution)``, an ``async`` function.
        triggers: the event types it is triggered by.
        serves_chats: whether it runs inside a chat's invocation too (for these triggers).
    """

    name: str
    function: Callable[..., Any]
    triggers: tuple[str, ...]
    serves_chats: bool


BUILTINS = (
    Builtin("_chat_model_action", chat_model_action,
            (ChatRequestEvent.EVENT_TYPE, ToolResponseEvent.EVENT_TYPE), serves_chats=True),
    Builtin("_tool_call_action", tool_call_action, (ToolRequestEvent.EVENT_TYPE,),
            serves_chats=True),
    Builtin("_context_retrieval_action", context_retrieval_action,
            ("ContextRetrievalRequestEvent",), serves_chats=False),
)
"""The built-in actions, in the order plans list them."""

BUILTIN_NAMES = frozenset(b.name for b in BUILTINS)
"""Their names (the core passes these actions the execution itself)."""

CHAT_ROUTES = {t: b.name for b in BUILTINS if b.serves_chats for t in b.triggers}
"""The action an event of a chat's invocation triggers, by event type."""

register_builtin_actions({b.name: BuiltinAction(b.function, b.triggers) for b in BUILTINS})
