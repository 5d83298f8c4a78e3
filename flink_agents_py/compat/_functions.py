"""Apache Flink Agents' function descriptors (``api/function.py``, 0.3).

Flink Agents 0.3 names an action's function by data: ``PythonFunction(module=...,
qualname=...)`` (``ClassName.method`` for a method) or, for its cross-language actions,
``JavaFunction(qualname=..., method_name=..., parameter_types=[...])``, given to
``Agent.add_action(func=...)``. Here a ``PythonFunction`` action runs the function it names
(imported when the plan is built); a ``JavaFunction`` action is refused when the plan is
built, naming it: Java code cannot run in this Python-only runtime.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..api import PlanError

__all__ = [
    "ACTION_PARAMETER_TYPES",
    "Function",
    "JavaFunction",
    "PythonFunction",
    "resolve_action_function",
]

ACTION_PARAMETER_TYPES: list[str] = [
    "org.apache.flink.agents.api.Event",
    "org.apache.flink.agents.api.context.RunnerContext",
]
"""The Java parameter types of an action method, ``(Event, RunnerContext)``."""


class Function(BaseModel):
    """Flink Agents' base of function descriptors: data naming a function, not a callable."""

    model_config = ConfigDict(frozen=True)


class PythonFunction(Function):
    """A Python function named by its module and qualified name (``Class.method`` too)."""

    module: str
    qualname: str

    @staticmethod
    def from_callable(func: Callable[..., Any]) -> PythonFunction:
        """The descriptor of ``func``.

        Args:
            func: a function (or a static method got through its class).

        Returns:
            Its ``PythonFunction``.
        """
        module = inspect.getmodule(func)
        return PythonFunction(
            module=module.__name__ if module else func.__module__, qualname=func.__qualname__
        )

    def as_callable(self) -> Callable[..., Any]:
        """Import the module and return the function the descriptor names.

        Returns:
            The function.

        Raises:
            ImportError: the module cannot be imported.
            AttributeError: the module (or class) has no such attribute.
        """
        target: Any = importlib.import_module(self.module)
        for part in self.qualname.split("."):
            target = getattr(target, part)
        return target


class JavaFunction(Function):
    """A Java method: declaring class, method name, parameter types (not run here)."""

    qualname: str
    method_name: str
    parameter_types: list[str]

    @classmethod
    def for_action(cls, qualname: str, method_name: str) -> JavaFunction:
        """The descriptor of a Java action method, its ``(Event, RunnerContext)`` filled in.

        Args:
            qualname: the declaring class's fully qualified name.
            method_name: the method's name.

        Returns:
            The descriptor.
        """
        return cls(
            qualname=qualname, method_name=method_name, parameter_types=list(ACTION_PARAMETER_TYPES)
        )


def resolve_action_function(name: str, fn: Any) -> Any:
    """The function action ``name`` runs: a ``PythonFunction``'s target, else ``fn`` itself.

    Args:
        name: the action's name, for messages.
        fn: what ``add_action`` was given.

    Returns:
        The callable.

    Raises:
        PlanError: for a ``JavaFunction``, or a ``PythonFunction`` naming no function.
    """
    if isinstance(fn, JavaFunction):
        raise PlanError(
            [
                f"action {name!r} is the Java method {fn.qualname}.{fn.method_name} "
                f"(JavaFunction): Java actions cannot run in this Python-only runtime; write the "
                f"action as a Python function taking (event, ctx)"
            ]
        )
    if isinstance(fn, PythonFunction):
        try:
            return fn.as_callable()
        except (ImportError, AttributeError) as err:
            raise PlanError(
                [
                    f"action {name!r} is PythonFunction(module={fn.module!r}, "
                    f"qualname={fn.qualname!r}), which names no function: "
                    f"{type(err).__name__}: {err}"
                ]
            ) from err
    return fn
