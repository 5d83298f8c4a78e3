"""``AgentPlan``: an agent compiled to data.

A plan lists actions (function references as ``module:qualname`` and their trigger event
types), resources (as descriptors) and configuration. It is validated when built (every
problem collected into one ``PlanError``) and round-trips through JSON. In-process it also
keeps the original function and resource objects, so agents defined inside functions (tests,
notebooks) run without being importable; across processes it is pickled whole (PyFlink does
that with cloudpickle).
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterator, Mapping
from typing import Annotated, Any, NamedTuple

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr

from ..api import (
    Agent,
    FunctionTool,
    InternalSubagent,
    PlanError,
    Prompt,
    Resource,
    ResourceDescriptor,
    ResourceError,
    ResourceType,
    SubagentSetup,
    qualified_name,
)
from ..api.internal import (
    RESERVED_TOOL_PREFIX,
    Event,
    builtin_keys,
    described,
    event_class_for,
    import_qualified,
    offered_tool_name,
    warn_at_user,
)
from ._action_checks import (
    TriggerNameWarning,
    condition_expression_problem,
    function_place,
    signature_problem,
    warn_if_declares_a_result,
)
from ._config_checks import registered_config, warn_of_setup_fields
from ._inherited import declared_above, passing_down, visible
from ._knowledge_checks import (
    agent_identity,
    check_knowledge_references,
    name_default_collections,
)
from ._nesting import one_level_deeper
from ._reference_checks import check_references, plain_functions
from ._resource_checks import kind_problem
from ._setup_values import check_setup_values

__all__ = ["FunctionRef", "ActionPlan", "ResourcePlan", "AgentPlan", "BUILTIN_ACTIONS",
           "BuiltinAction", "register_builtin_actions", "OBSERVED_EVENTS", "RUNS_FIRST"]

RUNS_FIRST = "_flink_agents_py.runs_first"
"""An action's configuration key: ``True`` puts it before the others its event triggers."""
OBSERVED_EVENTS = "_flink_agents_py.observed_events"
"""An agent's configuration key: event types routed even when no action takes them, so the
runtime sends those it sends only when routed (memory write events) for observers to see."""

class BuiltinAction(NamedTuple):
    """An action every plan carries: implemented by the runtime, which registers it."""

    function: Callable[..., Any]
    triggers: tuple[str, ...]


_BUILTINS: dict[str, BuiltinAction] = {}
class _BuiltinActions(Mapping[str, BuiltinAction]):
    """The registry, read through: the first read imports the runtime's registry if empty.

    A plan compiled in a process that never imported the runtime (``AgentPlan.from_agent``
    right after ``from flink_agents_py.plan import AgentPlan``, as Flink Agents' own plan
    tests do) carries the built-in actions all the same. The plan names no runtime module
    (``tests/test_layers.py``): the package root, which wires the layers, imports it.
    """

    def _loaded(self) -> dict[str, BuiltinAction]:
        if not _BUILTINS:
            from .. import _load_builtin_actions

            _load_builtin_actions()  # (the runtime registers them on import)
        return _BUILTINS

    def __getitem__(self, name: str) -> BuiltinAction:
        return self._loaded()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaded())

    def __len__(self) -> int:
        return len(self._loaded())

    def __contains__(self, name: object) -> bool:
        return name in self._loaded()

    def __repr__(self) -> str:
        return f"BUILTIN_ACTIONS({sorted(self._loaded())})"


BUILTIN_ACTIONS: Mapping[str, BuiltinAction] = _BuiltinActions()
"""Actions every plan carries (the chat model, tool call and context retrieval actions), by
name, as the runtime registered them with ``register_builtin_actions`` (imported on first
read when it was not yet): the plan names no runtime module (the runtime hands its registry
down)."""


def register_builtin_actions(actions: Mapping[str, BuiltinAction]) -> None:
    """Make ``actions`` the built-in actions of every plan compiled from now on.

    Called by the runtime (``flink_agents_py.runtime._builtins``), which owns them.

    Args:
        actions: the built-in actions, by name.
    """
    _BUILTINS.clear()
    _BUILTINS.update(actions)


