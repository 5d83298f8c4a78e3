"""What the warning about an event type no action takes says: who sent it, what was meant.

An event of a type no action listens to is dropped (logged once per type). The warning names
the action that sent the first one (a program with several ``send_event`` calls otherwise
has to search for it), writes the ``@action(...)`` to add as it is spelled in Python (the
class for a class's type, a quoted string for a type sent by name), and names the trigger
of the agent within a letter or two of it (``"scored"`` sent, ``@action("score")`` declared),
which is the usual cause.
"""

from __future__ import annotations

import difflib
import logging

from ...api import Event
from ...api.internal import event_class_for
from ...plan import AgentPlan
from ._observer import event_parent

__all__ = ["missing_trigger_hint", "warn_unheard"]

log = logging.getLogger("flink_agents_py.runtime")

_UNHEARD: set[tuple[str, str]] = set()
"""The ``(child agent, event type)`` pairs ``warn_unheard`` warned about, in this process."""


def missing_trigger_hint(plan: AgentPlan, event_type: str, event_id: str | None) -> str:
    """The end of the warning: who sent the event and which ``@action`` is missing.

    Args:
        plan: the agent (or sub-agent) whose actions the event triggers none of.
        event_type: the event's type.
        event_id: the id of the first such event (its sender's execution is its prefix), or
            ``None`` when unknown.

    Returns:
        E.g. ``the first sent by action 'go' (r0/go); is an @action("scored") missing, or
        is "scored" meant to be "score", which action 'fin' takes?``
    """
    cls = event_class_for(event_type)
    spelled = f'"{event_type}"' if cls is Event else cls.__qualname__.rsplit(">.", 1)[-1]
    sender = event_parent(event_id) if event_id else None
    sent = ""
    action = sender.rsplit("/", 1)[-1] if sender is not None and "/" in sender else None
    if action in plan.actions:  # ``r0/go``, not a sub-agent call's input (``r0/ask/c0/b``)
        sent = f"the first sent by action {action!r} ({sender}); "
    hint = f"{sent}is an @action({spelled}) missing"
    triggers = [t for t in plan.actions_by_event if plan.actions_for(t)
                and not all(a.name.startswith("_") for a in plan.actions_for(t))]
    near = difflib.get_close_matches(event_type, triggers, n=1, cutoff=0.75)
    if near:
        takers = ", ".join(repr(a.name) for a in plan.actions_for(near[0]))
        hint += (f", or is {event_type!r} meant to be {near[0]!r}, which action "
                 f"{takers} takes")
    return hint + "?"


def warn_unheard(plan: AgentPlan, name: str, event_type: str, event_id: str | None) -> None:
    """Warn that an event of a sub-agent's flow triggers no action of it (it is dropped).

    Once per child agent and event type, as ``route_at_root`` warns of the agent's own flow.

    Args:
        plan: the sub-agent's plan.
        name: the sub-agent's resource name.
        event_type: the event's type.
        event_id: the id of the event (naming the action that sent it).
    """
    if (plan.agent, event_type) in _UNHEARD:
        return
    _UNHEARD.add((plan.agent, event_type))
    log.warning("events of type %r trigger no action of sub-agent %r (agent %s; its actions: "
                "%s) and are dropped: %s", event_type, name, plan.agent or "?",
                ", ".join(n for n in plan.actions if not n.startswith("_")) or "none",
                missing_trigger_hint(plan, event_type, event_id))
