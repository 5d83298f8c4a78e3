"""``Agent`` and the decorators that declare its actions and resources."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from ._errors import DuplicateNameError, ResourceError, UsageError
from ._events import Event, event_type_of
from ._resources import Resource, ResourceDescriptor, ResourceType

__all__ = [
    "Agent",
    "AgentNotInitializedError",
    "ActionSpec",
    "ResourceSpec",
    "action",
    "chat_model_connection",
    "chat_model_setup",
    "prompt",
    "mcp_server",
    "embedding_model_connection",
    "embedding_model_setup",
    "vector_store",
]


class ActionSpec(BaseModel):
    """The frozen spec ``@action`` attaches to a function (``fn.__action_spec__``).

    Attributes:
        triggers: the event types that run the action.
        config: per-action configuration, readable as ``ctx.action_config``.
    """

    model_config = ConfigDict(frozen=True)

    triggers: tuple[str, ...]
    config: dict[str, Any] = Field(default_factory=dict)


class ResourceSpec(BaseModel):
    """The frozen spec a resource decorator attaches (``fn.__resource_spec__``)."""

    model_config = ConfigDict(frozen=True)

    resource_type: ResourceType


def _unwrap(f: Any) -> Any:
    return f.__func__ if isinstance(f, staticmethod) else f


def action(
    *triggers: type[Event] | str, config: dict[str, Any] | None = None
) -> Callable[[Any], Any]:
    """Declare a static method of an ``Agent`` as an action run by events of ``triggers``.

    The function takes ``(event, ctx)`` and may be plain or ``async``. Put ``@action`` above
    ``@staticmethod``.

    Args:
        *triggers: event classes (``InputEvent``) or event type strings.
        config: per-action configuration, readable as ``ctx.action_config``.

    Returns:
        A decorator returning the function unchanged, with an ``ActionSpec`` attached.

    Raises:
        UsageError: for a bare ``@action`` (no event types: write ``@action(InputEvent)``).
        TypeError: for a trigger that is neither an ``Event`` subclass nor a string.
    """
    if len(triggers) == 1 and (isinstance(triggers[0], (staticmethod, classmethod))
                               or inspect.isfunction(triggers[0])):
        fn = _unwrap(triggers[0])
        raise UsageError(
            f"@action needs the event types that trigger the action: write "
            f"@action(InputEvent) (or another Event subclass or type string) above "
            f"@staticmethod on {getattr(fn, '__qualname__', fn)!r}, not a bare @action")
    types = tuple(event_type_of(t) for t in triggers)

    def mark(f: Any) -> Any:
        _unwrap(f).__action_spec__ = ActionSpec(triggers=types, config=dict(config or {}))
        return f

    return mark


def _resource_decorator(resource_type: ResourceType) -> Callable[[Any], Any]:
    def mark(f: Any) -> Any:
        _unwrap(f).__resource_spec__ = ResourceSpec(resource_type=resource_type)
        return f

    mark.__doc__ = (
        f"Declare a static method returning a ``ResourceDescriptor`` (or resource) as a "
        f"``{resource_type.name}`` resource named after the method."
    )
    return mark


chat_model_connection = _resource_decorator(ResourceType.CHAT_MODEL_CONNECTION)
chat_model_setup = _resource_decorator(ResourceType.CHAT_MODEL)
prompt = _resource_decorator(ResourceType.PROMPT)
mcp_server = _resource_decorator(ResourceType.MCP_SERVER)
embedding_model_connection = _resource_decorator(ResourceType.EMBEDDING_MODEL_CONNECTION)
embedding_model_setup = _resource_decorator(ResourceType.EMBEDDING_MODEL)
vector_store = _resource_decorator(ResourceType.VECTOR_STORE)


def _declared(value: Any) -> Any:
    """A resource method's value, Flink Agents' first form made a descriptor.

    That form is ``(class, {arguments})`` (its ``chat_model_server`` examples); its
    ``"name"`` argument is the method's name, so it is left out.

    Returns:
        The descriptor of that form, else ``value`` itself.
    """
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], type) \
            and isinstance(value[1], dict):
        return ResourceDescriptor(value[0], **{k: v for k, v in value[1].items() if k != "name"})
    return value


class AgentNotInitializedError(UsageError, AttributeError):
    """An ``Agent`` whose ``__init__`` did not run (``super().__init__()`` forgotten).

    Raised when such an agent is used; the message names the class and the fix.

    Also an ``AttributeError``, so ``getattr(agent, name, default)`` still gets its default.
    """


_AGENT_STATE = frozenset({"_actions", "_resources", "_config", "_overrides"})
"""What ``Agent.__init__`` sets up."""


class Agent:
    """An agent: actions triggered by events, and the resources they use.

    Declare actions with ``@action`` on static methods and resources with the resource
    decorators, or add them on an instance with ``add_action`` / ``add_resource``. Names are
    checked when the plan is built: a duplicate is reported there, with every other problem.

    A subclass that redefines a decorated action or resource method (same attribute name)
    replaces the base's. To swap a declared resource for a test double without a subclass,
    use ``override_resource`` (for this instance) or ``override(...)`` (for a ``with`` block).

    Args:
        replay: how a replay treats a durable call made with other arguments than recorded
            at its place: ``"lenient"`` (the default: the recorded outcome, with a warning)
            or ``"strict"`` (a ``ReplayDivergenceError``, as is an execution that completes
            without making all its recorded calls). Overrides the class attribute
            ``replay``; one call can opt in with ``durable_execute(..., strict=True)``.

    Attributes:
        replay: the class's replay mode (``"lenient"``, or ``"strict"`` on a subclass).
    """

    replay: ClassVar[str] = "lenient"

    def __init__(self, *, replay: str | None = None) -> None:
        self._actions: list[tuple[str, Callable[..., Any], ActionSpec]] = []
        self._resources: list[tuple[ResourceType, str, Any]] = []
        self._config: dict[str, Any] = {}
        self._overrides: dict[tuple[ResourceType, str], Any] = {}
        if replay is not None:
            self._config["replay"] = _replay_mode(replay, "Agent(replay=...)")

    if not TYPE_CHECKING:  # (at run time only: type checkers keep flagging unknown names)
        def __getattr__(self, name: str) -> Any:
            """Name the fix when ``Agent.__init__`` did not run, not a bare AttributeError.

            That happens when a subclass's ``__init__`` forgot ``super().__init__()``.

            Raises:
                AgentNotInitializedError: for the state ``Agent.__init__`` sets up.
                AttributeError: for any other missing attribute.
            """
            if name in _AGENT_STATE:
                cls = type(self).__name__
                raise AgentNotInitializedError(
                    f"{cls}.__init__ did not call super().__init__(), so this {cls} has no "
                    f"{name}: add super().__init__() as the first line of {cls}.__init__ "
                    "(before add_action, add_resource, override_resource or set_config)")
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def add_action(
        self, name: str, triggers: Iterable[type[Event] | str] | None = None,
        fn: Callable[..., Any] | None = None, config: dict[str, Any] | None = None, *,
        trigger_conditions: Iterable[type[Event] | str] | None = None,
        func: Callable[..., Any] | None = None, **more_config: Any,
    ) -> Agent:
        """Add an action to this instance. Returns ``self`` for chaining.

        Args:
            name: the action's name.
            triggers: the event classes or type strings that run it.
            fn: the function, taking ``(event, ctx)``.
            config: per-action configuration (``ctx.action_config``).
            trigger_conditions: Flink Agents' keyword for ``triggers``.
            func: Flink Agents' keyword for ``fn``.
            **more_config: more configuration (Flink Agents' form), merged into ``config``.

        Returns:
            This agent, for chaining.

        Raises:
            UsageError: when the name is not a non-empty string, the triggers or the function
                are missing, or the triggers are one event type instead of a list of them.
            DuplicateNameError: (a ``ValueError``, as in Flink Agents) when an action of
                this name was added already.
        """
        triggers = triggers if triggers is not None else trigger_conditions
        fn = fn if fn is not None else func
        _check_name("add_action", name)
        if any(added == name for added, _, _ in self._actions):
            raise DuplicateNameError(
                f"Action {name!r} already defined on this {type(self).__name__}: give each "
                "action a name of its own")
        if triggers is None or fn is None:
            raise UsageError(f"add_action({name!r}, ...) needs the triggers and the function")
        if isinstance(triggers, str) or isinstance(triggers, type):
            # a string's letters (or a class) are not a list of event types: 'InputEvent'
            # made triggers 'I', 'n', 'p'..., which nothing sends, and the action never ran
            shown = triggers if isinstance(triggers, str) else triggers.__name__
            raise UsageError(
                f"add_action({name!r}, ...): triggers must be a list of event types, got the "
                f"{'string' if isinstance(triggers, str) else 'class'} {shown!r} alone: write "
                f"add_action({name!r}, [{shown if isinstance(triggers, type) else repr(shown)}]"
                ", fn)")
        spec = ActionSpec(
            triggers=tuple(event_type_of(t) for t in triggers),
            config={**dict(config or {}), **more_config},
        )
        self._actions.append((name, fn, spec))
        return self

    def add_resource(
        self, name: str, resource_type: ResourceType, resource: ResourceDescriptor | Any = None,
        *, instance: ResourceDescriptor | Any = None,
    ) -> Agent:
        """Add a resource: a ``ResourceDescriptor``, a ``Prompt``, or a function (``TOOL``).

        A name added twice for one type is refused at the second call (as in Flink Agents),
        one both added and declared by a decorator when the plan is built; to replace a
        declared resource (a test double), use ``override_resource``.

        Args:
            name: the resource's name, unique within its type.
            resource_type: what kind of resource it is.
            resource: a ``ResourceDescriptor``, a ``Prompt``, or a tool function.
            instance: the same as ``resource`` (Apache Flink Agents' keyword).

        Returns:
            This agent, for chaining.

        Raises:
            UsageError: when neither or both of ``resource`` and ``instance`` are given, the
                name is not a non-empty string, or the type names no ``ResourceType``.
            DuplicateNameError: (a ``ValueError``, as in Flink Agents) when a resource of
                this type and name was added already.
        """
        _check_name("add_resource", name)
        if (resource is None) == (instance is None):
            raise UsageError(f"add_resource({name!r}, ...) needs the resource (or instance=),"
                             f" once")
        resource_type = _resource_type(name, resource_type)
        if any(t is resource_type and n == name for t, n, _ in self._resources):
            raise DuplicateNameError(
                f"{resource_type.value} {name!r} already defined on this "
                f"{type(self).__name__}: to replace it (e.g. with a test double), use "
                f"agent.override_resource({name!r}, ...)")
        self._resources.append((resource_type, name, resource if instance is None else instance))
        return self

    def override_resource(self, name: str, resource: ResourceDescriptor | Any,
                          resource_type: ResourceType | None = None) -> Agent:
        """Replace the resource declared under ``name`` on this instance (e.g. a test double).

        The replacement takes the declared resource's place (name and type): the chat model
        setups and actions that name it now get the replacement. A plain function replacing
        a ``TOOL`` keeps the declared tool name, so the model sees the same tool.

        Args:
            name: the declared resource's name.
            resource: what replaces it: a ``ResourceDescriptor``, a resource instance, or a
                function for a ``TOOL``.
            resource_type: the declared resource's type; needed only when ``name`` is
                declared for more than one type.

        Returns:
            ``self``, for chaining.

        Raises:
            ResourceError: when nothing (or more than one type, without ``resource_type``)
                is declared under ``name``; the message lists what is declared.
        """
        rtype = self._declared_type(name, resource_type)
        if rtype is ResourceType.TOOL and callable(resource) and not isinstance(
                resource, (Resource, ResourceDescriptor)):
            from ._tools import FunctionTool

            resource = FunctionTool.from_function(resource, name=name)
        if not hasattr(self, "_overrides"):
            self._overrides = {}
        self._overrides[(rtype, name)] = resource
        return self

    @contextlib.contextmanager
    def override(self, **resources: ResourceDescriptor | Any) -> Iterator[Agent]:
        """Replace declared resources by name inside a ``with`` block (e.g. test doubles).

        ``with agent.override(openai=ResourceDescriptor(ScriptedChatModel, ...)):`` builds
        and runs the agent with the replacements; on exit the previous resources are back.
        A plan built inside the block keeps the replacements.

        Args:
            **resources: declared name to replacement (as for ``override_resource``).

        Yields:
            This agent.

        Raises:
            ResourceError: for a name that is not declared (or declared for several types).
        """
        saved = dict(getattr(self, "_overrides", {}))
        try:
            for name, resource in resources.items():
                self.override_resource(name, resource)
            yield self
        finally:
            self._overrides = saved

    def _declared_type(self, name: str, resource_type: ResourceType | None) -> ResourceType:
        found = {t for t, n, _ in self.declared_resources() if n == name}
        if resource_type is not None and resource_type in found:
            return resource_type
        if resource_type is None and len(found) == 1:
            return found.pop()
        declared = ", ".join(sorted({f"{t.value} {n!r}" for t, n, _ in self.declared_resources()}))
        if len(found) > 1 and resource_type is None:
            raise ResourceError(
                f"{name!r} names resources of several types on {type(self).__name__} "
                f"({', '.join(sorted(t.value for t in found))}): pass resource_type")
        kind = f"{resource_type.value} resource" if resource_type is not None else "resource"
        raise ResourceError(f"no {kind} {name!r} is declared on {type(self).__name__} to "
                            f"override (declared: {declared or 'none'})")

    def set_config(self, **config: Any) -> Agent:
        """Set agent-wide configuration, read with ``ctx.config``.

        Options of the runtime live here (``replay="strict"``, long-term memory's
        ``LongTermMemoryOptions``); a chat model setup's fields (``max_tool_rounds``...) do
        not: they are set on each setup.

        Returns:
            The agent itself.
        """
        self._config.update(config)
        return self

    def declared_actions(self) -> list[tuple[str, Callable[..., Any], ActionSpec]]:
        """Actions declared on the class (by decorator), then on the instance, in order."""
        found: list[tuple[str, Callable[..., Any], ActionSpec]] = []
        seen: dict[str, int] = {}
        for klass in reversed(type(self).__mro__):
            for attr, value in vars(klass).items():
                fn = _unwrap(value)
                spec = getattr(fn, "__action_spec__", None)
                if isinstance(spec, ActionSpec):
                    if attr in seen:  # an override in a subclass replaces the base's action
                        found[seen[attr]] = (attr, fn, spec)
                    else:
                        seen[attr] = len(found)
                        found.append((attr, fn, spec))
        return found + list(getattr(self, "_actions", []))

    @property
    def actions(self) -> dict[str, tuple[list[str], Any, dict[str, Any] | None]]:
        """Flink Agents' view of the actions: name -> (trigger types, function, config)."""
        return {name: (list(spec.triggers), fn, dict(spec.config) or None)
                for name, fn, spec in self.declared_actions()}

    @property
    def resources(self) -> dict[ResourceType, dict[str, Any]]:
        """Flink Agents' view of the resources: type -> {name: descriptor or resource}."""
        found: dict[ResourceType, dict[str, Any]] = {t: {} for t in ResourceType}
        for rtype, name, value in self.declared_resources():
            found[rtype][name] = value
        return found

    def declared_resources(self) -> list[tuple[ResourceType, str, Any]]:
        """Resources declared on the class (by decorator), then on the instance, in order.

        A subclass's method of the same attribute name replaces the base's; replacements
        from ``override_resource`` / ``override`` take the place of what they replace.

        Returns:
            ``(resource type, name, descriptor or object)`` for each resource.
        """
        found: list[tuple[ResourceType, str, Any] | None] = []
        seen: dict[str, int] = {}
        for klass in reversed(type(self).__mro__):
            for attr, value in vars(klass).items():
                fn = _unwrap(value)
                rspec = getattr(fn, "__resource_spec__", None)
                if isinstance(rspec, ResourceSpec):
                    entry = (rspec.resource_type, attr, _declared(fn()))
                elif callable(fn) and getattr(fn, "__tool_spec__", None) is not None:
                    entry = (ResourceType.TOOL, fn.__tool_spec__.name, fn)
                elif attr in seen:  # redefined as something else: the base's is gone
                    found[seen.pop(attr)] = None
                    continue
                else:
                    continue
                if attr in seen:  # redefined in a subclass: replaces the base's
                    found[seen[attr]] = entry
                else:
                    seen[attr] = len(found)
                    found.append(entry)
        declared = [e for e in found if e is not None] + list(getattr(self, "_resources", []))
        overrides = getattr(self, "_overrides", None)
        if not overrides:
            return declared
        return [(t, n, overrides.get((t, n), v)) for t, n, v in declared]

    @property
    def config(self) -> dict[str, Any]:
        """Agent-wide configuration (with ``"replay"`` when the agent replays strictly).

        Raises:
            UsageError: when the replay mode (class attribute, ``Agent(replay=...)`` or
                ``set_config(replay=...)``) is neither ``"lenient"`` nor ``"strict"``.
        """
        config = dict(getattr(self, "_config", {}))
        mode = config.get("replay", getattr(type(self), "replay", "lenient"))
        if isinstance(mode, str) or "replay" in config:
            mode = _replay_mode(mode, f"{type(self).__name__}.replay")
            if mode != "lenient":
                config["replay"] = mode
            else:
                config.pop("replay", None)
        return config


REPLAY_MODES = ("lenient", "strict")
"""The replay modes of an agent (``Agent.replay``)."""


def _replay_mode(mode: Any, where: str) -> str:
    if mode not in REPLAY_MODES:
        raise UsageError(f"{where} must be one of {', '.join(map(repr, REPLAY_MODES))}, "
                         f"got {mode!r}")
    return str(mode)


def _check_name(call: str, name: Any) -> None:
    """Refuse an action or resource name that is not a non-empty string, at the call.

    A plan names actions and resources by text (in state, metrics, messages, ``ctx.chat``):
    ``add_resource(5, ...)`` failed only when the plan was built, with pydantic's error for
    a model the user never wrote.

    Raises:
        UsageError: naming the call and the value.
    """
    if not isinstance(name, str) or not name.strip():
        raise UsageError(f"{call}(name, ...): the name must be a non-empty string, got "
                         f"{name!r} ({type(name).__name__})")


def _resource_type(name: str, resource_type: Any) -> ResourceType:
    """``resource_type`` as a ``ResourceType``; its value (``"tool"``) is taken as that type.

    Returns:
        The resource type.

    Raises:
        UsageError: naming the resource and the types when it names none (it failed when
            the plan was built with ``'str' object has no attribute 'value'``).
    """
    if isinstance(resource_type, ResourceType):
        return resource_type
    try:
        return ResourceType(resource_type)
    except (ValueError, TypeError):
        pass
    raise UsageError(
        f"add_resource({name!r}, resource_type, ...): the resource type must be a "
        f"ResourceType (e.g. ResourceType.TOOL), got {resource_type!r}; the types: "
        f"{', '.join(t.name for t in ResourceType)}")
