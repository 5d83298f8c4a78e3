"""How deep internal sub-agents nest while a plan is compiled.

An internal sub-agent's plan is compiled inside its parent's (``AgentPlan.from_agent``), so
an agent that is its own sub-agent, directly or through others, would compile until the
interpreter's recursion limit, failing with a ``RecursionError`` that names nothing. The
nesting is bounded instead: going past the bound ends the whole compilation with one plan
problem naming the path of sub-agents. (A cycle cannot be told from classes alone: an agent
class may well be the sub-agent of another instance of itself, configured otherwise.)
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from ..api import PlanError

__all__ = ["MAX_SUBAGENT_DEPTH", "one_level_deeper"]

MAX_SUBAGENT_DEPTH = 16
"""The most internal sub-agents may nest (a sub-agent of a sub-agent... of the agent)."""

_LOCAL = threading.local()


class _TooDeep(Exception):
    """Ends every level of a compilation that nested too deep (caught at the top one)."""


@contextlib.contextmanager
def one_level_deeper(name: str, child: Any) -> Iterator[None]:
    """Compile the sub-agent ``name``'s plan inside this block, one nesting level deeper.

    Args:
        name: the sub-agent's resource name.
        child: the sub-agent's agent.

    Yields:
        Nothing: the block compiles ``child``.

    Raises:
        PlanError: (from the outermost level) when the sub-agents nest past
            ``MAX_SUBAGENT_DEPTH``, naming the path of sub-agent names and the agent.
        _TooDeep: (from every other level) the same, on its way to the outermost one.
    """
    path: list[str] = getattr(_LOCAL, "path", [])
    if len(path) >= MAX_SUBAGENT_DEPTH:
        cls = type(child)
        raise _TooDeep(
            f"sub-agents nest more than {MAX_SUBAGENT_DEPTH} levels deep: "
            f"{' -> '.join(repr(n) for n in [*path, name])} (agent {cls.__module__}."
            f"{cls.__qualname__}): an agent that is its own sub-agent, directly or through "
            "others (a cycle), never ends")
    _LOCAL.path = [*path, name]
    try:
        yield
    except _TooDeep as e:
        if path:
            raise
        raise PlanError([str(e)]) from None
    finally:
        _LOCAL.path = path
