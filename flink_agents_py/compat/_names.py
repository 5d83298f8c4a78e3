"""Flink Agents' names for events, structured output, tools and sub-agents, over ours."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from enum import Enum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, create_model, field_validator

from ..agents.react import _row_schema
from ..api import (
    RESERVED_TOOL_PREFIX,
    AsyncSubagentSetup,
    DeferredSubagentSetup,
    FunctionTool,
    InternalSubagent,
    PreparedCall,
    Resource,
    ResourceDescriptor,
    ResourceType,
)
from ..api import RunStatus as _RunStatus
from ._injected import injected_specs

__all__ = [
    "OutputSchema",
    "STRUCTURED_OUTPUT",
    "Tool",
    "ToolType",
    "CALLABLE_NAME_PREFIX",
    "BaseAsyncSubagentSetup",
    "BaseDeferredSubagentSetup",
    "PreparedTriple",
    "RunStatus",
    "InternalSubagentResourceDescriptorBuilder",
    "ResourceContext",
]

STRUCTURED_OUTPUT = "structured_output"
"""The ``ChatResponse.extra_args`` key of the structured output (our ``structured``)."""

CALLABLE_NAME_PREFIX = RESERVED_TOOL_PREFIX
"""Prefix of the callable a sub-agent is offered to a chat model under (``_subagent_``)."""

BaseAsyncSubagentSetup = AsyncSubagentSetup
"""Flink Agents' name of ``AsyncSubagentSetup`` (submit / poll status / fetch result)."""

BaseDeferredSubagentSetup = DeferredSubagentSetup
"""Flink Agents' name of ``DeferredSubagentSetup`` (one call run when first awaited)."""

PreparedTriple = PreparedCall
"""Flink Agents' name of ``PreparedCall``: ``(key, call, reconciler_or_None)``."""


class OutputSchema(BaseModel):
    """Wraps a pydantic class as a structured-output schema (Flink Agents' form).

    ``ChatRequestEvent(..., output_schema=OutputSchema(output_schema=MyModel))`` is the same
    as ``output_schema=MyModel``: the request keeps its JSON Schema, and the answer's
    ``extra_args[STRUCTURED_OUTPUT]`` is a dict of that shape.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    output_schema: type[BaseModel]

    @field_validator("output_schema", mode="before")
    @classmethod
    def _row_as_model(cls, value: Any) -> Any:
        # a PyFlink RowTypeInfo (Flink Agents takes one): a model of its fields' basic
        # types, defined here, so the answer is a dict by field name (it was refused before)
        if type(value).__name__ != "RowTypeInfo" or not hasattr(value, "get_field_names"):
            return value
        kinds: dict[str, Any] = {"integer": int, "number": float, "boolean": bool,
                                 "string": str}
        schema = _row_schema(value)["properties"]
        fields: dict[str, Any] = {
            name: (kinds.get(schema[name].get("type", ""), Any), ...) for name in schema}
        return create_model("RowOutput", **fields)


class ToolType(Enum):
    """Flink Agents' kinds of tools (``api.tools.tool.ToolType``).

    Here a tool call's ``type`` is always a function call; a connection written for Flink
    Agents may put ``ToolType.FUNCTION`` in the tool calls it returns (it reads as
    ``"function"``).
    """

    MODEL_BUILT_IN = "model_built_in"
    FUNCTION = "function"
    REMOTE_FUNCTION = "remote_function"
    MCP = "mcp"


class _ToolKind(type):
    """``isinstance(x, Tool)`` holds for every tool resource, as for Flink Agents' tools."""

    def __instancecheck__(cls, instance: Any) -> bool:
        if type.__instancecheck__(cls, instance):
            return True
        return cls is Tool and isinstance(instance, Resource) \
            and getattr(instance, "RESOURCE_TYPE", None) is ResourceType.TOOL


