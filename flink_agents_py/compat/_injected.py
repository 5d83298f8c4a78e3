"""Flink Agents' injected tool arguments (``InjectedArg``, ``@tool(injected_args=...)``).

A tool parameter named in ``injected_args`` is filled by the runtime when a chat model calls
the tool, from the agent's configuration or the key's sensory or short-term memory, and is
left out of the schema the model is given (``FunctionTool.injected_args``; the tool round
reads the values, ``runtime._tool_results.injected_call``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..api import tool as _tool

__all__ = ["InjectedArg", "ToolParameterSource", "injected_specs", "tool"]


class ToolParameterSource(str, Enum):
    """Where an injected tool parameter's value comes from (case-insensitive)."""

    CONFIG = "config"
    SENSORY_MEMORY = "sensory_memory"
    SHORT_TERM_MEMORY = "short_term_memory"

    @classmethod
    def _missing_(cls, value: object) -> ToolParameterSource | None:
        if isinstance(value, str):
            for source in cls:
                if source.value == value.lower():
                    return source
        return None


class InjectedArg(BaseModel):
    """Flink Agents' ``api.tools.InjectedArg``: the source of an injected tool parameter.

    Attributes:
        source: the configuration, or the sensory (the default) or short-term memory.
        key: the configuration key or memory path; the parameter's name when unset.
    """

    model_config = ConfigDict(frozen=True)

    source: ToolParameterSource = ToolParameterSource.SENSORY_MEMORY
    key: str | None = None

    @staticmethod
    def from_config(key: str) -> InjectedArg:
        """The value of the agent's configuration key ``key``."""
        return InjectedArg(source=ToolParameterSource.CONFIG, key=key)

    @staticmethod
    def from_sensory_memory(path: str) -> InjectedArg:
        """The value at ``path`` of the key's sensory memory."""
        return InjectedArg(source=ToolParameterSource.SENSORY_MEMORY, key=path)

    @staticmethod
    def from_short_term_memory(path: str) -> InjectedArg:
        """The value at ``path`` of the key's short-term memory."""
        return InjectedArg(source=ToolParameterSource.SHORT_TERM_MEMORY, key=path)

    def with_default_key(self, key: str) -> InjectedArg:
        """This source, keyed by ``key`` when it names no key of its own."""
        return self if self.key else InjectedArg(source=self.source, key=key)


def injected_specs(fn: Callable[..., Any],
                   injected_args: Mapping[str, Any] | None) -> dict[str, dict[str, str]]:
    """``injected_args`` as ``FunctionTool.injected_args`` holds them, checked against ``fn``.

    Args:
        fn: the tool's function.
        injected_args: parameter name -> ``InjectedArg`` (or its dict form).

    Returns:
        parameter name -> ``{"source": ..., "key": ...}``.

    Raises:
        TypeError: when ``injected_args`` is not a mapping of such specs.
        ValueError: when one names a parameter ``fn`` does not have (and no ``**kwargs``).
    """
    if not injected_args:
        return {}
    if not isinstance(injected_args, Mapping):
        raise TypeError("'injected_args' must be a dict mapping parameter names to "
                        "injection specs (InjectedArg.from_config(...)...)")
    target: Any = fn.__func__ if isinstance(fn, staticmethod) else fn
    params = inspect.signature(target).parameters
    open_ended = any(p.kind is p.VAR_KEYWORD for p in params.values())
    specs: dict[str, dict[str, str]] = {}
    for name, spec in injected_args.items():
        if isinstance(spec, dict):
            spec = InjectedArg.model_validate(spec)
        if not isinstance(spec, InjectedArg):
            raise TypeError(f"unsupported injected arg spec for {name!r}: {spec!r}")
        if name not in params and not open_ended:
            raise ValueError(f"injected tool parameter {name!r} is not a parameter of "
                             f"{getattr(target, '__qualname__', target)!r}")
        full = spec.with_default_key(name)
        specs[name] = {"source": full.source.value, "key": str(full.key)}
    return specs


def tool(fn: Callable[..., Any] | None = None, *,
         injected_args: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
    """Our ``api.tool``, also taking Flink Agents' ``injected_args``.

    Args:
        fn: the function (``@tool`` used bare).
        injected_args: parameters the runtime fills (``InjectedArg``), hidden from the model.
        **kwargs: ``api.tool``'s keywords (``name``, ``description``...).

    Returns:
        What ``api.tool`` returns (the function, marked).
    """
    def mark(f: Any) -> Any:
        specs = injected_specs(f, injected_args)
        if specs:
            target: Any = f.__func__ if isinstance(f, staticmethod) else f
            target.__injected_args__ = specs
        return _tool(f, **kwargs)

    return mark(fn) if fn is not None else mark
