"""What a chat's record keeps of the chat model setup it was answered by.

A ``ctx.chat`` call keeps it, and so does each model call of the built-in chat action for a
chat started by sending a ``ChatRequestEvent`` (``ActionExecution._open_call``; not the
model calls of a ``ctx.chat``'s own invocation: its call says it once).

A chat's arguments are what the action passes (the setup's name, the messages,
``prompt_args``, ``output_schema``), not the setup: a run whose chat was recorded before a
deploy that changed the setup (its ``prompt=``, its tools, its model, its options, its
connection's model or temperature, the prompt it names) replayed the old answer without a
word. The record keeps the digest of the setup's configuration as declared in the plan
(``SETUP``, an entry of ``argument_shape``'s sixth part), and a replay whose setup's
configuration changed is a changed call (``_call_changes.changed_defaults``: ``"configured"``):
the ``arguments changed`` warning naming the setup, a ``ReplayDivergenceError`` in strict
mode, a finding of ``check_upgrade_safety``. What does not change the answer (retries,
backoff, a budget, the error policy) is left out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...api import ResourceType
from .._serde import digest, to_json_value

if TYPE_CHECKING:
    from .._resources import ResourceEnvironment

__all__ = ["FALLBACKS", "OFFERED", "SETUP", "setup_shape"]

SETUP = "$setup"
"""The name of a chat's setup digest among the entries of its shape's sixth part."""

_NOT_ANSWERING = frozenset(
    {
        "retry_max_attempts",
        "retry_initial_backoff_s",
        "retry_max_backoff_s",
        "budget",
        "error_policy",
    }
)
"""Setup arguments that do not change a chat's answer: left out of its digest."""

_KEPT: dict[tuple[ResourceEnvironment, str], str | None] = {}
"""``setup_shape`` per resource environment (hashed by identity) and setup name.

A key holds its environment, so an environment's entry is never taken for another's; looked
up with no call (a chat's model call asks it on the hot path).
"""


def _declared(env: ResourceEnvironment, name: str, rtype: ResourceType) -> Any:
    """The descriptor of ``name`` in the plan that declares it (``None``: none)."""
    found = env.owner(name, rtype)._plan.resources.get(rtype, {}).get(name)
    return None if found is None else found.descriptor


def _configuration(env: ResourceEnvironment, model: str) -> Any:
    setup = _declared(env, model, ResourceType.CHAT_MODEL)
    if setup is None:
        return None
    args = {k: v for k, v in setup.arguments.items() if k not in _NOT_ANSWERING}
    parts: list[Any] = [setup.clazz, args]
    for rtype, ref in (
        (ResourceType.CHAT_MODEL_CONNECTION, args.get("connection")),
        (ResourceType.PROMPT, args.get("prompt")),
    ):
        if isinstance(ref, str) and ref:
            parts.append(_declared(env, ref, rtype))
    return to_json_value(parts, f"the configuration of chat model setup {model!r}")


OFFERED = "$offered"
"""The name of the digest of what a chat's setup offers its model (its tools and sub-agents
as declared), an entry of the shape's sixth part next to ``SETUP``."""

_NOT_OFFERED = frozenset({"status_poll_interval_millis", "approval_timeout_s"})
"""Tool and sub-agent arguments that do not change what the model is offered."""


def _offered(env: ResourceEnvironment, model: str) -> str:
    """The ``OFFERED`` entry of setup ``model``'s shape: ``""`` when it offers nothing.

    The setup's ``tools`` and ``subagents`` are names; the model is offered each one's
    description and parameters, which their own descriptors declare (a sub-agent's
    ``description`` and ``input_schema``, a tool's function and description, an external
    sub-agent's class and fields). A chat recorded before a deploy that changed one of them
    replayed the old answer without a word, as a changed ``prompt=`` did before ``SETUP``.
    Kept apart from ``SETUP``, so the records of setups that offer nothing, and those written
    before this entry, keep their digests (``changed_defaults`` skips a ``$`` entry the
    record does not have).

    Returns:
        ``",$offered=<digest>"``, or ``""`` (nothing offered, or no JSON form).
    """
    setup = _declared(env, model, ResourceType.CHAT_MODEL)
    if setup is None:
        return ""
    parts: list[Any] = []
    for key, rtype in (("tools", ResourceType.TOOL), ("subagents", ResourceType.AGENT)):
        for name in setup.arguments.get(key) or ():
            try:
                found = _declared(env, name, rtype) if isinstance(name, str) else None
            except Exception:  # noqa: BLE001 - an MCP server's tool: no descriptor of its own
                found = None
            if found is not None:
                args = {k: v for k, v in found.arguments.items() if k not in _NOT_OFFERED}
                parts.append([key, name, found.clazz, args])
    if not parts:
        return ""
    try:
        made = to_json_value(parts, f"what chat model setup {model!r} offers")
    except Exception:  # noqa: BLE001 - no JSON form: nothing to compare
        return ""
    return f",{OFFERED}={digest(made)[:8]}"


FALLBACKS = "$fallbacks"
"""The name of the digest of a chat's setup's fallbacks' configurations (next to ``SETUP``)."""


def _fallbacks(env: ResourceEnvironment, model: str) -> str:
    """The ``FALLBACKS`` entry of setup ``model``'s shape: ``""`` when it names none.

    A chat's answer may be a fallback setup's (``fallbacks=``: tried in order when a model
    call fails); ``SETUP`` keeps only their names, so a deploy that changed a fallback's
    model or options replayed the answer it gave without a word. Kept apart from ``SETUP``
    (as ``OFFERED``), so records written before this entry keep their digests.

    Returns:
        ``",$fallbacks=<digest>"``, or ``""`` (no fallbacks, or no JSON form).
    """
    setup = _declared(env, model, ResourceType.CHAT_MODEL)
    names = setup.arguments.get("fallbacks") if setup is not None else None
    if not names:
        return ""
    try:
        made = [[n, _configuration(env, n)] for n in names if isinstance(n, str)]
    except Exception:  # noqa: BLE001 - undeclared, or no JSON form: nothing to compare
        return ""
    return f",{FALLBACKS}={digest(made)[:8]}"


def setup_shape(env: ResourceEnvironment, model: str) -> str | None:
    """The shape of a chat of setup ``model`` (its configuration's digest, what it offers).

    A ``ctx.chat`` call's, and a chat action's model call's; cached per environment and
    name (one call when cached: the chat path asks it once per model call).

    Args:
        env: the calling action's resources.
        model: the chat model setup's name.

    Returns:
        The shape (``CallRecord.shape``), or ``None`` when the setup is not declared or its
        configuration has no JSON form (nothing to compare).
    """
    key = (env, model)
    if key in _KEPT:
        return _KEPT[key]
    shape: str | None
    try:
        made = "/" * 5 + f"{SETUP}={digest(_configuration(env, model))[:8]}"
    except Exception:  # noqa: BLE001 - no plan entry, no JSON form: nothing to compare
        shape = None
    else:
        shape = made + _offered(env, model) + _fallbacks(env, model)
    if len(_KEPT) >= 1024:
        _KEPT.clear()
    _KEPT[key] = shape
    return shape
