"""What the models cannot check, entry by entry: imports, class kinds and fields, names.

Each ``add_*`` function reads one kind of entry of a valid ``AgentSpec``, reports every
problem at the entry's location (``Report`` maps it to its line) and adds what is sound to the
agent. Locations are those of the validated (possibly pruned) data.
"""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError

from ..api import (
    Agent,
    AgentsError,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    Event,
    FunctionTool,
    InputEvent,
    OutputEvent,
    Prompt,
    Resource,
    ResourceDescriptor,
    ResourceType,
    ToolRequestEvent,
    ToolResponseEvent,
)
from ..api.internal import (
    EVENT_TYPES,
    RESERVED_TOOL_PREFIX,
    described,
    event_class_for,
    flink_agents_class,
    import_qualified,
    unknown_key_message,
)
from ..plan import BUILTIN_ACTIONS, signature_problem
from ._errors import Loc, quoted, unknown_key
from ._nodes import Report
from ._specs import (
    CLASS_PATH,
    FUNCTION_PATH,
    ActionSpec,
    AgentSpec,
    ChatModelSetupSpec,
    PromptSpec,
    ResourceSpec,
    ToolSpec,
    field_keys,
)

__all__ = ["add_actions", "add_classed", "add_prompts", "add_setups", "add_tools",
           "import_object", "resource_arguments", "unique"]

_BUILTIN_EVENTS = (InputEvent, OutputEvent, ChatRequestEvent, ChatResponseEvent,
                   ToolRequestEvent, ToolResponseEvent)


def unique(report: Report, seen: dict[str, Loc], name: str, loc: Loc, what: str) -> bool:
    """Whether ``name`` is new among ``seen`` (reported at ``loc`` + ``name`` when not)."""
    if name.startswith("<"):
        return False  # a placeholder for a bad name: reported already
    if name in seen:
        first = report.index.line(report.translate(seen[name]))
        report.add((*loc, "name"), f"duplicate {what} name {quoted(name)} (first at line {first})")
        return False
    seen[name] = loc
    return True


# --------------------------------------------------------------------------- imports


def import_object(report: Report, path: str, loc: Loc) -> Any:
    """Import ``path`` (``module:qualname`` or ``pkg.module.Class``); ``None`` after reporting."""
    try:
        return import_qualified(path)
    except AgentsError as err:
        report.add(loc, f"cannot import {quoted(path)}: {err}")
    except Exception as err:  # noqa: BLE001 - a module failing at import time
        report.add(loc, f"importing {quoted(path)} failed: {described(err)}")
    return None


def _import_class(report: Report, path: str, loc: Loc) -> type | None:
    # Apache Flink Agents' path of one of its classes: the class standing for it here
    obj = import_object(report, flink_agents_class(path), loc)
    if obj is not None and not isinstance(obj, type):
        report.add(loc, f"{quoted(path)} is not a class")
        return None
    return obj


def _import_function(report: Report, path: str, loc: Loc) -> Callable[..., Any] | None:
    fn = import_object(report, path, loc)
    if fn is None:
        return None
    if not callable(fn):
        report.add(loc, f"{quoted(path)} is not callable")
        return None
    return fn


# --------------------------------------------------------------------------- actions


def add_actions(report: Report, spec: AgentSpec, loc: Loc, agent: Agent) -> None:
    """Add the agent's sound actions.

    Every action's function is imported before any trigger event type is resolved: the
    imports register the actions' ``Event`` subclasses.
    """
    parsed: list[tuple[ActionSpec, Loc, str | None, Callable[..., Any] | None]] = []
    seen: dict[str, Loc] = {}
    for i, action in enumerate(spec.actions):
        at = (*loc, "actions", i)
        name: str | None = action.name
        if not unique(report, seen, action.name, at, "action"):
            name = None
        elif action.name in BUILTIN_ACTIONS:
            report.add((*at, "name"),
                       f"{quoted(action.name)} is the name of a built-in action; rename the action")
            name = None
        fn = _import_function(report, action.function, (*at, "function"))
        if isinstance(fn, type):  # an Event class takes (*args): it would bind (event, ctx)
            report.add((*at, "function"), f"{quoted(action.function)} is a class, not a "
                       "function: name the function taking (event, ctx) that the action runs")
            fn = None
        if fn is not None and (wrong := signature_problem(fn)) is not None:
            report.add((*at, "function"),
                       f"{quoted(action.function)} must take (event, ctx), {wrong}")
            fn = None
        parsed.append((action, at, name, fn))
    for action, at, name, fn in parsed:
        triggers = _triggers(report, action.on, (*at, _used_key(report, at, "on")))
        if triggers is not None and name is not None and fn is not None:
            agent.add_action(name, triggers, fn, config=dict(action.config))


