"""Sub-agent entries: what each names, which agent gets which, and cycles between agents."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..api import (
    Agent,
    AsyncSubagentSetup,
    DeferredSubagentSetup,
    InternalSubagent,
    ResourceDescriptor,
    ResourceType,
    SubagentSetup,
)
from ._build import import_object, resource_arguments, unique
from ._errors import Loc, quoted
from ._nodes import Report
from ._specs import FUNCTION_PATH, ExternalSubagentSpec, InternalSubagentSpec

__all__ = ["Subagent", "add_subagents", "find_cycles", "read_subagents"]


@dataclass
class Subagent:
    """A read ``subagents`` entry (document-level or an agent's own).

    Attributes:
        name: its name (a ``<placeholder>`` when the name was bad).
        loc: its location.
        ok: whether the entry has no problem at all.
        internal_ref: the agent of the document it names.
        imported_agent: the ``Agent`` it names by ``module:qualname``.
        clazz: the external setup class.
        arguments: ``description``, ``input_schema`` and the setup's fields.
    """

    name: str
    loc: Loc
    ok: bool = False
    internal_ref: str | None = None
    imported_agent: Agent | None = None
    clazz: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)


def read_subagents(report: Report, entries: Sequence[InternalSubagentSpec | ExternalSubagentSpec],
                   loc: Loc, agents: Mapping[str, Any]) -> list[Subagent]:
    """Check each entry of a ``subagents`` list.

    Args:
        report: receives the problems.
        entries: the validated entries.
        loc: the list's location.
        agents: the document's agents by name (what ``agent:`` may name).

    Returns:
        One ``Subagent`` per entry, ``ok`` telling whether it can be used.
    """
    out: list[Subagent] = []
    seen: dict[str, Loc] = {}
    for i, entry in enumerate(entries):
        at = (*loc, i)
        unique(report, seen, entry.name, at, "sub-agent")
        s = Subagent(entry.name, at)
        if entry.description is not None:
            s.arguments["description"] = entry.description
        if entry.input_schema is not None:
            s.arguments["input_schema"] = entry.input_schema
        if isinstance(entry, InternalSubagentSpec):
            _internal_target(report, entry, s, agents)
        else:
            _external_setup(report, entry, s)
        s.ok = not report.under(at)
        out.append(s)
    return out


def _internal_target(report: Report, entry: InternalSubagentSpec, s: Subagent,
                     agents: Mapping[str, Any]) -> None:
    ref, at = entry.agent, (*s.loc, "agent")
    if ref in agents:
        s.internal_ref = ref
        return
    if ":" in ref and FUNCTION_PATH.fullmatch(ref):
        obj = import_object(report, ref, at)
        if obj is None:
            return
        if isinstance(obj, type) and issubclass(obj, Agent):
            obj = obj()
        if not isinstance(obj, Agent):
            report.add(at, f"{quoted(ref)} is not an Agent class or instance")
            return
        s.imported_agent = obj
        return
    report.add(at, f"{quoted(ref)} names no agent of this document (agents: "
                   f"{', '.join(agents) or 'none'}); name one, or an Agent by 'module:qualname'")


def _external_setup(report: Report, entry: ExternalSubagentSpec, s: Subagent) -> None:
    at = (*s.loc, "clazz")
    cls = import_object(report, entry.clazz, at)
    if cls is None:
        return
    if not isinstance(cls, type):
        report.add(at, f"{quoted(entry.clazz)} is not a class")
        return
    if not issubclass(cls, SubagentSetup):
        report.add(at, f"{entry.clazz} is not a SubagentSetup subclass (a "
                       "DeferredSubagentSetup or AsyncSubagentSetup)")
        return
    if issubclass(cls, InternalSubagent):
        report.add(at, "an internal sub-agent is declared with 'agent:' naming an agent of "
                       "this document, not by 'clazz'")
        return
    if not issubclass(cls, (DeferredSubagentSetup, AsyncSubagentSetup)):
        report.add(at, f"{entry.clazz} is neither a DeferredSubagentSetup nor an "
                       "AsyncSubagentSetup")
        return
    args, valid = resource_arguments(report, entry, s.loc, cls, "sub-agent setup",
                                     fixed=s.arguments)
    if valid:
        s.arguments = args
        s.clazz = entry.clazz


def add_subagents(agent: Agent, agent_name: str, own: list[Subagent], shared: list[Subagent],
                  agents: Mapping[str, Agent]) -> tuple[set[str], list[Subagent], bool]:
    """Give ``agent`` its sub-agents: its own entries, then the shared ones it lacks.

    A shared internal sub-agent is not given to the agent it names.

    Args:
        agent: the agent being built.
        agent_name: its name.
        own: its own entries.
        shared: the document's entries.
        agents: the document's agents by name.

    Returns:
        ``(names, internal children, ok)``: every sub-agent name the agent has, the entries
        naming agents of the document, and whether every entry was sound.
    """
    effective: dict[str, Subagent] = {s.name: s for s in own}
    for s in shared:
        if s.name not in effective and s.internal_ref != agent_name:
            effective[s.name] = s
    children: list[Subagent] = []
    ok = True
    for s in effective.values():
        if not s.ok:
            ok = False
            continue
        if s.internal_ref is not None:
            children.append(s)
            target = agents[s.internal_ref]
            descriptor = ResourceDescriptor(InternalSubagent, agent=target, **{
                **getattr(target, "subagent_defaults", {}), **s.arguments})
        elif s.imported_agent is not None:
            descriptor = ResourceDescriptor(InternalSubagent, agent=s.imported_agent,
                                            **s.arguments)
        else:
            descriptor = ResourceDescriptor(s.clazz, **s.arguments)
        agent.add_resource(s.name, ResourceType.AGENT, descriptor)
    return set(effective), children, ok


def find_cycles(report: Report, order: Sequence[str],
                children: Callable[[str], Sequence[Subagent]]) -> set[str]:
    """Report each cycle of internal sub-agents once; return the agents on or reaching one.

    Args:
        report: receives one problem per cycle, at the entry closing it.
        order: the agents' names, in document order.
        children: an agent's entries naming agents of the document.

    Returns:
        The agents on a cycle or reaching one.
    """
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []
    on_cycle: set[str] = set()

    def visit(name: str) -> None:
        state[name] = 1
        stack.append(name)
        for s in children(name):
            child = s.internal_ref or ""
            if state.get(child) == 1:
                cycle = [*stack[stack.index(child):], child]
                on_cycle.update(cycle)
                report.add(s.loc, f"internal sub-agent cycle: {' -> '.join(cycle)}")
            elif child not in state:
                visit(child)
        stack.pop()
        state[name] = 2

    for name in order:
        if name not in state:
            visit(name)
    # Agents reaching a cycle cannot compile either; their own entries are fine.
    changed = True
    while changed:
        changed = False
        for name in order:
            if name not in on_cycle and any(s.internal_ref in on_cycle for s in children(name)):
                on_cycle.add(name)
                changed = True
    return on_cycle