class FunctionRef(BaseModel):
    """A function named by ``module:qualname``; ``resolve`` returns the callable."""

    model_config = ConfigDict(frozen=True)

    path: str
    is_async: bool = False

    _fn: Callable[..., Any] | None = PrivateAttr(default=None)

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> FunctionRef:
        """Reference ``fn``, keeping the object for in-process use."""
        ref = cls(
            path=f"{fn.__module__}:{fn.__qualname__}",
            is_async=inspect.iscoroutinefunction(fn),
        )
        ref._fn = fn
        return ref

    def resolve(self) -> Callable[..., Any]:
        """Return the function (imported on first use when the plan came from JSON)."""
        if self._fn is None:
            self._fn = import_qualified(self.path)
        return self._fn


class ActionPlan(BaseModel):
    """One action: its name, function, trigger event types and configuration."""

    model_config = ConfigDict(frozen=True)

    name: str
    function: FunctionRef
    triggers: tuple[str, ...]
    config: dict[str, Any] = Field(default_factory=dict)


class ResourcePlan(BaseModel):
    """One resource: name, type and the descriptor that builds it."""

    model_config = ConfigDict(frozen=True)

    name: str
    type: ResourceType
    descriptor: ResourceDescriptor

    _instance: Resource | None = PrivateAttr(default=None)

    def build(self) -> Resource:
        """Return the declared instance, or a new resource built from the descriptor.

        A declared instance is used as it is (so a test can read what it counted); each
        Flink worker unpickles a copy of its own.
        """
        if self._instance is not None:
            return self._instance
        return self.descriptor.build()