def _used_key(report: Report, at: Loc, field: str) -> str:
    """The key the action entry at ``at`` spells ``field`` with (``on`` or ``listen_to``)."""
    keys = field_keys(field, ActionSpec.model_fields[field])
    return next((k for k in keys if report.translate((*at, k)) in report.index.values), field)


def _triggers(report: Report, names: Sequence[str], loc: Loc) -> list[str] | None:
    out: list[str] = []
    for i, name in enumerate(names):
        t = _event_type(name)
        if t is None:
            near = _near_event_name(name)
            if near is None and not CLASS_PATH.fullmatch(name) \
                    and not FUNCTION_PATH.fullmatch(name):
                out.append(name)  # a type of the program's own, sent as Event(type=name)
                continue
            builtins = ", ".join(c.EVENT_TYPE or "" for c in _BUILTIN_EVENTS)
            said = f"close to {quoted(near)}; fix the name, or use" if near else "use"
            report.add((*loc, i),
                       f"{quoted(name)} names no known event type; {said} a built-in "
                       f"({builtins}), the EVENT_TYPE of an Event subclass imported by an "
                       "action's module, an Event subclass's dotted class path, or a type "
                       "of your own sent as Event(type=...) (not a dotted path)")
            continue
        out.append(t)
    return out if len(out) == len(names) else None


def _near_event_name(name: str) -> str | None:
    """The known event name ``name`` is likely a misspelling of, if any.

    A name that is no known event type is a type of the program's own (Apache Flink Agents'
    YAML loader passes an unknown ``trigger_conditions`` entry through as the type), unless
    it is within a letter or two of a registered type or of a built-in's short name
    (``chat_respons``, ``InputEvnt``): that is taken for a typo.

    Returns:
        The name it is close to, or ``None``.
    """
    known = {form for t in EVENT_TYPES for form in (t, t.removesuffix("Event"))}
    known.update(_snake(c.EVENT_TYPE or "") for c in _BUILTIN_EVENTS)
    near = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.85)
    return near[0] if near else None


def _snake(event_type: str) -> str:
    """``ChatResponseEvent`` -> ``chat_response`` (Flink Agents' short YAML names)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event_type.removesuffix("Event")).lower()


def _event_type(name: str) -> str | None:
    if event_class_for(name) is not Event:
        return name
    short = _short_event_type(name)
    if short is not None:
        return short
    if CLASS_PATH.fullmatch(name) or FUNCTION_PATH.fullmatch(name):
        try:
            cls = import_qualified(name)
        except Exception:  # noqa: BLE001 - reported by the caller as an unknown type
            return None
        if isinstance(cls, type) and issubclass(cls, Event) and cls is not Event:
            return cls.EVENT_TYPE or cls.__qualname__
    return None


def _short_event_type(name: str) -> str | None:
    """The event type a Flink Agents name of an event stands for.

    Args:
        name: ``chat_response`` (snake case, without "Event") or a ``flink_agents.`` class
            path, of a registered type such as ``ChatResponseEvent``.

    Returns:
        The event type, or ``None`` when ``name`` is neither.
    """
    if name.startswith("flink_agents.") and "." in name:
        last = name.rsplit(".", 1)[1]
        return last if event_class_for(last) is not Event else None
    if not _SNAKE.fullmatch(name):
        return None
    camel = "".join(part.capitalize() for part in name.removesuffix("_event").split("_"))
    return camel + "Event" if event_class_for(camel + "Event") is not Event else None


_SNAKE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")


# --------------------------------------------------------------------------- prompts, tools


def add_prompts(report: Report, spec: AgentSpec, loc: Loc, agent: Agent) -> None:
    """Add each prompt (its form was checked by ``PromptSpec``)."""
    seen: dict[str, Loc] = {}
    for i, prompt in enumerate(spec.prompts):
        at = (*loc, "prompts", i)
        if not unique(report, seen, prompt.name, at, "prompt"):
            continue
        args = _prompt_arguments(prompt)
        try:
            Prompt.model_validate(args)
        except ValidationError as err:
            for d in err.errors():
                report.add((*at, *("text" if p == "template" else p for p in d["loc"])),
                           d["msg"])
            continue
        agent.add_resource(prompt.name, ResourceType.PROMPT, ResourceDescriptor(Prompt, **args))


def _prompt_arguments(prompt: PromptSpec) -> dict[str, Any]:
    if prompt.messages is not None:
        return {"messages": [m.model_dump(mode="json", exclude_unset=True)
                             for m in prompt.messages]}
    args: dict[str, Any] = {"template": prompt.text}
    if prompt.role is not None:
        args["role"] = prompt.role.value
    return args


def add_tools(report: Report, spec: AgentSpec, loc: Loc, agent: Agent) -> set[str]:
    """Add each function tool; returns the tool names declared (sound or not)."""
    seen: dict[str, Loc] = {}
    for i, tool in enumerate(spec.tools):
        at = (*loc, "tools", i)
        ok = unique(report, seen, tool.name, at, "tool")
        if tool.name.startswith(RESERVED_TOOL_PREFIX):
            report.add((*at, "name"),
                       f"tool {quoted(tool.name)} starts with the reserved prefix "
                       f"{RESERVED_TOOL_PREFIX!r} (it names sub-agent callables); rename the tool")
            ok = False
        fn = _import_function(report, tool.function, (*at, "function"))
        if not ok or fn is None:
            continue
        description = _tool_description(report, tool, fn, at)
        if description is not None:
            agent.add_resource(tool.name, ResourceType.TOOL, ResourceDescriptor(
                FunctionTool, func=tool.function, name=tool.name, description=description,
                requires_approval=tool.requires_approval,
                approval_timeout_s=tool.approval_timeout_s,
                injected_args=_injected(report, tool, fn, at)))
    return set(seen)


def _injected(report: Report, tool: ToolSpec, fn: Callable[..., Any],
              at: Loc) -> dict[str, dict[str, str]]:
    """A tool's ``injected_args`` as ``FunctionTool`` takes them; a name ``fn`` lacks reported."""
    params = inspect.signature(fn).parameters
    open_ended = any(p.kind is p.VAR_KEYWORD for p in params.values())
    for name in tool.injected_args:
        if name not in params and not open_ended:
            report.add((*at, "injected_args", name),
                       f"{quoted(name)} is not a parameter of {quoted(tool.function)}; "
                       f"its parameters: {', '.join(params) or 'none'}")
    return {name: {"source": arg.source, "key": arg.key or name}
            for name, arg in tool.injected_args.items()}


