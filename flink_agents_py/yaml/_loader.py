"""Loading a document of agents: read, validate with the models, build, compile.

1. ``_nodes.parse``: YAML text to plain data, with every place's line.
2. ``_validate.validate_document``: the data against ``_specs.DocumentSpec``.
3. ``_build`` and ``_subagents``: imports, classes, references, cycles; the agents.
4. ``AgentPlan.from_agent`` for each agent whose entry is clean.

Every problem of every step is collected into one ``YamlError``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..api import Agent, ChatModelConnection, PlanError, Resource, ResourceType
from ..api.internal import clip
from ..plan import AgentPlan
from ._build import add_actions, add_classed, add_prompts, add_setups, add_tools, unique
from ._errors import MESSAGE_MAX_CHARS, Loc, YamlError, YamlProblem, quoted
from ._nodes import Report, original_loc, parse, read_source
from ._nodes import _Loader as _Loader  # the YAML 1.2 loader: tests read YAML as we do
from ._react import add_react, react_subagent_defaults
from ._shared import share_entries
from ._specs import AgentSpec
from ._subagents import Subagent, add_subagents, find_cycles, read_subagents
from ._validate import validate_document

__all__ = ["YamlAgent", "load_agent", "load_agents"]


class YamlAgent(Agent):
    """An ``Agent`` built from a YAML entry.

    Attributes:
        name: the entry's ``name``.
        source: where the entry starts (``file:line``).
    """

    def __init__(self, name: str, source: str, subagent_defaults: dict[str, str] | None = None
                 ) -> None:
        super().__init__()
        self.name = name
        self.source = source
        self.subagent_defaults = dict(subagent_defaults or {})
        """``description`` / ``input_schema`` it has as a sub-agent unless the entry says."""

    def __repr__(self) -> str:
        return f"YamlAgent({self.name!r}, source={self.source!r})"


@dataclass
class _AgentInfo:
    name: str
    loc: Loc
    spec: AgentSpec
    agent: YamlAgent
    clean: bool = True
    children: list[Subagent] = field(default_factory=list)


def load_agents(path_or_text: str | os.PathLike[str] | bytes | Any) -> dict[str, Agent]:
    """Load every agent of a YAML document (see ``flink_agents_py.yaml`` for the format).

    Args:
        path_or_text: a path (``Path``, or a one-line string ending in ``.yaml``/``.yml`` or
            naming an existing file), an open file, or the YAML text itself.

    Returns:
        The agents by name, in document order (each a ``YamlAgent``).

    Raises:
        YamlError: listing every problem, each with the file, line and path.
        OSError: when the file cannot be read.
    """
    agents, _ = _load(path_or_text)
    return agents


def load_agent(path_or_text: str | os.PathLike[str] | bytes | Any,
               name: str | None = None) -> Agent:
    """Load one agent of a YAML document.

    Args:
        path_or_text: as for ``load_agents``.
        name: the agent's name. ``None``: the document's only agent or, when there are
            several, the only one no other agent uses as an internal sub-agent.

    Returns:
        The agent (a ``YamlAgent``).

    Raises:
        YamlError: when the document is invalid, or the agent cannot be chosen.
        OSError: when the file cannot be read.
    """
    agents, (source, used) = _load(path_or_text)
    listed = clip(", ".join(agents), MESSAGE_MAX_CHARS // 2)
    if name is not None:
        if name not in agents:
            raise YamlError(source, [YamlProblem(
                source, None, "", f"no agent named {quoted(name)} (agents: {listed})")])
        return agents[name]
    roots = [n for n in agents if n not in used]
    if len(agents) == 1 or len(roots) == 1:
        return agents[roots[0] if roots else next(iter(agents))]
    raise YamlError(source, [YamlProblem(
        source, None, "", f"the document has {len(agents)} agents ({listed}) and "
                          f"{len(roots)} of them are not sub-agents of another; pass name=")])


def _load(path_or_text: Any) -> tuple[dict[str, Agent], tuple[str, set[str]]]:
    text, source = read_source(path_or_text)
    report = Report(source)
    parsed = parse(text, report)
    if parsed.data is None:
        if not report.problems:
            report.add((), "the document is empty; it needs 'agents:'", translated=True)
        raise report.error()
    share_entries(parsed.data, report)
    validated = validate_document(parsed, report)
    if validated is None:
        raise report.error()
    report.translate = lambda loc: original_loc(parsed.data, loc)
    doc = validated.spec

    infos, unnamed = _agent_infos(report, doc.agents)
    names = {i.name: i for i in infos}
    agents = {n: i.agent for n, i in names.items()}
    shared = read_subagents(report, doc.subagents, ("subagents",), names)
    shared_ok = not report.under(("subagents",))
    for info in infos + unnamed:  # entries without a usable name are checked, not kept
        start = report.count()
        _build_agent(report, info, shared, agents, validated.dropped)
        info.clean = shared_ok and report.count() == start and not report.under(info.loc)

    in_cycles = find_cycles(report, list(names), lambda n: names[n].children)
    compiled: dict[str, bool] = {}

    def compile_agent(info: _AgentInfo) -> bool:
        if info.name in compiled:
            return compiled[info.name]
        compiled[info.name] = False  # (no cycles here: those agents are never compiled)
        children_ok = all(compile_agent(names[s.internal_ref or ""]) for s in info.children)
        if not (info.clean and children_ok):
            return False
        try:
            AgentPlan.from_agent(info.agent)
        except PlanError as e:
            for p in e.problems:
                report.add(info.loc, f"agent {quoted(info.name)} does not compile: {p}")
            return False
        compiled[info.name] = True
        return True

    for info in infos:
        if info.name not in in_cycles:
            compile_agent(info)
    if report.problems:
        raise report.error()
    used = {s.internal_ref or "" for info in infos for s in info.children}
    return {i.name: i.agent for i in infos}, (source, used)


def _agent_infos(report: Report, specs: tuple[AgentSpec, ...]
                 ) -> tuple[list[_AgentInfo], list[_AgentInfo]]:
    """Create the (empty) agents first, so entries can refer to them.

    Returns:
        ``(named, unnamed)``: the agents, and the entries whose name is bad or taken (built
        only to report their other problems).
    """
    infos: list[_AgentInfo] = []
    unnamed: list[_AgentInfo] = []
    seen: dict[str, Loc] = {}
    for i, spec in enumerate(specs):
        loc: Loc = ("agents", i)
        where = f"{report.source}:{report.index.line(report.translate(loc))}"
        if unique(report, seen, spec.name, loc, "agent"):
            infos.append(_AgentInfo(spec.name, loc, spec, YamlAgent(
                spec.name, where, react_subagent_defaults(spec))))
        else:
            placeholder = f"<agents[{report.translate(loc)[1]}]>"
            unnamed.append(_AgentInfo(placeholder, loc, spec, YamlAgent(placeholder, where)))
    return infos, unnamed


def _build_agent(report: Report, info: _AgentInfo, shared: list[Subagent],
                 agents: Mapping[str, Agent], dropped: dict[Loc, set[str]]) -> None:
    spec, loc, agent = info.spec, info.loc, info.agent
    if spec.config:
        agent.set_config(**spec.config)

    def declared(key: str) -> set[str]:  # names of entries dropped for their problems
        return dropped.get(report.translate((*loc, key)), set())

    add_actions(report, spec, loc, agent)
    add_prompts(report, spec, loc, agent)
    tools = add_tools(report, spec, loc, agent) | declared("tools")
    connections = add_classed(
        report, spec.chat_model_connections, (*loc, "chat_model_connections"), agent,
        "chat model connection", ResourceType.CHAT_MODEL_CONNECTION, ChatModelConnection,
    ) | declared("chat_model_connections")
    servers = add_classed(report, spec.mcp_servers, (*loc, "mcp_servers"), agent,
                          "MCP server", ResourceType.MCP_SERVER, Resource)
    own = read_subagents(report, spec.subagents, (*loc, "subagents"), agents)
    subagents, info.children, _ = add_subagents(agent, info.name, own, shared, agents)
    subagents |= declared("subagents") | dropped.get(("subagents",), set())
    # a tool an MCP server offers is known only when the plan lists the server: leave the
    # tool names a setup gives to the plan build then, which reports the unknown ones
    add_setups(report, spec, loc, agent, connections, None if servers else tools, subagents)
    add_react(report, spec, loc, agent)