class AgentPlan(BaseModel):
    """An agent compiled to data: actions by trigger, resources, configuration.

    Build one with ``AgentPlan.from_agent(agent)``.

    """

    model_config = ConfigDict(frozen=True)

    actions: dict[str, ActionPlan]
    actions_by_event: Annotated[dict[str, tuple[str, ...]], AfterValidator(builtin_keys)]
    resources: dict[ResourceType, dict[str, ResourcePlan]] = Field(default_factory=dict)
    subagents: dict[str, AgentPlan] = Field(default_factory=dict)
    config: Annotated[dict[str, Any], AfterValidator(registered_config)] = Field(
        default_factory=dict)
    agent: str = ""
    """Who the plan is of (``module:qualname`` of the agent's class): long-term memory and
    vector stores declared without a collection are scoped by it."""

    @classmethod
    def from_agent(cls, agent: Agent) -> AgentPlan:
        """Compile ``agent``, adding the built-in chat model and tool call actions.

        Args:
            agent: the agent to compile.

        Returns:
            The plan.

        Raises:
            PlanError: listing every problem found: an agent with no actions, duplicate
                action or resource names, an action with no trigger, a trigger naming no
                known event type, an action that does not take ``(event, ctx)``, a tool
                named with the reserved prefix ``_subagent_`` (a local one, or one an MCP
                server advertises), a resource that is not a descriptor, a resource whose
                class is of another type than declared, an action naming a class, a chat
                model setup naming a connection, tool or prompt that is not declared, a tool
                it offers whose arguments have no JSON Schema, and one offering a sub-agent
                that is not declared or has no usable input schema (contract 2: the job
                fails at setup).
        """
        if not isinstance(agent, Agent):
            got = (f"the class {agent.__name__} itself: pass an instance, {agent.__name__}()"
                   if isinstance(agent, type) and issubclass(agent, Agent)
                   else type(agent).__name__)
            raise PlanError([f"expected an Agent instance, got {got}"])
        problems: list[str] = []
        actions = _compile_actions(agent, problems)
        warn_of_setup_fields(type(agent).__name__, agent.config)
        subagents: dict[str, AgentPlan] = {}
        resources = _compile_resources(agent, problems, subagents)
        # declared but refused above: a name pointing at one is not "not declared" as well
        broken = {(t, n) for t, n, _ in agent.declared_resources()
                  if n not in resources.get(t, {})}
        seen = visible(resources)  # its own resources over its ancestors' (a sub-agent's)
        check_references(resources, seen, problems, broken, plain_functions(agent))
        check_setup_values(resources, problems)
        check_knowledge_references(seen, agent.config, problems, broken, own=resources)
        if problems:
            raise PlanError(problems)
        identity = agent_identity(agent)
        resources = name_default_collections(resources, identity)
        by_event: dict[str, list[str]] = {}  # an action marked ``RUNS_FIRST`` runs first
        for a in sorted(actions.values(), key=lambda a: a.config.get(RUNS_FIRST) is not True):
            for t in a.triggers:
                by_event.setdefault(t, []).append(a.name)
        for t in agent.config.get(OBSERVED_EVENTS) or ():  # routed to no action: observed
            by_event.setdefault(t, [])
        return cls(
            actions=actions,
            actions_by_event={t: tuple(names) for t, names in by_event.items()},
            resources=resources,
            subagents=subagents,
            config=agent.config,
            agent=identity,
        )

    @property
    def name(self) -> str:
        """The agent's name, for people: its ``name``, else its class's (``Shop``).

        A YAML agent has a ``name``; others give their class's (``ReActAgent``); a plan
        saved with no identity gives ``""``. The event log's header records it, so traces
        and OpenTelemetry spans name runs by it.
        """
        ident = self.agent
        if "|" in ident:
            return ident.rsplit("|", 1)[1]
        return ident.split(":", 1)[-1].split("+", 1)[0].rsplit(".", 1)[-1]

    def actions_for(self, event_type: str) -> tuple[ActionPlan, ...]:
        """Actions triggered by ``event_type``, in declaration order."""
        return tuple(self.actions[n] for n in self.actions_by_event.get(event_type, ()))

    def to_json(self) -> str:
        """Serialize to JSON text (functions by ``module:qualname``)."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> AgentPlan:
        """Rebuild a plan from ``to_json`` output; functions are imported on first use."""
        return cls.model_validate_json(text)


def _compile_actions(agent: Agent, problems: list[str]) -> dict[str, ActionPlan]:
    actions: dict[str, ActionPlan] = {}
    for name, fn, spec in agent.declared_actions():
        where = f"action {name!r}"
        if name in actions:
            problems.append(f"{where} is declared more than once")
            continue
        if name in BUILTIN_ACTIONS:
            problems.append(f"{where} uses the name of a built-in action")
            continue
        if not callable(fn):
            problems.append(f"{where} is not callable")
            continue
        if isinstance(fn, type):  # an event class takes (*args): it bound (event, ctx)
            problems.append(f"{where} names the class {fn.__qualname__}, not a function: "
                            f"name the function taking (event, ctx) that the action runs")
            continue
        if (wrong := signature_problem(fn)) is not None:
            problems.append(f"{where} ({function_place(fn)}) must take (event, ctx), {wrong}")
        if inspect.isasyncgenfunction(fn):  # before: its body never ran, and no error said so
            problems.append(f"{where} is an async generator function (async def with a yield): "
                            "its body would never run; drop the yield (an action sends events "
                            "with ctx.send_event)")
        warn_if_declares_a_result(name, fn)
        if not spec.triggers:
            problems.append(f"{where} has no trigger event type: name one, "
                            f"e.g. @action(InputEvent)")
        for t in spec.triggers:
            if (condition := condition_expression_problem(where, t)) is not None:
                problems.append(condition)
                continue
            near = _near_known_type(t)
            if near is None:
                continue
            said = f"{where} is triggered by {t!r}, which names no event class but is close to " \
                f"{near!r}"
            if event_class_for(near).__module__.startswith("flink_agents_py."):  # built-in
                problems.append(f"{said}: fix the name")
            else:  # maybe a type of the program's own, as Flink Agents takes it
                warn_at_user(TriggerNameWarning(
                    f"{said}: if it is misspelt, its action never runs (a type of your own, "
                    f"sent as Event(type={t!r}), is fine)"))
        actions[name] = ActionPlan(
            name=name, function=FunctionRef.of(fn), triggers=spec.triggers, config=spec.config
        )
    if not agent.declared_actions():
        problems.append(
            f"agent {type(agent).__name__} declares no actions, so no record would do anything: "
            "decorate a static method with @action(InputEvent), or call add_action(...)")
    for name, builtin in BUILTIN_ACTIONS.items():
        actions[name] = ActionPlan(
            name=name, function=FunctionRef.of(builtin.function), triggers=builtin.triggers
        )
    return actions


def _near_known_type(event_type: str) -> str | None:
    """The declared event type ``event_type`` is likely a misspelling of, if any.

    A trigger naming no ``Event`` subclass is a user event type (sent as
    ``Event(type="...")``, as Apache Flink Agents allows); one within a letter or two of a
    declared type's name is taken for a typo instead.

    Args:
        event_type: the trigger's event type.

    Returns:
        The declared type's name, or ``None``.
    """
    if event_class_for(event_type) is not Event:
        return None
    from ..api.internal import EVENT_TYPES

    near = difflib.get_close_matches(event_type, list(EVENT_TYPES), n=1, cutoff=0.85)
    return near[0] if near else None


def _descriptor_for(rtype: ResourceType, value: Any) -> tuple[ResourceDescriptor, Resource | None]:
    if isinstance(value, ResourceDescriptor):
        return value, None
    if isinstance(value, Resource):
        return ResourceDescriptor(type(value), **value.model_dump()), value
    if rtype is ResourceType.TOOL and callable(value):
        inst = FunctionTool.from_function(value)
        return ResourceDescriptor(FunctionTool, **inst.model_dump()), inst
    if rtype is ResourceType.PROMPT and isinstance(value, str):
        prompt = Prompt.from_text(value)
        return ResourceDescriptor(Prompt, **prompt.model_dump()), prompt
    raise TypeError(
        f"a {rtype.value} resource must be a ResourceDescriptor, got {type(value).__name__}")


def _compile_subagent(name: str, value: Any, problems: list[str],
                      subagents: dict[str, AgentPlan]) -> ResourceDescriptor | None:
    """Check an ``AGENT`` resource; compile an internal one's child plan into ``subagents``."""
    where = f"agent resource {name!r}"
    if isinstance(value, SubagentSetup):  # an instance (Flink Agents' form): its fields
        value = ResourceDescriptor(type(value), **{
            k: getattr(value, k) for k in type(value).model_fields})
    if isinstance(value, Agent):  # an agent given directly (Flink Agents' form)
        meta = {k: getattr(value, g)() for k, g in (
            ("description", "get_subagent_description"),
            ("input_schema", "get_subagent_input_schema")) if callable(getattr(value, g, None))}
        value = ResourceDescriptor(InternalSubagent, agent=value,
                                   **{k: v for k, v in meta.items() if v is not None})
    if not isinstance(value, ResourceDescriptor):
        problems.append(f"{where} must be a ResourceDescriptor, got {type(value).__name__}")
        return None
    try:
        cls = import_qualified(value.clazz)
    except ResourceError as e:
        problems.append(f"{where}: {e}")
        return None
    if not (isinstance(cls, type) and issubclass(cls, SubagentSetup)):
        problems.append(f"{where}: {value.clazz} is not a SubagentSetup subclass")
        return None
    schema = value.arguments.get("input_schema")
    if schema is not None and not isinstance(schema, dict) and (
            not isinstance(schema, str) or not schema.strip()):
        got = "blank text" if isinstance(schema, str) else type(schema).__name__
        problems.append(f"{where}: input_schema must be a JSON Schema, a dict or its JSON "
                        f"text, got {got}")
    if not issubclass(cls, InternalSubagent):
        return value
    child = value.arguments.get("agent")
    if isinstance(child, str):
        try:
            child = import_qualified(child)
        except ResourceError as e:
            problems.append(f"{where}: {e}")
            return None
    if isinstance(child, type) and issubclass(child, Agent):
        child = child()
    if not isinstance(child, Agent):
        problems.append(f"{where}: 'agent' must be an Agent (instance, class or module:qualname)")
        return None
    with one_level_deeper(name, child):
        try:
            subagents[name] = AgentPlan.from_agent(child)
        except PlanError as e:
            problems.extend(f"sub-agent {name!r}: {p}" for p in e.problems)
            return None
    args = {**value.arguments, "agent": qualified_name(type(child))}
    return ResourceDescriptor(InternalSubagent, **args)