class Tool(metaclass=_ToolKind):
    """Flink Agents' ``Tool``: its constructor from a function, and what every tool is.

    A tool got with ``ctx.get_resource(name, ResourceType.TOOL)`` (a ``FunctionTool``, an
    MCP server's tool, a skill's) passes ``isinstance(tool, Tool)``, as Flink Agents' do.
    It cannot be subclassed (Flink Agents' custom ``Tool`` with ``metadata``,
    ``tool_type()`` and ``call()``): a tool here is a function (``@tool``,
    ``Tool.from_callable``), whose calls the runtime records and replays.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Refuse a subclass at its definition, saying how to write the tool instead.

        Raises:
            TypeError: always.
        """
        raise TypeError(
            f"{cls.__qualname__} subclasses Tool, which a program cannot extend here "
            "(Flink Agents' custom Tool, with metadata, tool_type() and call(), has no "
            "counterpart): write the tool as a function, declared on the agent with "
            "@tool, or given as Tool.from_callable(fn) to env.add_resource(name, "
            "ResourceType.TOOL, ...); its signature and docstring give the schema the "
            "model sees, and its calls are recorded and replayed")

    @staticmethod
    def from_callable(func: Callable[..., Any], *,
                      injected_args: dict[str, Any] | None = None) -> FunctionTool:
        """A ``FunctionTool`` of ``func``.

        Args:
            func: the function; its signature and docstring (Google or NumPy style) give the
                schema.
            injected_args: parameters the runtime fills instead of the model
                (``InjectedArg``), left out of the schema.

        Returns:
            The tool.
        """
        made = FunctionTool.from_function(func)
        specs = injected_specs(func, injected_args)
        return made.model_copy(update={"injected_args": specs}) if specs else made


class RunState(str, Enum):
    """The states of a remote run (``RunStatus.State``)."""

    NOT_STARTED = "not_started"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"


class RunStatus(_RunStatus):
    """Our ``RunStatus`` with Flink Agents' ``RunStatus.State`` enum.

    ``RunStatus(state=RunStatus.State.COMPLETED)`` equals ``RunStatus.completed()``.
    """

    State: ClassVar[type[RunState]] = RunState


class InternalSubagentResourceDescriptorBuilder:
    """Builds the descriptor of an internal sub-agent.

    ``...Builder(agent).description(d).input_schema(s).build()`` is
    ``ResourceDescriptor(InternalSubagent, agent=agent, ...)``.

    Args:
        agent: the ``Agent`` (instance, class or ``module:qualname``) run as the sub-agent.
    """

    def __init__(self, agent: Any) -> None:
        self._arguments: dict[str, Any] = {"agent": agent}

    def description(self, text: str) -> InternalSubagentResourceDescriptorBuilder:
        """Set what the sub-agent does (shown to chat models that may delegate)."""
        self._arguments["description"] = text
        return self

    def input_schema(self, schema: str) -> InternalSubagentResourceDescriptorBuilder:
        """Set the JSON Schema text of the input."""
        self._arguments["input_schema"] = schema
        return self

    def input_type(self, type_: type) -> InternalSubagentResourceDescriptorBuilder:
        """Set the input type (its JSON Schema is derived when no schema is set)."""
        self._arguments["input_type"] = f"{type_.__module__}:{type_.__qualname__}"
        return self

    def build(self) -> ResourceDescriptor:
        """The ``ResourceDescriptor`` of the ``InternalSubagent``."""
        agent = self._arguments["agent"]
        defaults: dict[str, Any] = {}
        for key, getter in (("description", "get_subagent_description"),
                            ("input_schema", "get_subagent_input_schema")):
            fn = getattr(agent, getter, None)
            if key not in self._arguments and callable(fn) and fn() is not None:
                defaults[key] = fn()
        return ResourceDescriptor(InternalSubagent, **{**defaults, **self._arguments})


class ResourceContext(ABC):
    """What a resource finds the other resources of its agent through (Flink Agents' ABC).

    A resource built outside an agent with ``resource_context=`` a ``ResourceContext`` (or
    anything with its ``get_resource``, e.g. ``MagicMock(spec=ResourceContext)``, as Flink
    Agents' own tests build a setup) looks there for the resources it names.
    """

    @abstractmethod
    def get_resource(self, name: str, resource_type: ResourceType) -> Any:
        """Return the resource of type ``resource_type`` named ``name``."""
