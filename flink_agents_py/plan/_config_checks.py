"""Plan-build check of an agent's configuration: keys that belong to a chat model setup."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..api import ChatModelSetup
from ..api.internal import warn_at_user

__all__ = ["SetupConfigWarning", "warn_of_setup_fields"]


class SetupConfigWarning(UserWarning):
    """An agent's configuration holds a chat model setup's field, which no setup reads."""


def warn_of_setup_fields(agent: str, config: Mapping[str, Any]) -> None:
    """Warn when ``config`` (``set_config``, YAML ``config:``) names a chat model setup field.

    ``agent.set_config(max_tool_rounds=4)`` read as an agent-wide bound, but the runtime
    reads ``max_tool_rounds`` (and every other setup field) from each chat model setup
    only: the chats kept the setup's default (8 rounds) without a word. The key stays in
    the configuration (``ctx.config`` reads it).

    Args:
        agent: the agent's class name, for the message.
        config: its configuration.
    """
    fields = sorted(k for k in config if k in ChatModelSetup.model_fields)
    if fields:
        shown = ", ".join(f"{k}={config[k]!r}" for k in fields)
        warn_at_user(SetupConfigWarning(
            f"agent {agent}'s configuration sets {shown}, which no chat model setup reads: "
            f"a chat model setup takes it, e.g. ResourceDescriptor(ChatModelSetup, "
            f"connection=..., {shown}) (in YAML, a key of the chat_model_setups entry)"))