def _compile_resources(agent: Agent, problems: list[str], subagents: dict[str, AgentPlan]
                       ) -> dict[ResourceType, dict[str, ResourcePlan]]:
    out: dict[ResourceType, dict[str, ResourcePlan]] = {}
    deferred: dict[str, Any] = {}  # sub-agents, compiled last: they see the other resources
    for rtype, name, value in agent.declared_resources():
        where = f"{rtype.value} resource {name!r}"
        bucket = out.setdefault(rtype, {})
        if name in bucket or (rtype is ResourceType.AGENT and name in deferred):
            problems.append(
                f"{where} is declared more than once (to replace a declared resource, e.g. "
                f"with a test double, use agent.override_resource({name!r}, ...) or "
                f"'with agent.override({name}=...)')")
            continue
        if rtype is ResourceType.AGENT:
            deferred[name] = value
            continue
        if rtype is ResourceType.TOOL and name.startswith(RESERVED_TOOL_PREFIX):
            problems.append(
                f"tool {name!r} starts with the reserved prefix {RESERVED_TOOL_PREFIX!r} "
                "(that prefix names sub-agent callables); rename the tool"
            )
            continue
        try:
            descriptor, instance = _descriptor_for(rtype, value)
        except (TypeError, ResourceError) as e:
            problems.append(f"{where}: {e}")
            continue
        kind = kind_problem(where, rtype, descriptor, instance)
        if kind is not None:
            problems.append(kind)
            continue
        if rtype is ResourceType.TOOL:
            try:  # the name the model is offered (a bare function's own name included)
                tool_name = offered_tool_name(name, descriptor.clazz, descriptor.arguments,
                                              instance)
            except ResourceError as e:
                problems.append(f"{where}: {e}")
                continue
            if tool_name.startswith(RESERVED_TOOL_PREFIX):
                problems.append(
                    f"tool {tool_name!r} starts with the reserved prefix "
                    f"{RESERVED_TOOL_PREFIX!r}; rename the tool"
                )
                continue
        if instance is None:
            unknown = _unknown_arguments(descriptor)
            if unknown:
                problems.append(f"{where}: {unknown}")
                continue
        plan = ResourcePlan(name=name, type=rtype, descriptor=descriptor)
        plan._instance = instance
        bucket[name] = plan
    listed = _list_mcp_servers(out, problems)  # before its sub-agents: they may name these
    with passing_down(out, listed):  # a sub-agent may name these (and what this agent may name)
        for name, value in deferred.items():
            compiled = _compile_subagent(name, value, problems, subagents)
            if compiled is not None:
                out[ResourceType.AGENT][name] = ResourcePlan(
                    name=name, type=ResourceType.AGENT, descriptor=compiled)
    return out


