"""File-level entries shared by every agent of a document (Apache Flink Agents' YAML form).

Flink Agents' YAML may declare resources and actions beside ``agents:``, at the top of the
document, for every agent to reuse; an agent lists a shared action by its name alone::

    agents:
      - name: math_agent
        chat_model_setups: [{name: chat_model, clazz: ollama, connection: ollama_connection}]
        actions:
          - {name: chat_request, function: "my_app:chat_request", trigger_conditions: [input]}
          - process_chat_response            # the file-level action of that name
    chat_model_connections:
      - {name: ollama_connection, clazz: ollama}
    actions:
      - {name: process_chat_response, function: "my_app:respond",
         trigger_conditions: [chat_response]}

``share_entries`` rewrites such a document, before it is validated, into the form the rest of
the loader reads: each file-level resource is appended to every agent that does not declare
one of the same name (the agent's own wins), each action named by a bare string is replaced
by a copy of the file-level action, and the file-level sections are removed. A problem in a
shared entry is reported at the agent that received it, under the agent's section.
"""

from __future__ import annotations

import copy
from typing import Any

from ._errors import quoted
from ._nodes import Report, Tracked

__all__ = ["SHARED_SECTIONS", "share_entries"]

SHARED_SECTIONS = ("chat_model_connections", "chat_model_setups", "prompts", "tools",
                   "mcp_servers")
"""The resource sections a document may declare at its top level, for every agent."""


def share_entries(data: Any, report: Report) -> None:
    """Move the document's file-level resources and actions into its agents (in place).

    Args:
        data: the document's data (a dict with ``Tracked`` lists; anything else is left for
            validation to report).
        report: receives a bare action name that names no file-level action.
    """
    if not isinstance(data, dict):
        return
    shared = {key: data.pop(key) for key in (*SHARED_SECTIONS, "actions") if key in data}
    agents = data.get("agents")
    if not shared or not isinstance(agents, list):
        if shared:  # no agents: validation reports it; the sections are not its concern
            data.update(shared)
        return
    actions = {a["name"]: a for a in _entries(shared.get("actions"))
               if isinstance(a.get("name"), str)}
    for i, agent in enumerate(agents):
        if not isinstance(agent, dict):
            continue
        for key in SHARED_SECTIONS:
            entries = _entries(shared.get(key))
            own = agent.get(key)
            if not entries or (own is not None and not isinstance(own, list)):
                continue
            names = {e.get("name") for e in _entries(own)}
            extra = [copy.deepcopy(e) for e in entries if e.get("name") not in names]
            agent[key] = _appended(own, extra)
        _resolve_actions(agent, ("agents", i), actions, report)


def _resolve_actions(agent: dict[str, Any], loc: tuple[str | int, ...],
                     actions: dict[str, dict[str, Any]], report: Report) -> None:
    own = agent.get("actions")
    if not isinstance(own, list):
        return
    for j in reversed(range(len(own))):  # backwards: an unknown name's entry is dropped
        entry = own[j]
        if not isinstance(entry, str):
            continue
        if entry in actions:
            own[j] = copy.deepcopy(actions[entry])
            continue
        listed = ", ".join(actions) or "none"
        report.add((*loc, "actions", j), f"names action {quoted(entry)}, which the document "
                   f"does not declare at its top level (actions: {listed})")
        if isinstance(own, Tracked):
            own.drop(j)
        else:
            del own[j]


def _entries(section: Any) -> list[dict[str, Any]]:
    return [e for e in section if isinstance(e, dict)] if isinstance(section, list) else []


def _appended(own: list[Any] | None, extra: list[dict[str, Any]]) -> list[Any]:
    if own is None:
        return Tracked(extra)
    own.extend(extra)
    if isinstance(own, Tracked):
        start = max(own.origin, default=-1) + 1
        own.origin.extend(range(start, start + len(extra)))
    return own
