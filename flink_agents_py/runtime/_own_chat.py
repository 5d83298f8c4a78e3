"""The connection a model call is paced by, for a setup whose own ``chat`` makes the call.

A Flink Agents ``BaseChatModelSetup`` subclass with its own ``chat`` makes every model call
of its chats itself; its ``connection`` is only what its ``chat`` might use, and Flink Agents
never resolves it (its async execution e2e test names ``connection="placement"``, declared
nowhere). The plan does not check such a name; the call paced by the connection's flow
controller must not need it either. When it is not declared, the setup's calls are paced
by a stand-in connection of their own (default ``FlowControl``), one per setup object.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..api import (
    ChatMessage,
    ChatModelConnection,
    ChatModelSetup,
    ChatResponse,
    ResourceNotFoundError,
    ResourceType,
    ToolMetadata,
)
from ._per_object import PerObject

__all__ = ["pacing_connection"]

_STAND_INS: PerObject[ChatModelConnection] = PerObject()


class _OwnChatConnection(ChatModelConnection):
    """Stands for the undeclared connection of a setup with its own ``chat`` (pacing only)."""

    def chat(self, messages: Sequence[ChatMessage], *, model: str | None = None,
             tools: Sequence[ToolMetadata] = (), output_schema: dict[str, Any] | None = None,
             **options: Any) -> ChatResponse:
        """Never called: the setup's own ``chat`` makes the call.

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError(f"{self.resource_name}: the setup's own chat makes its calls")


def pacing_connection(setup: ChatModelSetup) -> ChatModelConnection:
    """The connection whose flow controller paces ``setup``'s model calls.

    Args:
        setup: the chat model setup making the call.

    Returns:
        Its declared connection; for a setup with its own ``chat`` whose connection is not
        declared, a stand-in (the same one for each call of that setup object).

    Raises:
        ResourceNotFoundError: when a setup without its own ``chat`` names no declared
            connection.
    """
    try:
        connection = setup.get_resource(setup.connection, ResourceType.CHAT_MODEL_CONNECTION)
    except ResourceNotFoundError:
        if not setup.has_own_chat():
            raise
        return _stand_in(setup)
    assert isinstance(connection, ChatModelConnection)
    return connection


def _stand_in(setup: ChatModelSetup) -> ChatModelConnection:
    def make() -> ChatModelConnection:
        stand_in = _OwnChatConnection()
        stand_in.bind(_no_resources, f"{setup.resource_name or 'setup'} (its own chat)")
        return stand_in

    return _STAND_INS.get_or_make(setup, make)


def _no_resources(name: str, kind: ResourceType) -> Any:
    raise ResourceNotFoundError(f"no {kind.value} resource named {name!r}")