def _unknown_arguments(descriptor: ResourceDescriptor) -> str | None:
    """Why ``descriptor`` cannot build its class (arguments it does not take), or ``None``.

    Checked at plan build so a misspelt argument (``request_timeot=``) is reported then, not
    at the first chat. A class that cannot be imported here is left to the build.

    Args:
        descriptor: the resource's descriptor.

    Returns:
        The problem, or ``None`` when the arguments fit.
    """
    try:
        cls = import_qualified(descriptor.clazz)
    except ResourceError:
        return None
    note = getattr(cls, "note_dropped_arguments", None)  # compat's: warned in this process
    if callable(note):
        note(descriptor.arguments)
    fields = getattr(cls, "model_fields", None)
    if not isinstance(fields, dict) or getattr(cls, "model_config", {}).get("extra") != "forbid":
        return None
    accepted = set(fields)
    for f in fields.values():
        if isinstance(f.alias, str):
            accepted.add(f.alias)
    accepted.update(getattr(cls, "ARGUMENT_ALIASES", {}))
    unknown = sorted(set(descriptor.arguments) - accepted)
    if not unknown:
        return None
    near = [m[0] for u in unknown if (m := difflib.get_close_matches(u, accepted, 1, 0.7))]
    sampling = [m[0] for u in unknown if not difflib.get_close_matches(u, accepted, 1, 0.7)
                and (m := difflib.get_close_matches(u, _MODEL_OPTIONS, 1, 0.8))]
    where = "in its options={...}" if "options" in accepted else \
        "in the chat model setup's options={...}"
    return (f"{descriptor.clazz} takes no argument {', '.join(map(repr, unknown))} "
            + (f"(did you mean {', '.join(map(repr, near))}?) " if near else "")
            + (f"({', '.join(sampling)}: a model option, given {where}) " if sampling else "")
            + f"(it takes: {', '.join(sorted(fields))})")