def _tool_description(report: Report, tool: ToolSpec, fn: Callable[..., Any],
                      at: Loc) -> str | None:
    try:
        inst = FunctionTool.from_function(fn, name=tool.name)
        _ = inst.metadata  # the argument schema, built from the signature
    except Exception as err:  # noqa: BLE001 - a signature pydantic cannot describe
        report.add((*at, "function"), f"cannot describe {quoted(tool.function)} as a tool: "
                                      f"{described(err)}")
        return None
    return tool.description if tool.description is not None else inst.description


# --------------------------------------------------------------------------- classed resources


def add_classed(report: Report, entries: Sequence[ResourceSpec], loc: Loc, agent: Agent,
                what: str, rtype: ResourceType, base: type[Resource]) -> set[str]:
    """Add entries of ``name`` + ``clazz`` + fields (connections, MCP servers).

    Returns:
        The names declared (sound or not).
    """
    seen: dict[str, Loc] = {}
    for i, entry in enumerate(entries):
        at = (*loc, i)
        ok = unique(report, seen, entry.name, at, what)
        cls = _import_class(report, entry.clazz, (*at, "clazz"))
        if cls is None:
            continue
        if not _is_resource_of(cls, base, rtype):
            report.add((*at, "clazz"), f"{entry.clazz} is not a {base.__name__} subclass"
                       + (f" for {rtype.value} resources" if base is Resource else ""))
            continue
        args, valid = resource_arguments(report, entry, at, cls, what)
        if ok and valid:
            agent.add_resource(entry.name, rtype, ResourceDescriptor(entry.clazz, **args))
    return set(seen)


def _is_resource_of(cls: type, base: type[Resource], rtype: ResourceType) -> bool:
    if not issubclass(cls, base):
        return False
    declared = getattr(cls, "RESOURCE_TYPE", None)
    return declared is None or declared == rtype


