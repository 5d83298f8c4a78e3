"""The YAML loader behind ``flink_agents_py.yaml`` (the format is documented there)."""

from __future__ import annotations

import inspect
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..api import (
    Agent,
    AgentsError,
    AsyncSubagentSetup,
    ChatModelConnection,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    DeferredSubagentSetup,
    Event,
    FunctionTool,
    InputEvent,
    InternalSubagent,
    OutputEvent,
    PlanError,
    Prompt,
    Resource,
    ResourceDescriptor,
    ResourceType,
    SubagentSetup,
    ToolRequestEvent,
    ToolResponseEvent,
    event_class_for,
    import_qualified,
)
from ..api._tools import RESERVED_TOOL_PREFIX
from ..plan import BUILTIN_ACTIONS, AgentPlan

__all__ = ["SCHEMA_PATH", "YamlAgent", "YamlError", "YamlProblem", "load_agent", "load_agents"]

SCHEMA_PATH = Path(__file__).with_name("agents.schema.json")
"""The JSON Schema of the format (for editors: ``# yaml-language-server: $schema=...``)."""

_BUILTIN_EVENTS = (InputEvent, OutputEvent, ChatRequestEvent, ChatResponseEvent,
                   ToolRequestEvent, ToolResponseEvent)
_DEFAULT_SETUP = "flink_agents_py.api.ChatModelSetup"
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_CLASS_PATH = re.compile(rf"{_IDENT}(?:\.{_IDENT})+")
_FUNCTION_PATH = re.compile(rf"{_IDENT}(?:\.{_IDENT})*:{_IDENT}(?:\.{_IDENT})*")
_MERGE_TAG = "tag:yaml.org,2002:merge"

_AGENT_KEYS = ("name", "type", "config", "actions", "chat_model_connections",
               "chat_model_setups", "prompts", "tools", "mcp_servers", "subagents")
_ACTION_KEYS = ("name", "type", "function", "on", "config")
_PROMPT_KEYS = ("name", "type", "text", "role", "messages")
_TOOL_KEYS = ("name", "type", "function", "description")
_INTERNAL_SUBAGENT_KEYS = ("name", "type", "agent", "description", "input_schema")


# --------------------------------------------------------------------------- errors


@dataclass(frozen=True)
class YamlProblem:
    """One problem of a document: where (file, line, path) and what.

    Attributes:
        source: the file name (``<string>`` for text).
        line: 1-based line, ``None`` when the problem has no place in the file.
        path: the culprit's path in the document (``agents[0].actions[1].on``).
        message: what is wrong.
    """

    source: str
    line: int | None
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line is not None else self.source
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class YamlError(AgentsError):
    """A YAML document of agents cannot be loaded.

    Attributes:
        source: the file name (``<string>`` for text).
        problems: every problem, each ``"file:line: path: message"``, in line order.
        details: the same problems as ``YamlProblem`` records.
    """

    def __init__(self, source: str, details: list[YamlProblem]) -> None:
        self.source = source
        self.details = sorted(details, key=lambda p: (p.line is None, p.line or 0))
        self.problems = [str(p) for p in self.details]
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid agents YAML {source} ({len(self.problems)} problem(s)):\n"
                         f"{lines}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.source, self.details))


class YamlAgent(Agent):
    """An ``Agent`` built from a YAML entry.

    Attributes:
        name: the entry's ``name``.
        source: where the entry starts (``file:line``).
    """

    def __init__(self, name: str, source: str) -> None:
        super().__init__()
        self.name = name
        self.source = source

    def __repr__(self) -> str:
        return f"YamlAgent({self.name!r}, source={self.source!r})"


# --------------------------------------------------------------------------- YAML reading