_MODEL_OPTIONS = frozenset({"temperature", "max_tokens", "top_p", "top_k", "seed", "stop",
                            "frequency_penalty", "presence_penalty", "num_ctx"})
"""Sampling options of a model call, which a setup's ``options`` carries."""


def _list_mcp_servers(resources: dict[ResourceType, dict[str, ResourcePlan]],
                      problems: list[str]) -> set[tuple[ResourceType, str]]:
    """List each ``MCP_SERVER`` that can be listed (``plan_listing``).

    Reject advertised tool names with the reserved prefix, register the tools and prompts it
    offers that no declared resource names (the declared one wins, the agent's own or one an
    ancestor of an internal sub-agent declares). A server that cannot be reached lists
    nothing.

    Returns:
        The ``(type, name)`` of each resource registered so.
    """
    offered_by: dict[tuple[ResourceType, str], str] = {}
    for name, rp in list(resources.get(ResourceType.MCP_SERVER, {}).items()):
        try:
            if not hasattr(import_qualified(rp.descriptor.clazz), "plan_listing"):
                continue  # a server class that offers no listing
            offered = rp.build().plan_listing(name)  # type: ignore[attr-defined]
        except Exception as e:  # noqa: BLE001 - a server that cannot even be built
            problems.append(f"mcp_server resource {name!r}: {described(e)}")
            continue
        for rtype, advertised, descriptor in offered or ():
            if rtype is ResourceType.TOOL and advertised.startswith(RESERVED_TOOL_PREFIX):
                problems.append(
                    f"MCP server {name!r} advertises tool {advertised!r}, which starts with the "
                    f"reserved prefix {RESERVED_TOOL_PREFIX!r} (that prefix names sub-agent "
                    "callables); rename the tool on the server")
                continue
            bucket = resources.setdefault(rtype, {})
            if descriptor is None or (
                    advertised in bucket and (rtype, advertised) not in offered_by):
                continue  # not to register, or declared by the agent
            if declared_above(rtype, advertised):
                continue  # an ancestor declares it: a listed name never displaces that
            other = offered_by.get((rtype, advertised))
            if other is not None:
                problems.append(
                    f"MCP servers {other!r} and {name!r} both offer the {rtype.value} "
                    f"{advertised!r}; declare a {rtype.value} resource of that name to pick one")
                continue
            offered_by[(rtype, advertised)] = name
            bucket[advertised] = ResourcePlan(name=advertised, type=rtype, descriptor=descriptor)
    return set(offered_by)


AgentPlan.model_rebuild()
