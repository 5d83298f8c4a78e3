"""Actions an upgrade adds for an event still in flight: they run for it after the restore.

An event triggers its actions when it is dispatched; each gets an in-flight record holding
the event, dropped when the action completes. New code restored from a checkpoint may have
actions the old code lacked for the type of an event some record still holds. A fault-free
run of the new code would have run them for it (as Apache Flink Agents does when it
re-processes a restored event), so the core starts them then, once: each record keeps the
names of the actions its event triggered (``InflightAction.siblings``, when there are
several), which also tells a sibling that completed before the checkpoint from a new action.
A run stored before trigger lists were kept (``RunState.siblings_kept`` false) cannot tell
them apart: the new actions are not started, and a warning says so. Neither are they when
an action in flight for the event is one the new code does not run for it (removed,
renamed, or triggered by other events now): a renamed action would do its work again, while
the in-flight execution fails (``ReplayDivergenceError``).

An event whose actions had all completed before the checkpoint is gone from state: the
actions the new code adds for its type do not run for it.
"""

from __future__ import annotations

import logging
from typing import Any

from ...api import OutputEvent
from ...api.internal import shown_key
from ...plan import AgentPlan
from ..recorder._state import CallKind, InflightAction, RunState
from ._subgraph import plan_at

__all__ = ["new_siblings"]

log = logging.getLogger("flink_agents_py.runtime")


def _routed(plan: AgentPlan, run: RunState, scope: str | None, event_type: Any) -> list[str]:
    """The actions the new code routes an event of ``event_type`` to in ``scope``."""
    if not isinstance(event_type, str) or event_type == OutputEvent.__name__:
        return []
    if scope is not None:
        inv = run.invocations.get(scope)
        if inv is None or inv.failed or inv.cancelled or inv.kind != CallKind.SUBAGENT:
            return []  # a chat routes to built-in actions only
        try:
            plan = plan_at(plan, inv.plan_path)
        except KeyError:  # the sub-agent is gone: its records fail (``missing_subagent``)
            return []
    return [a.name for a in plan.actions_for(event_type)]


def new_siblings(plan: AgentPlan, run: RunState, restored: list[str], key: Any) -> list[str]:
    """Add records for the actions ``plan`` adds for the events of ``restored`` records.

    Args:
        plan: the new code's root plan.
        run: the restored run (records are added to ``run.inflight``).
        restored: ids of the executions restored from state (not live here).
        key: the key, for the warning.

    Returns:
        The execution ids of the records added (each a first execution, not re-entered).
    """
    groups: dict[tuple[str, str | None], list[InflightAction]] = {}
    for exec_id in restored:
        rec = run.inflight[exec_id]
        if not exec_id.endswith("/" + rec.action):  # not ``<event id>/<action>``: left alone
            continue
        event_id = exec_id[:-len(rec.action) - 1]
        groups.setdefault((event_id, rec.scope), []).append(rec)
    added: list[str] = []
    for (event_id, scope), recs in groups.items():
        event_type = recs[0].event.get("type")
        routes = _routed(plan, run, scope, event_type)
        new = [n for n in routes if f"{event_id}/{n}" not in run.inflight]
        if not new:
            continue
        gone = [r.action for r in recs if r.action not in routes]
        if gone or not run.siblings_kept:
            why = (f"they may replace its action {gone[0]!r} the new code does not run for "
                   "it (that execution fails), and would do its work again" if gone else
                   "its run was stored by an earlier version, which does not keep what an "
                   "event triggered (those actions may have completed before the checkpoint)")
            log.warning("event %s (%s) of key %s is in flight, and the new code also routes it "
                        "to %s: not run for it: %s", event_id, event_type, shown_key(key),
                        ", ".join(repr(n) for n in new), why)
            continue
        names = list(recs[0].siblings or [recs[0].action])
        fresh = [n for n in new if n not in names and n not in {r.action for r in recs}]
        if not fresh:
            continue
        names += fresh
        for rec in recs:
            rec.siblings = names
        for name in fresh:
            exec_id = f"{event_id}/{name}"
            run.inflight[exec_id] = InflightAction(action=name, scope=scope,
                                                   event=recs[0].event, siblings=names)
            added.append(exec_id)
        log.info("event %s (%s) of key %s was in flight at the restore: the new code's "
                 "actions %s run for it", event_id, event_type, shown_key(key), fresh)
    return added
