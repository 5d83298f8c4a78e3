"""``Agent`` and the decorators that declare its actions and resources."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ._events import Event, event_type_of
from ._resources import ResourceDescriptor, ResourceType

__all__ = [
    "Agent",
    "ActionSpec",
    "ResourceSpec",
    "action",
    "chat_model_connection",
    "chat_model_setup",
    "prompt",
    "mcp_server",
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


def action(*triggers: type[Event] | str, config: dict[str, Any] | None = None) -> Callable[[Any], Any]:
    """Declare a static method of an ``Agent`` as an action run by events of ``triggers``.

    The function takes ``(event, ctx)`` and may be plain or ``async``. Put ``@action`` above
    ``@staticmethod``.

    Args:
        *triggers: event classes (``InputEvent``) or event type strings.
        config: per-action configuration, readable as ``ctx.action_config``.

    Returns:
        A decorator returning the function unchanged, with an ``ActionSpec`` attached.
    """
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


class Agent:
    """An agent: actions triggered by events, and the resources they use.

    Declare actions with ``@action`` on static methods and resources with the resource
    decorators, or add them on an instance with ``add_action`` / ``add_resource``. Names are
    checked when the plan is built: a duplicate is reported there, with every other problem.
    """

    def __init__(self) -> None:
        self._actions: list[tuple[str, Callable[..., Any], ActionSpec]] = []
        self._resources: list[tuple[ResourceType, str, Any]] = []
        self._config: dict[str, Any] = {}

    def add_action(
        self, name: str, triggers: Iterable[type[Event] | str], fn: Callable[..., Any],
        config: dict[str, Any] | None = None,
    ) -> Agent:
        """Add an action to this instance. Returns ``self`` for chaining."""
        spec = ActionSpec(
            triggers=tuple(event_type_of(t) for t in triggers), config=dict(config or {})
        )
        self._actions.append((name, fn, spec))
        return self

    def add_resource(
        self, name: str, resource_type: ResourceType, resource: ResourceDescriptor | Any
    ) -> Agent:
        """Add a resource: a ``ResourceDescriptor``, a ``Prompt``, or a function (``TOOL``).

        Returns ``self`` for chaining.
        """
        self._resources.append((resource_type, name, resource))
        return self

    def set_config(self, **config: Any) -> Agent:
        """Set agent-wide configuration (``max_tool_rounds``...). Returns ``self``."""
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

    def declared_resources(self) -> list[tuple[ResourceType, str, Any]]:
        """Resources declared on the class (by decorator), then on the instance, in order."""
        found: list[tuple[ResourceType, str, Any]] = []
        for klass in reversed(type(self).__mro__):
            for attr, value in vars(klass).items():
                fn = _unwrap(value)
                rspec = getattr(fn, "__resource_spec__", None)
                if isinstance(rspec, ResourceSpec):
                    found.append((rspec.resource_type, attr, fn()))
                elif callable(fn) and getattr(fn, "__tool_spec__", None) is not None:
                    found.append((ResourceType.TOOL, fn.__tool_spec__.name, fn))
        return found + list(getattr(self, "_resources", []))

    @property
    def config(self) -> dict[str, Any]:
        """Agent-wide configuration."""
        return dict(getattr(self, "_config", {}))
