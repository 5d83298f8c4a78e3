"""Flink Agents' skills declaration, wired onto our skill tools.

The declaration: ``@skills``, ``Skills``, a setup's ``skills=`` and ``allowed_commands=``.

Flink Agents registers skills as a resource of their own and gives every chat model setup
naming them a ``load_skill`` and a ``bash`` tool. Here, ``compat.Agent`` does that wiring
when it lists its resources: for each chat model setup with ``skills=`` (and
``allowed_commands=``) it declares a ``load_skill`` tool (``LoadSkillTool``) over the
agent's ``Skills`` folders, restricted to the named skills, and a ``bash`` tool
(``RunSkillCommandTool``: parsed, allow-listed, no shell, in a bubblewrap sandbox), and
adds both to the setup's ``tools``.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Callable
from typing import Any

from ..api import ActionSpec, ResourceDescriptor, ResourceSpec, ResourceType
from ..api import Agent as _Agent
from ..skills import LoadSkillTool, RunSkillCommandTool
from ._functions import resolve_action_function

__all__ = ["Agent", "Skills", "skills"]


class Skills(LoadSkillTool):
    """Where an agent's skills are (Flink Agents' ``Skills``); here a ``load_skill`` tool."""

    @classmethod
    def from_local_dir(cls, *paths: str) -> Skills:
        """Skills from folders (each a skill folder, or a folder of skill folders)."""
        return cls(paths=[str(p) for p in paths])

    @classmethod
    def from_package(cls, *pairs: tuple[str, str]) -> Skills:
        """Skills from folders inside importable packages: ``(package, path inside it)``."""
        return cls(paths=[str(importlib.resources.files(pkg).joinpath(res))
                          for pkg, res in pairs])


def skills(fn: Any) -> Any:
    """Declare a static method returning ``Skills`` (Flink Agents' ``@skills``)."""
    target: Any = fn.__func__ if isinstance(fn, staticmethod) else fn
    target.__resource_spec__ = ResourceSpec(resource_type=ResourceType.TOOL)
    return fn


def _with_skill_tools(declared: list[tuple[ResourceType, str, Any]]
                      ) -> list[tuple[ResourceType, str, Any]]:
    folders = [p for t, _, v in declared if t is ResourceType.TOOL and isinstance(v, Skills)
               for p in v.paths]
    if not folders:
        return declared
    out: list[tuple[ResourceType, str, Any]] = []
    for rtype, name, value in declared:
        if rtype is ResourceType.TOOL and isinstance(value, Skills):
            continue  # offered through the setups naming its skills
        args = value.arguments if isinstance(value, ResourceDescriptor) else {}
        if rtype is not ResourceType.CHAT_MODEL or "skills" not in args:
            out.append((rtype, name, value))
            continue
        args = dict(args)
        wanted = args.pop("skills")
        allowed = args.pop("allowed_commands", None) or []
        tools = list(args.get("tools") or [])
        load = f"{name}.load_skill"
        out.append((ResourceType.TOOL, load, LoadSkillTool(paths=folders, skills=wanted)))
        tools.append(load)
        if allowed:
            bash = f"{name}.bash"
            out.append((ResourceType.TOOL, bash, RunSkillCommandTool(
                paths=folders, skills=wanted, allowed_commands=list(allowed), name="bash")))
            tools.append(bash)
        out.append((rtype, name, ResourceDescriptor(value.clazz, **{**args, "tools": tools})))
    return out


class Agent(_Agent):
    """Our ``Agent``, with Flink Agents' skills wiring (see the module docstring).

    An action added with a ``PythonFunction`` (``add_action(func=PythonFunction(...))``, Flink
    Agents 0.3's function descriptor) runs the function it names; ``actions`` shows the
    descriptor as it was given.
    """

    def declared_actions(self) -> list[tuple[str, Callable[..., Any], ActionSpec]]:
        """As ``api.Agent.declared_actions``, each function descriptor made its function."""
        return [(name, resolve_action_function(name, fn), spec)
                for name, fn, spec in super().declared_actions()]

    @property
    def actions(self) -> dict[str, tuple[list[str], Any, dict[str, Any] | None]]:
        """Flink Agents' view of the actions, a function descriptor kept as it was given."""
        return {name: (list(spec.triggers), fn, dict(spec.config) or None)
                for name, fn, spec in super().declared_actions()}

    def declared_resources(self) -> list[tuple[ResourceType, str, Any]]:
        """As ``api.Agent.declared_resources``, with the skill tools of setups naming skills."""
        return _with_skill_tools(super().declared_resources())
