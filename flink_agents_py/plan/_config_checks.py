"""Plan-build checks of an agent's configuration: setup keys, and its credentials.

Keys that belong to a chat model setup are warned of; the credentials it holds are
registered as secrets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..api import ChatModelSetup
from ..api.internal import register_plan_credentials, warn_at_user

__all__ = ["SetupConfigWarning", "registered_config", "warn_of_setup_fields"]


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


def registered_config(config: dict[str, Any]) -> dict[str, Any]:
    """``config``, its credentials registered as secrets (an ``AgentPlan.config`` validator).

    A value under a credential's name (``openai.api_key``, ``db.password``,
    ``GITHUB_TOKEN``, nested too) and one in a URL or a command line are registered as a
    resource's arguments are (``register_plan_credentials``): an action reads them with
    ``ctx.config`` and sends them on, and one quoted back (a provider's 401 body) was in
    clear in error records, logs and traces. A plan made, or read back by a worker, does it.

    Args:
        config: the agent's configuration.

    Returns:
        ``config`` itself (its values unchanged).
    """
    register_plan_credentials(config, "the agent's configuration")
    return config