def add_setups(report: Report, spec: AgentSpec, loc: Loc, agent: Agent, connections: set[str],
               tools: set[str] | None, subagents: set[str]) -> None:
    """Add each chat model setup, checking the connection, tools and sub-agents it names.

    ``tools`` is ``None`` when the agent has MCP servers: the tools they offer are known
    when the plan is built (``AgentPlan.from_agent`` lists them), which checks the names.
    """
    seen: dict[str, Loc] = {}
    for i, setup in enumerate(spec.chat_model_setups):
        at = (*loc, "chat_model_setups", i)
        ok = unique(report, seen, setup.name, at, "chat model setup")
        clazz = setup.clazz or "flink_agents_py.api.ChatModelSetup"
        cls = _import_class(report, clazz, (*at, "clazz")) if setup.clazz else ChatModelSetup
        if cls is None:
            continue
        if not issubclass(cls, ChatModelSetup):
            report.add((*at, "clazz"), f"{clazz} is not a ChatModelSetup subclass")
            continue
        skip: tuple[str, ...] = ()
        if "subagents" in (setup.model_extra or {}) and "subagents" not in cls.model_fields:
            report.add((*at, "subagents"),
                       f"{cls.__name__} declares no 'subagents' field, so a chat model cannot "
                       "delegate to sub-agents yet; remove 'subagents' (actions can call "
                       "sub-agents with ctx.submit_subagent)", at_key=True)
            skip, ok = ("subagents",), False
        args, valid = resource_arguments(report, setup, at, cls, "chat model setup", skip=skip)
        ok = _check_references(report, at, args, connections, tools, subagents) and ok
        if ok and valid:
            agent.add_resource(setup.name, ResourceType.CHAT_MODEL,
                               ResourceDescriptor(clazz, **args))


def _check_references(report: Report, at: Loc, args: dict[str, Any], connections: set[str],
                      tools: set[str] | None, subagents: set[str]) -> bool:
    ok = True
    conn = args.get("connection")
    if isinstance(conn, str) and conn not in connections:
        report.add((*at, "connection"),
                   f"names connection {quoted(conn)}, which this agent does not declare "
                   f"(chat_model_connections: {', '.join(sorted(connections)) or 'none'}"
                   f"{_did_you_mean(conn, connections)})")
        ok = False
    for key, known, what in (("tools", tools, "tool"), ("subagents", subagents, "sub-agent")):
        names = args.get(key)
        if not isinstance(names, list) or known is None:
            continue
        for i, n in enumerate(names):
            if isinstance(n, str) and n not in known:  # (another value: its type is reported)
                report.add((*at, key, i),
                           f"names {what} {quoted(n)}, which this agent does not declare "
                           f"({key}: {', '.join(sorted(known)) or 'none'}"
                           f"{_did_you_mean(n, known)})")
                ok = False
    return ok


def _did_you_mean(name: str, known: set[str]) -> str:
    """``; did you mean 'lookup'?`` for the declared name close to ``name`` (``""``: none)."""
    near = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return f"; did you mean {quoted(near[0])}?" if near else ""


def resource_arguments(report: Report, entry: ChatModelSetupSpec | ResourceSpec | Any, at: Loc,
                       cls: type[Resource], what: str, skip: tuple[str, ...] = (),
                       fixed: dict[str, Any] | None = None) -> tuple[dict[str, Any], bool]:
    """The entry's other keys (its ``model_extra``) checked as fields of ``cls``.

    Args:
        report: receives the problems.
        entry: a model allowing extra keys.
        at: the entry's location.
        cls: the class the keys are fields of.
        what: the entry's kind, for messages.
        skip: extra keys already reported.
        fixed: arguments the entry sets through its own fields (validated with the rest).

    Returns:
        ``(arguments, ok)``: the arguments (unknown keys left out) and whether all were valid.
    """
    own = [k for name, info in type(entry).model_fields.items() for k in field_keys(name, info)]
    fields = {k for name, info in cls.model_fields.items() for k in field_keys(name, info)}
    fields |= set(getattr(cls, "ARGUMENT_ALIASES", {}))  # the compat adapters' renames
    forbid = cls.model_config.get("extra") == "forbid"
    args: dict[str, Any] = dict(fixed or {})
    ok = True
    for key, value in (entry.model_extra or {}).items():
        if key in skip:
            continue
        if forbid and key not in fields:
            names = [*own, *sorted(fields - set(own))]
            report.add((*at, key), f"{unknown_key(key, names)} for {what} {cls.__name__}; "
                                   f"allowed keys: {', '.join(names)}", at_key=True)
            ok = False
            continue
        args[key] = value
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(getattr(cls, "__abstractmethods__", ())))
        report.add((*at, "clazz"),
                   f"{cls.__name__} is abstract (implement {missing}) and cannot be built")
        return args, False
    try:
        cls.model_validate(args)
    except ValidationError as err:
        for d in err.errors():
            msg = unknown_key_message(cls, d["loc"]) if d["type"] == "extra_forbidden" \
                else d["msg"]
            report.add((*at, *d["loc"]), f"{msg} (for {what} {cls.__name__})")
        return args, False
    except Exception as err:  # noqa: BLE001 - a class rejecting its arguments otherwise
        report.add(at, f"cannot build {cls.__name__}: {described(err)}")
        return args, False
    return args, ok