class _Loader(yaml.SafeLoader):
    """A safe loader whose booleans are YAML 1.2's (``on``/``yes``/``no`` stay strings)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


def _read(path_or_text: Any) -> tuple[str, str]:
    """Return ``(text, source name)`` for a path, a file object, bytes or YAML text."""
    if isinstance(path_or_text, os.PathLike):
        p = Path(path_or_text)
        return p.read_text(encoding="utf-8"), str(p)
    if hasattr(path_or_text, "read"):
        data = path_or_text.read()
        text = data.decode("utf-8") if isinstance(data, bytes) else str(data)
        return text, str(getattr(path_or_text, "name", "<stream>"))
    if isinstance(path_or_text, bytes):
        return path_or_text.decode("utf-8"), "<string>"
    if not isinstance(path_or_text, str):
        raise TypeError(f"expected a path, a file object or YAML text, got "
                        f"{type(path_or_text).__name__}")
    s = path_or_text.strip()
    if "\n" not in s and s and (s.endswith((".yaml", ".yml")) or _is_file(s)):
        return Path(s).read_text(encoding="utf-8"), s
    return path_or_text, "<string>"


def _is_file(s: str) -> bool:
    try:
        return Path(s).is_file()
    except (OSError, ValueError):  # a name too long, or with a NUL: YAML text, not a path
        return False


def _line(node: Node | None) -> int | None:
    return node.start_mark.line + 1 if node is not None else None


def _kind(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    tag = node.tag.rsplit(":", 1)[-1]
    if tag == "null":
        return "nothing"
    return repr(node.value) if tag == "str" else f"{node.value} ({tag})"


@dataclass
class _Entry:
    """A mapping entry of the document: its node, path and ``key -> (key node, value node)``."""

    node: MappingNode
    path: str
    keys: dict[str, tuple[Node, Node]]

    def has(self, key: str) -> bool:
        return key in self.keys

    def value_node(self, key: str) -> Node | None:
        pair = self.keys.get(key)
        return pair[1] if pair else None

    def key_node(self, key: str) -> Node | None:
        pair = self.keys.get(key)
        return pair[0] if pair else None

    def at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key


@dataclass
class _SubagentEntry:
    """A parsed ``subagents`` entry (document-level or an agent's own)."""

    name: str
    node: Node
    path: str
    ok: bool
    internal_ref: str | None = None      # an agent of the document
    imported_agent: Any = None           # an Agent class/instance from module:qualname
    clazz: str | None = None             # an external setup class
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass
class _AgentInfo:
    name: str
    index: int
    entry: _Entry
    agent: YamlAgent
    clean: bool = True
    children: list[tuple[str, Node, str]] = field(default_factory=list)  # (agent, node, path)


class _Document:
    """One document being loaded: the loader (for marks and values) and the problems."""

    def __init__(self, text: str, source: str) -> None:
        self.source = source
        self.problems: list[YamlProblem] = []
        self.loader = _Loader(text)

    # -- reporting ----------------------------------------------------------------------
    def error(self, node: Node | None, path: str, message: str) -> None:
        self.problems.append(YamlProblem(self.source, _line(node), path, message))

    def mark(self) -> int:
        return len(self.problems)

    def since(self, mark: int) -> bool:
        """Whether problems were reported since ``mark``."""
        return len(self.problems) > mark

    # -- the node tree ------------------------------------------------------------------
    def compose(self) -> Node | None:
        try:
            return self.loader.get_single_node()
        except yaml.MarkedYAMLError as e:
            mark = e.problem_mark or e.context_mark
            line = mark.line + 1 if mark is not None else None
            what = " ".join(x for x in (e.context, e.problem) if x)
            self.problems.append(YamlProblem(self.source, line, "", f"not valid YAML: {what}"))
        except yaml.YAMLError as e:
            self.problems.append(YamlProblem(self.source, None, "", f"not valid YAML: {e}"))
        return None

    def prepare(self, root: Node) -> None:
        """Report duplicate keys anywhere, then resolve ``<<`` merge keys in place."""
        seen: set[int] = set()

        def walk(node: Node, path: str) -> None:
            if id(node) in seen:
                return
            seen.add(id(node))
            if isinstance(node, MappingNode):
                first: dict[str, Node] = {}
                for k, v in node.value:
                    if isinstance(k, ScalarNode) and k.tag != _MERGE_TAG:
                        if k.value in first:
                            self.error(k, _join(path, k.value),
                                       f"duplicate key {k.value!r} (first at line "
                                       f"{_line(first[k.value])})")
                        else:
                            first[k.value] = k
                    walk(v, _join(path, k.value if isinstance(k, ScalarNode) else "?"))
                try:
                    self.loader.flatten_mapping(node)
                except yaml.MarkedYAMLError as e:
                    self.error(node, path, f"bad merge key: {e.problem}")
            elif isinstance(node, SequenceNode):
                for i, item in enumerate(node.value):
                    walk(item, f"{path}[{i}]")

        walk(root, "")

    def value(self, node: Node, path: str) -> tuple[bool, Any]:
        """Construct the Python value of ``node``; ``(False, None)`` after reporting."""
        try:
            return True, self.loader.construct_object(node, deep=True)
        except yaml.YAMLError as e:
            self.error(node, path, f"cannot read the value: {getattr(e, 'problem', e)}")
            return False, None

    def entry(self, node: Node, path: str, what: str,
              allowed: tuple[str, ...] | None = None,
              required: tuple[str, ...] = ("name",)) -> _Entry | None:
        """Read a mapping entry; check ``type``, required keys and (when given) allowed keys."""
        if not isinstance(node, MappingNode):
            self.error(node, path, f"{what} must be a mapping, got {_kind(node)}")
            return None
        keys: dict[str, tuple[Node, Node]] = {}
        for k, v in node.value:
            if not isinstance(k, ScalarNode) or k.tag == _MERGE_TAG:
                self.error(k, path, f"{what} keys must be plain names")
                continue
            keys[k.value] = (k, v)
        e = _Entry(node, path, keys)
        if allowed is not None:
            for key, (k, _) in keys.items():
                if key not in allowed:
                    self.error(k, e.at(key),
                               f"unknown key {key!r} in {what}; allowed keys: {', '.join(allowed)}")
        for key in required:
            if key not in keys:
                self.error(node, path, f"{what} needs {key!r}")
        self.check_type(e)
        return e

    def check_type(self, e: _Entry) -> None:
        v = e.value_node("type")
        if v is None:
            return
        if not (isinstance(v, ScalarNode) and v.tag.endswith(":str")):
            self.error(v, e.at("type"), f"type must be a string ('python'), got {_kind(v)}")
        elif v.value.lower() != "python":
            self.error(v, e.at("type"),
                       f"type {v.value!r} is not supported: flink-agents-py runs Python "
                       "actions and resources only (cross-language entries such as Apache "
                       "Flink Agents' 'type: java' cannot run here); remove 'type' or set it "
                       "to python")

    def items(self, node: Node | None, path: str) -> Iterator[tuple[int, Node, str]]:
        """The items of a list node (nothing, after reporting, when it is not a list)."""
        if node is None or (isinstance(node, ScalarNode) and node.tag.endswith(":null")):
            return
        if not isinstance(node, SequenceNode):
            self.error(node, path, f"must be a list, got {_kind(node)}")
            return
        for i, item in enumerate(node.value):
            yield i, item, f"{path}[{i}]"

    def string(self, e: _Entry, key: str, required: bool = False) -> str | None:
        """The string value of ``key`` (reported and ``None`` when it is not a string)."""
        v = e.value_node(key)
        if v is None:
            return None  # a missing required key was reported by ``entry``
        if not (isinstance(v, ScalarNode) and v.tag.endswith(":str")) or (
            required and not v.value.strip()
        ):
            self.error(v, e.at(key), f"{key} must be a non-empty string, got {_kind(v)}")
            return None
        return v.value

    def mapping(self, e: _Entry, key: str) -> dict[str, Any] | None:
        """The mapping value of ``key`` with string keys (``{}`` when absent)."""
        v = e.value_node(key)
        if v is None or (isinstance(v, ScalarNode) and v.tag.endswith(":null")):
            return {}
        if not isinstance(v, MappingNode):
            self.error(v, e.at(key), f"{key} must be a mapping, got {_kind(v)}")
            return None
        ok, value = self.value(v, e.at(key))
        if not ok:
            return None
        bad = [k for k in value if not isinstance(k, str)]
        if bad:
            self.error(v, e.at(key), f"{key} keys must be strings, got {bad[0]!r}")
            return None
        return value

    # -- imports ------------------------------------------------------------------------
    def import_class(self, e: _Entry, key: str = "clazz") -> tuple[str, type] | None:
        """Import the dotted class path at ``key``."""
        path = self.string(e, key, required=True)
        if path is None:
            return None
        node = e.value_node(key)
        if not _CLASS_PATH.fullmatch(path):
            hint = " (use dots, not 'module:Class')" if ":" in path else ""
            self.error(node, e.at(key), f"{path!r} is not a fully-qualified dotted class path "
                                        f"like 'pkg.module.Class'{hint}")
            return None
        obj = self._import(path, node, e.at(key))
        if obj is None:
            return None
        if not isinstance(obj, type):
            self.error(node, e.at(key), f"{path!r} is not a class")
            return None
        return path, obj

    def import_function(self, e: _Entry, key: str = "function"
                        ) -> tuple[str, Callable[..., Any]] | None:
        """Import the ``module:qualname`` function at ``key``."""
        path = self.string(e, key, required=True)
        if path is None:
            return None
        node = e.value_node(key)
        if not _FUNCTION_PATH.fullmatch(path):
            self.error(node, e.at(key), f"{path!r} is not a 'module:qualname' function "
                                        "path like 'my_app.module:function'")
            return None
        fn = self._import(path, node, e.at(key))
        if fn is None:
            return None
        if not callable(fn):
            self.error(node, e.at(key), f"{path!r} is not callable")
            return None
        return path, fn

    def _import(self, path: str, node: Node | None, where: str) -> Any:
        try:
            return import_qualified(path)
        except AgentsError as err:
            self.error(node, where, f"cannot import {path!r}: {err}")
        except Exception as err:  # noqa: BLE001 - a module failing at import time
            self.error(node, where, f"importing {path!r} failed: {type(err).__name__}: {err}")
        return None

    # -- resource configuration ---------------------------------------------------------
    def resource_arguments(self, e: _Entry, cls: type[Resource], what: str,
                           own: tuple[str, ...] = ("name", "clazz", "type"),
                           fixed: dict[str, Any] | None = None,
                           ) -> tuple[dict[str, Any], bool]:
        """Every key but ``own``, checked against the fields of ``cls`` and validated.

        Returns:
            ``(arguments, ok)``: the arguments read (unknown keys left out) and whether all
            were valid (every problem reported).
        """
        fields = _field_names(cls)
        forbid = cls.model_config.get("extra") == "forbid"
        args: dict[str, Any] = dict(fixed or {})
        ok = True
        for key in e.keys:
            if key in own:
                continue
            if forbid and key not in fields:
                allowed = ", ".join([*own, *sorted(fields - set(own))])
                self.error(e.key_node(key), e.at(key),
                           f"unknown key {key!r} for {what} {cls.__name__}; allowed keys: "
                           f"{allowed}")
                ok = False
                continue
            good, value = self.value(e.keys[key][1], e.at(key))
            if good:
                args[key] = value
            ok = ok and good
        if inspect.isabstract(cls):
            missing = ", ".join(sorted(getattr(cls, "__abstractmethods__", ())))
            self.error(e.value_node("clazz") or e.node, e.at("clazz"),
                       f"{cls.__name__} is abstract (implement {missing}) and cannot be built")
            return args, False
        try:
            cls.model_validate(args)
        except ValidationError as err:
            for d in err.errors():
                loc = tuple(d.get("loc", ()))
                node = _node_at(e.node, loc)
                self.error(node, e.at(_loc_path(loc)) if loc else e.path,
                           f"{d.get('msg', 'invalid')} (for {what} {cls.__name__})")
            return args, False
        except Exception as err:  # noqa: BLE001 - a class rejecting its arguments otherwise
            self.error(e.node, e.path, f"cannot build {cls.__name__}: {type(err).__name__}: "
                                       f"{err}")
            return args, False
        return args, ok


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _loc_path(loc: tuple[Any, ...]) -> str:
    """``("rules", 0, "when")`` -> ``rules[0].when``."""
    out = ""
    for part in loc:
        out = f"{out}[{part}]" if isinstance(part, int) else _join(out, str(part))
    return out


def _field_names(cls: type[Resource]) -> set[str]:
    names: set[str] = set()
    for name, info in cls.model_fields.items():
        names.add(name)
        if info.alias:
            names.add(info.alias)
    return names


def _node_at(node: Node, loc: tuple[Any, ...]) -> Node:
    """The deepest node of ``node`` along a pydantic error location."""
    for part in loc:
        if isinstance(node, MappingNode):
            nxt = next((v for k, v in node.value
                        if isinstance(k, ScalarNode) and k.value == str(part)), None)
        elif isinstance(node, SequenceNode) and isinstance(part, int) and part < len(node.value):
            nxt = node.value[part]
        else:
            nxt = None
        if nxt is None:
            break
        node = nxt
    return node


# --------------------------------------------------------------------------- loading


def load_agents(path_or_text: str | os.PathLike[str] | bytes | Any) -> dict[str, Agent]:
    """Load every agent of a YAML document (see the module docstring for the format).

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

    Raises:
        YamlError: when the document is invalid, or the agent cannot be chosen.
    """
    agents, (source, used) = _load(path_or_text)
    listed = ", ".join(agents)
    if name is not None:
        if name not in agents:
            raise YamlError(source, [YamlProblem(
                source, None, "", f"no agent named {name!r} (agents: {listed})")])
        return agents[name]
    roots = [n for n in agents if n not in used]
    if len(agents) == 1 or len(roots) == 1:
        return agents[roots[0] if roots else next(iter(agents))]
    raise YamlError(source, [YamlProblem(
        source, None, "", f"the document has {len(agents)} agents ({listed}) and "
                          f"{len(roots)} of them are not sub-agents of another; pass name=")])


def _load(path_or_text: Any) -> tuple[dict[str, Agent], tuple[str, set[str]]]:
    text, source = _read(path_or_text)
    doc = _Document(text, source)
    root = doc.compose()
    if root is None:
        if not doc.problems:
            doc.error(None, "", "the document is empty; it needs 'agents:'")
        raise YamlError(source, doc.problems)
    doc.prepare(root)
    top = doc.entry(root, "", "the document", allowed=("subagents", "agents"),
                    required=("agents",))
    if top is None:
        raise YamlError(source, doc.problems)

    infos, unnamed = _agent_infos(doc, top)
    names = {i.name: i for i in infos}
    shared = _subagent_entries(doc, top.value_node("subagents"), "subagents", names)
    for info in infos + unnamed:  # entries without a usable name are checked, not kept
        _build_agent(doc, info, names, shared)

    in_cycles = _find_cycles(doc, infos, names)
    compiled: dict[str, bool] = {}

    def compile_agent(info: _AgentInfo) -> bool:
        if info.name in compiled:
            return compiled[info.name]
        compiled[info.name] = False  # (no cycles here: those agents are never compiled)
        children_ok = all(compile_agent(names[c]) for c, _, _ in info.children)
        if not (info.clean and children_ok):
            return False
        try:
            AgentPlan.from_agent(info.agent)
        except PlanError as e:
            for p in e.problems:
                doc.error(info.entry.node, info.entry.path,
                          f"agent {info.name!r} does not compile: {p}")
            return False
        compiled[info.name] = True
        return True

    for info in infos:
        if info.name not in in_cycles:
            compile_agent(info)
    if doc.problems:
        raise YamlError(source, doc.problems)
    used = {c for info in infos for c, _, _ in info.children}
    return {i.name: i.agent for i in infos}, (source, used)


def _agent_infos(doc: _Document, top: _Entry) -> tuple[list[_AgentInfo], list[_AgentInfo]]:
    """Read the agents' names and create their (empty) agents, so entries can refer to them.

    Returns:
        ``(named, unnamed)``: the agents, and the entries whose name is missing, invalid or
        taken (built only to report their other problems).
    """
    infos: list[_AgentInfo] = []
    unnamed: list[_AgentInfo] = []
    seen: dict[str, Node] = {}
    node = top.value_node("agents")
    if isinstance(node, SequenceNode) and not node.value:
        doc.error(node, "agents", "the document declares no agent")
    for i, item, path in doc.items(node, "agents"):
        e = doc.entry(item, path, "an agent entry", allowed=_AGENT_KEYS)
        if e is None:
            continue
        name = doc.string(e, "name", required=True)
        where = f"{doc.source}:{_line(e.node)}"
        if name is None or name in seen:
            if name is not None:
                doc.error(e.value_node("name"), e.at("name"),
                          f"duplicate agent name {name!r} (first at line {_line(seen[name])})")
            placeholder = f"<{path}>"
            unnamed.append(_AgentInfo(placeholder, i, e, YamlAgent(placeholder, where)))
            continue
        seen[name] = e.node
        infos.append(_AgentInfo(name, i, e, YamlAgent(name, where)))
    return infos, unnamed


def _unique(doc: _Document, seen: dict[str, Node], name: str, e: _Entry, what: str) -> bool:
    if name in seen:
        doc.error(e.value_node("name"), e.at("name"),
                  f"duplicate {what} name {name!r} (first at line {_line(seen[name])})")
        return False
    seen[name] = e.node
    return True


def _build_agent(doc: _Document, info: _AgentInfo, names: dict[str, _AgentInfo],
                 shared: list[_SubagentEntry]) -> None:
    e, agent = info.entry, info.agent
    start = doc.mark()

    config = doc.mapping(e, "config")
    if config:
        agent.set_config(**config)

    _build_actions(doc, e, agent)
    _build_prompts(doc, e, agent)
    tools = _build_tools(doc, e, agent)
    connections = _build_classed(doc, e, agent, "chat_model_connections", "chat model connection",
                                 ResourceType.CHAT_MODEL_CONNECTION, ChatModelConnection)
    _build_classed(doc, e, agent, "mcp_servers", "MCP server", ResourceType.MCP_SERVER, Resource)

    own = _subagent_entries(doc, e.value_node("subagents"), e.at("subagents"), names)
    effective: dict[str, _SubagentEntry] = {s.name: s for s in own}
    for s in shared:
        if s.name not in effective and s.internal_ref != info.name:
            effective[s.name] = s
    for s in effective.values():
        if not s.ok:
            info.clean = False
            continue
        if s.internal_ref is not None:
            child = names[s.internal_ref]
            info.children.append((child.name, s.node, s.path))
            agent.add_resource(s.name, ResourceType.AGENT, ResourceDescriptor(
                InternalSubagent, agent=child.agent, **s.arguments))
        elif s.imported_agent is not None:
            agent.add_resource(s.name, ResourceType.AGENT, ResourceDescriptor(
                InternalSubagent, agent=s.imported_agent, **s.arguments))
        else:
            agent.add_resource(s.name, ResourceType.AGENT,
                               ResourceDescriptor(s.clazz, **s.arguments))

    _build_setups(doc, e, agent, connections, tools, set(effective))
    if doc.since(start):
        info.clean = False


def _build_actions(doc: _Document, agent_entry: _Entry, agent: Agent) -> None:
    parsed: list[tuple[_Entry, str | None, Callable[..., Any] | None, dict[str, Any] | None]] = []
    seen: dict[str, Node] = {}
    for _, item, path in doc.items(agent_entry.value_node("actions"),
                                   agent_entry.at("actions")):
        e = doc.entry(item, path, "an action entry", allowed=_ACTION_KEYS,
                      required=("name", "function", "on"))
        if e is None:
            continue
        name = doc.string(e, "name", required=True)
        if name is not None and not _unique(doc, seen, name, e, "action"):
            name = None
        if name is not None and name in BUILTIN_ACTIONS:
            doc.error(e.value_node("name"), e.at("name"),
                      f"{name!r} is the name of a built-in action; rename the action")
            name = None
        fn: Callable[..., Any] | None = None
        imported = doc.import_function(e) if e.has("function") else None
        if imported is not None:
            if _takes_event_and_ctx(imported[1]):
                fn = imported[1]
            else:
                doc.error(e.value_node("function"), e.at("function"),
                          f"{imported[0]!r} must take (event, ctx)")
        parsed.append((e, name, fn, doc.mapping(e, "config")))
    # Triggers last: importing the actions' modules registers their Event subclasses.
    for e, name, fn, config in parsed:
        triggers = _triggers(doc, e)
        if triggers is not None and name is not None and fn is not None and config is not None:
            agent.add_action(name, triggers, fn, config=config)


def _takes_event_and_ctx(fn: Callable[..., Any]) -> bool:
    try:
        inspect.signature(fn).bind(object(), object())
    except (TypeError, ValueError):
        return False
    return True


def _triggers(doc: _Document, e: _Entry) -> list[str] | None:
    node = e.value_node("on")
    if node is None:
        return None
    items = [(node, e.at("on"))] if isinstance(node, ScalarNode) else [
        (item, path) for _, item, path in doc.items(node, e.at("on"))]
    if not isinstance(node, (ScalarNode, SequenceNode)):
        return None
    if not items:
        doc.error(node, e.at("on"), "an action needs at least one trigger event type")
        return None
    out: list[str] = []
    for item, path in items:
        if not (isinstance(item, ScalarNode) and item.tag.endswith(":str") and item.value):
            doc.error(item, path, f"an event type must be a name, got {_kind(item)}")
            continue
        t = _event_type(item.value)
        if t is None:
            builtins = ", ".join(c.EVENT_TYPE or "" for c in _BUILTIN_EVENTS)
            doc.error(item, path,
                      f"{item.value!r} names no known event type; use a built-in ({builtins}), "
                      "the EVENT_TYPE of an Event subclass imported by an action's module, or "
                      "an Event subclass's dotted class path")
            continue
        out.append(t)
    return out if len(out) == len(items) else None


def _event_type(name: str) -> str | None:
    if event_class_for(name) is not Event:
        return name
    if _CLASS_PATH.fullmatch(name) or _FUNCTION_PATH.fullmatch(name):
        try:
            cls = import_qualified(name)
        except Exception:  # noqa: BLE001 - reported by the caller as an unknown type
            return None
        if isinstance(cls, type) and issubclass(cls, Event) and cls is not Event:
            return cls.EVENT_TYPE or cls.__qualname__
    return None


def _build_prompts(doc: _Document, agent_entry: _Entry, agent: Agent) -> None:
    seen: dict[str, Node] = {}
    for _, item, path in doc.items(agent_entry.value_node("prompts"),
                                   agent_entry.at("prompts")):
        e = doc.entry(item, path, "a prompt entry", allowed=_PROMPT_KEYS)
        if e is None:
            continue
        name = doc.string(e, "name", required=True)
        ok = name is not None and _unique(doc, seen, name, e, "prompt")
        if e.has("text") == e.has("messages"):
            doc.error(e.node, e.path, "a prompt needs exactly one of 'text' or 'messages'")
            continue
        if e.has("role") and not e.has("text"):
            doc.error(e.key_node("role"), e.at("role"), "'role' goes with 'text' only")
            continue
        args: dict[str, Any] = {}
        for key, field_name in (("text", "template"), ("role", "role"), ("messages", "messages")):
            if e.has(key):
                good, value = doc.value(e.keys[key][1], e.at(key))
                ok = ok and good
                args[field_name] = value
        if not ok:
            continue
        try:
            Prompt.model_validate(args)
        except ValidationError as err:
            renamed = {"template": "text"}
            for d in err.errors():
                loc = tuple(renamed.get(str(p), p) for p in d.get("loc", ()))
                doc.error(_node_at(e.node, loc), e.at(_loc_path(loc)),
                          d.get("msg", "invalid"))
            continue
        assert name is not None
        agent.add_resource(name, ResourceType.PROMPT, ResourceDescriptor(Prompt, **args))


def _build_tools(doc: _Document, agent_entry: _Entry, agent: Agent) -> set[str]:
    seen: dict[str, Node] = {}
    for _, item, path in doc.items(agent_entry.value_node("tools"), agent_entry.at("tools")):
        e = doc.entry(item, path, "a tool entry", allowed=_TOOL_KEYS,
                      required=("name", "function"))
        if e is None:
            continue
        name = doc.string(e, "name", required=True)
        ok = name is not None and _unique(doc, seen, name, e, "tool")
        if name is not None and name.startswith(RESERVED_TOOL_PREFIX):
            doc.error(e.value_node("name"), e.at("name"),
                      f"tool {name!r} starts with the reserved prefix {RESERVED_TOOL_PREFIX!r} "
                      "(it names sub-agent callables); rename the tool")
            ok = False
        description = doc.string(e, "description") if e.has("description") else None
        if e.has("description") and description is None:
            ok = False
        imported = doc.import_function(e) if e.has("function") else None
        if not ok or imported is None or name is None:
            continue
        path_, fn = imported
        try:
            inst = FunctionTool.from_function(fn, name=name)
            _ = inst.metadata  # the argument schema, built from the signature
        except Exception as err:  # noqa: BLE001 - a signature pydantic cannot describe
            doc.error(e.value_node("function"), e.at("function"),
                      f"cannot describe {path_!r} as a tool: {type(err).__name__}: {err}")
            continue
        agent.add_resource(name, ResourceType.TOOL, ResourceDescriptor(
            FunctionTool, func=path_, name=name,
            description=description if description is not None else inst.description))
    return set(seen)


def _build_classed(doc: _Document, agent_entry: _Entry, agent: Agent, key: str, what: str,
                   rtype: ResourceType, base: type[Resource]) -> set[str]:
    """Entries of ``name`` + ``clazz`` + configuration (connections, MCP servers)."""
    seen: dict[str, Node] = {}
    for _, item, path in doc.items(agent_entry.value_node(key), agent_entry.at(key)):
        e = doc.entry(item, path, f"a {what} entry", required=("name", "clazz"))
        if e is None:
            continue
        name = doc.string(e, "name", required=True)
        ok = name is not None and _unique(doc, seen, name, e, what)
        imported = doc.import_class(e) if e.has("clazz") else None
        if imported is None:
            continue
        clazz, cls = imported
        if not _is_resource_of(cls, base, rtype):
            doc.error(e.value_node("clazz"), e.at("clazz"),
                      f"{clazz} is not a {base.__name__} subclass"
                      + (f" for {rtype.value} resources" if base is Resource else ""))
            continue
        args, valid = doc.resource_arguments(e, cls, what)
        if ok and valid and name is not None:
            agent.add_resource(name, rtype, ResourceDescriptor(clazz, **args))
    return set(seen)


def _is_resource_of(cls: type, base: type[Resource], rtype: ResourceType) -> bool:
    if not issubclass(cls, base):
        return False
    declared = getattr(cls, "RESOURCE_TYPE", None)
    return declared is None or declared == rtype


def _build_setups(doc: _Document, agent_entry: _Entry, agent: Agent, connections: set[str],
                  tools: set[str], subagents: set[str]) -> None:
    seen: dict[str, Node] = {}
    for _, item, path in doc.items(agent_entry.value_node("chat_model_setups"),
                                   agent_entry.at("chat_model_setups")):
        e = doc.entry(item, path, "a chat model setup entry")
        if e is None:
            continue
        name = doc.string(e, "name", required=True)
        ok = name is not None and _unique(doc, seen, name, e, "chat model setup")
        if e.has("clazz"):
            imported = doc.import_class(e)
        else:
            imported = (_DEFAULT_SETUP, ChatModelSetup)
        if imported is None:
            continue
        clazz, cls = imported
        if not issubclass(cls, ChatModelSetup):
            doc.error(e.value_node("clazz"), e.at("clazz"),
                      f"{clazz} is not a ChatModelSetup subclass")
            continue
        own: tuple[str, ...] = ("name", "clazz", "type")
        if e.has("subagents") and "subagents" not in cls.model_fields:
            doc.error(e.key_node("subagents"), e.at("subagents"),
                      f"{cls.__name__} declares no 'subagents' field, so a chat model cannot "
                      "delegate to sub-agents yet; remove 'subagents' (actions can call "
                      "sub-agents with ctx.submit_subagent)")
            own = (*own, "subagents")
            ok = False
        args, valid = doc.resource_arguments(e, cls, "chat model setup", own=own)
        ok = _check_setup_references(doc, e, args, connections, tools, subagents) and ok
        if ok and valid and name is not None:
            agent.add_resource(name, ResourceType.CHAT_MODEL, ResourceDescriptor(clazz, **args))


def _check_setup_references(doc: _Document, e: _Entry, args: dict[str, Any],
                            connections: set[str], tools: set[str], subagents: set[str]) -> bool:
    ok = True
    conn = args.get("connection")
    if isinstance(conn, str) and conn not in connections:
        doc.error(e.value_node("connection"), e.at("connection"),
                  f"names connection {conn!r}, which this agent does not declare "
                  f"(chat_model_connections: {', '.join(sorted(connections)) or 'none'})")
        ok = False
    for key, known, what in (("tools", tools, "tool"), ("subagents", subagents, "sub-agent")):
        names = args.get(key)
        if not isinstance(names, list):
            continue
        for i, n in enumerate(names):
            if n not in known:
                doc.error(_node_at(e.node, (key, i)), f"{e.at(key)}[{i}]",
                          f"names {what} {n!r}, which this agent does not declare "
                          f"({key}: {', '.join(sorted(known)) or 'none'})")
                ok = False
    return ok


def _subagent_entries(doc: _Document, node: Node | None, path: str,
                      agents: dict[str, _AgentInfo]) -> list[_SubagentEntry]:
    out: list[_SubagentEntry] = []
    seen: dict[str, Node] = {}
    for _, item, ipath in doc.items(node, path):
        start = doc.mark()
        e = doc.entry(item, ipath, "a sub-agent entry")
        if e is None:
            continue
        name = doc.string(e, "name", required=True)
        if name is not None:
            _unique(doc, seen, name, e, "sub-agent")
        s = _SubagentEntry(name=name or "", node=e.node, path=ipath, ok=False)
        args: dict[str, Any] = {}
        if e.has("description"):
            description = doc.string(e, "description")
            if description is not None:
                args["description"] = description
        if e.has("input_schema"):
            schema = _input_schema(doc, e)
            if schema is not None:
                args["input_schema"] = schema
        if e.has("agent") and e.has("clazz"):
            doc.error(e.node, ipath, "a sub-agent has either 'agent' (internal) or 'clazz' "
                                     "(external), not both")
        elif e.has("agent"):
            for key, (k, _) in e.keys.items():
                if key not in _INTERNAL_SUBAGENT_KEYS:
                    doc.error(k, e.at(key), f"unknown key {key!r} in an internal sub-agent "
                                            f"entry; allowed keys: "
                                            f"{', '.join(_INTERNAL_SUBAGENT_KEYS)}")
            _internal_target(doc, e, s, agents)
        elif e.has("clazz"):
            _external_setup(doc, e, s, args)
        else:
            doc.error(e.node, ipath, "a sub-agent needs 'agent' (an agent of this document) "
                                     "or 'clazz' (an external setup class)")
        s.arguments = args
        s.ok = not doc.since(start)
        out.append(s)
    return out


def _input_schema(doc: _Document, e: _Entry) -> str | None:
    node = e.value_node("input_schema")
    assert node is not None
    ok, value = doc.value(node, e.at("input_schema"))
    if not ok:
        return None
    if isinstance(value, dict):
        return json.dumps(value)
    if not isinstance(value, str) or not value.strip():
        doc.error(node, e.at("input_schema"), "input_schema must be JSON Schema text or a "
                                              f"mapping, got {_kind(node)}")
        return None
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as err:
        doc.error(node, e.at("input_schema"), f"input_schema is not valid JSON: {err}")
        return None
    if not isinstance(parsed, dict):
        doc.error(node, e.at("input_schema"), "input_schema must be a JSON Schema object")
        return None
    return value


def _internal_target(doc: _Document, e: _Entry, s: _SubagentEntry,
                     agents: dict[str, _AgentInfo]) -> None:
    ref = doc.string(e, "agent", required=True)
    if ref is None:
        return
    node = e.value_node("agent")
    if ref in agents:
        s.internal_ref = ref
        return
    if ":" in ref and _FUNCTION_PATH.fullmatch(ref):
        obj = doc._import(ref, node, e.at("agent"))
        if obj is None:
            return
        if isinstance(obj, type) and issubclass(obj, Agent):
            obj = obj()
        if not isinstance(obj, Agent):
            doc.error(node, e.at("agent"), f"{ref!r} is not an Agent class or instance")
            return
        s.imported_agent = obj
        return
    doc.error(node, e.at("agent"),
              f"{ref!r} names no agent of this document (agents: "
              f"{', '.join(agents) or 'none'}); name one, or an Agent by 'module:qualname'")


def _external_setup(doc: _Document, e: _Entry, s: _SubagentEntry, args: dict[str, Any]) -> None:
    imported = doc.import_class(e)
    if imported is None:
        return
    clazz, cls = imported
    where = e.value_node("clazz")
    if not issubclass(cls, SubagentSetup):
        doc.error(where, e.at("clazz"), f"{clazz} is not a SubagentSetup subclass (a "
                                        "DeferredSubagentSetup or AsyncSubagentSetup)")
        return
    if issubclass(cls, InternalSubagent):
        doc.error(where, e.at("clazz"), "an internal sub-agent is declared with 'agent:' "
                                        "naming an agent of this document, not by 'clazz'")
        return
    if not issubclass(cls, (DeferredSubagentSetup, AsyncSubagentSetup)):
        doc.error(where, e.at("clazz"), f"{clazz} is neither a DeferredSubagentSetup nor an "
                                        "AsyncSubagentSetup")
        return
    checked, valid = doc.resource_arguments(e, cls, "sub-agent setup",
                                            own=("name", "clazz", "type", "description",
                                                 "input_schema"),
                                            fixed=args)
    if valid:
        args.update(checked)
        s.clazz = clazz


def _find_cycles(doc: _Document, infos: list[_AgentInfo],
                 names: dict[str, _AgentInfo]) -> set[str]:
    """Report each cycle of internal sub-agents once; return the agents on a cycle."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []
    on_cycle: set[str] = set()

    def visit(name: str) -> None:
        state[name] = 1
        stack.append(name)
        for child, node, path in names[name].children:
            if state.get(child) == 1:
                cycle = stack[stack.index(child):] + [child]
                on_cycle.update(cycle)
                doc.error(node, path, f"internal sub-agent cycle: {' -> '.join(cycle)}")
            elif child not in state:
                visit(child)
        stack.pop()
        state[name] = 2

    for info in infos:
        if info.name not in state:
            visit(info.name)
    # Agents reaching a cycle cannot compile either; their own entries are fine.
    changed = True
    while changed:
        changed = False
        for info in infos:
            if info.name not in on_cycle and any(c in on_cycle for c, _, _ in info.children):
                on_cycle.add(info.name)
                changed = True
    return on_cycle
