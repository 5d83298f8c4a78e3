"""The resources an internal sub-agent may name without declaring: its ancestors'.

As in Flink Agents, a sub-agent's chat model setup (or tool list, prompt, vector store...)
may name a resource its parent declares (a tool or prompt its parent's MCP server lists
too), or its parent's parent, up to the agent; its own resource of that type and name wins.
Its plan is compiled inside its parent's (``AgentPlan.from_agent``), so the parent passes
down what the sub-agent may see: its own resources over those it sees itself. Sub-agents
(``AGENT`` resources) are not passed down: a sub-agent is invoked by a name of the plan it
runs in.

At run time the sub-agent's resource environment falls back to its parent's the same way
(``runtime._resources.ResourceEnvironment``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Set
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any

from ..api import ResourceType

__all__ = ["declared_above", "passing_down", "visible"]

_SEEN: ContextVar[Mapping[ResourceType, Mapping[str, Any]]] = ContextVar(
    "flink_agents_py_inherited_resources", default=MappingProxyType({}))
_LISTED: ContextVar[frozenset[tuple[ResourceType, str]]] = ContextVar(
    "flink_agents_py_inherited_listed", default=frozenset())
"""Which of ``_SEEN`` an MCP server's listing registered (not declared)."""


def visible(own: Mapping[ResourceType, Mapping[str, Any]]
            ) -> dict[ResourceType, dict[str, Any]]:
    """The resources an agent being compiled may name: ``own`` over its ancestors'.

    Args:
        own: the agent's compiled resources, by type and name.

    Returns:
        By type and name: each of ``own``, and each its ancestors declare (but sub-agents)
        under a name it does not declare of that type.
    """
    seen = _SEEN.get()
    return {t: {**seen.get(t, {}), **own.get(t, {})} for t in {*seen, *own}}


@contextlib.contextmanager
def passing_down(own: Mapping[ResourceType, Mapping[str, Any]],
                 listed: Set[tuple[ResourceType, str]] = frozenset()) -> Iterator[None]:
    """Compile the agent's internal sub-agents inside this block: they see ``own`` too.

    Args:
        own: the agent's compiled resources (but its sub-agents), by type and name.
        listed: the ``(type, name)`` of those of ``own`` registered from an MCP server's
            listing (not declared).

    Yields:
        Nothing.
    """
    above = {k for k in _LISTED.get() if k[1] not in own.get(k[0], {})}
    token = _SEEN.set({t: dict(b) for t, b in visible(own).items()
                       if t is not ResourceType.AGENT})
    listed_token = _LISTED.set(frozenset(above | set(listed)))
    try:
        yield
    finally:
        _LISTED.reset(listed_token)
        _SEEN.reset(token)


def declared_above(rtype: ResourceType, name: str) -> bool:
    """Whether an ancestor of the agent being compiled declares resource ``name``.

    Declared, not registered from an MCP server's listing: a name a server chose never
    displaces a resource an agent declared under it, the agent's own or an ancestor's (a
    sub-agent's server advertising ``add`` would otherwise take the calls, with the model's
    arguments, its setup meant for the parent's ``add``, or write the prompt it names).

    Args:
        rtype: the resource's type.
        name: its name.

    Returns:
        ``True`` when an ancestor declares it.
    """
    return name in _SEEN.get().get(rtype, {}) and (rtype, name) not in _LISTED.get()
