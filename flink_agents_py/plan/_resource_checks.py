"""Plan-build checks of one declared resource: its class's kind, a tool's argument schema.

Both mistakes passed the plan and failed every record later: a connection declared as a
``CHAT_MODEL`` (or a ``Prompt`` as a ``TOOL``) failed each chat with a bare
``AssertionError`` (or ``'Prompt' object has no attribute 'metadata'``), and a tool whose
parameter has a type pydantic cannot render (a class of one's own, a forward reference to
a name that does not exist) failed each chat offering it with pydantic's long error, not
naming the tool.
"""

from __future__ import annotations

import inspect
from typing import Any, get_type_hints

from pydantic import TypeAdapter

from ..api import FunctionTool, Resource, ResourceDescriptor, ResourceError, ResourceType
from ..api.internal import clip, import_qualified

__all__ = ["kind_problem", "tool_schema_problem"]


def kind_problem(where: str, rtype: ResourceType, descriptor: ResourceDescriptor,
                 instance: Any) -> str | None:
    """Why the resource's class is not of the type it is declared as, or ``None``.

    A class that cannot be imported here is left to the build (its own error names it).

    Args:
        where: the resource in messages (``chat_model resource 'm'``).
        rtype: the type it is declared as.
        descriptor: its descriptor.
        instance: the declared instance, if one was given.

    Returns:
        The problem, or ``None``.
    """
    if instance is not None:
        cls: Any = type(instance)
    else:
        try:
            cls = import_qualified(descriptor.clazz)
        except ResourceError:
            return None
    if not (isinstance(cls, type) and issubclass(cls, Resource)):
        return (f"{where}: {descriptor.clazz} is not a Resource subclass, so it cannot be "
                f"built as a {rtype.value} resource: name a resource class")
    declared = getattr(cls, "RESOURCE_TYPE", None)
    if declared is None or declared == rtype:
        return None
    return (f"{where}: {cls.__name__} is a {declared.value} resource (its RESOURCE_TYPE), "
            f"not a {rtype.value}: declare it as ResourceType.{declared.name}, or name a "
            f"{rtype.value} class")


def tool_schema_problem(name: str, resource: Any) -> str | None:
    """Why a function tool's arguments cannot be described to a model, or ``None``.

    The JSON Schema a model is offered comes from the function's signature and type hints
    (``FunctionTool.metadata``); computing it once here finds a hint no schema renders.
    Tools of other classes (MCP tools, skills) describe themselves and are not checked.

    Args:
        name: the tool's resource name.
        resource: its ``ResourcePlan``.

    Returns:
        The problem, or ``None``.
    """
    instance = getattr(resource, "_instance", None)
    descriptor: ResourceDescriptor = resource.descriptor
    if isinstance(instance, FunctionTool):
        tool = instance
    else:
        try:
            cls = import_qualified(descriptor.clazz)
            if not (isinstance(cls, type) and issubclass(cls, FunctionTool)):
                return None
            tool = cls(**descriptor.arguments)
            tool.function  # noqa: B018 - imports it (a failure is reported elsewhere)
        except Exception:  # noqa: BLE001 - a tool that cannot be built: reported elsewhere
            return None
    fn = tool.function
    first = next(iter(_parameters(fn)), None)
    if first in ("self", "cls") and "." in getattr(fn, "__qualname__", ""):
        return (f"tool resource {name!r} ({tool.func}): its first parameter is {first!r}, "
                f"but a tool is called as a plain function with the model's arguments alone "
                f"(the model would be asked for {first!r}, and every call would fail): "
                f"declare it with @staticmethod and drop {first!r}, or define it outside "
                f"the class")
    try:
        tool.metadata  # noqa: B018 - builds the JSON Schema the model would be offered
    except Exception as e:  # noqa: BLE001 - whatever rendering the hints raised
        first = (str(e).strip().splitlines() or [""])[0]
        return (f"tool resource {name!r} ({tool.func}): its arguments cannot be described "
                f"to a model as JSON Schema{_culprit(fn)} ({type(e).__name__}: "
                f"{clip(first, 300)}): give each parameter a type hint pydantic renders (str, "
                "int, float, bool, list, dict, a pydantic model or dataclass) that can be "
                "resolved where the function is defined")
    return None


def _parameters(fn: Any) -> list[str]:
    """The names of ``fn``'s parameters (none when its signature cannot be read)."""
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def _culprit(fn: Any) -> str:
    """`` at parameter 'x' (Weird)`` for the first parameter whose hint renders no schema.

    Returns:
        That text, or ``""`` when no single parameter is to blame (or hints cannot be read).
    """
    try:
        hints = get_type_hints(fn)
    except Exception:  # noqa: BLE001 - an unresolvable forward reference: its message says
        return ""
    for param in inspect.signature(fn).parameters:
        if param not in hints:
            continue
        try:
            TypeAdapter(hints[param]).json_schema()
        except Exception:  # noqa: BLE001 - this is the one
            shown = getattr(hints[param], "__name__", None) or repr(hints[param])
            return f" at parameter {param!r} ({clip(str(shown), 80)})"
    return ""

