"""Flink Agents' injected tool arguments (``InjectedArg``, ``@tool(injected_args=...)``).

Not offered here. A Flink Agents program using them imports and defines its tools as
before, and the first use (``InjectedArg.from_config(...)``, ``@tool(injected_args=...)``,
``Tool.from_callable(..., injected_args=...)``) raises a ``NotImplementedError`` saying what
to do instead and where it is documented, not an ``ImportError`` or a ``TypeError`` about an
unknown keyword argument.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from ..api import tool as _tool

__all__ = ["InjectedArg", "NOT_OFFERED", "not_offered", "tool"]

NOT_OFFERED = (
    "Flink Agents' injected tool arguments (InjectedArg, @tool(injected_args=...), "
    "Tool.from_callable(injected_args=...)) are not offered here: bind the values with "
    "functools.partial or a closure and leave them out of the tool's parameters, or read "
    "them in an action (ctx.config.get_str(key)) and pass them in the request; see "
    "docs/reference/flink-agents-names.md (tools.tool.Tool.from_callable)")
"""The message of every use of injected tool arguments."""


def not_offered(what: str) -> NoReturn:
    """Raise the error of an injected-argument use.

    Args:
        what: the call the program made (``InjectedArg.from_config``).

    Raises:
        NotImplementedError: always, naming ``what`` and the names page.
    """
    raise NotImplementedError(f"{what}: {NOT_OFFERED}")


class _InjectedArgMeta(type):
    """Makes every public attribute of ``InjectedArg`` raise the not-offered error."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        not_offered(f"InjectedArg.{name}")


class InjectedArg(metaclass=_InjectedArgMeta):
    """Flink Agents' ``api.tools.InjectedArg``: importable, not offered.

    Any use (``InjectedArg.from_config("key")``, ``InjectedArg(...)``) raises a
    ``NotImplementedError`` naming the alternatives and the names page.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        not_offered("InjectedArg(...)")


def tool(fn: Callable[..., Any] | None = None, *,
         injected_args: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    """Our ``api.tool``, also taking Flink Agents' ``injected_args`` to refuse it clearly.

    Args:
        fn: the function (``@tool`` used bare).
        injected_args: Flink Agents' arguments filled by the runtime: not offered (``None``
            or empty only).
        **kwargs: ``api.tool``'s keywords (``name``, ``description``...).

    Returns:
        What ``api.tool`` returns.

    Raises:
        NotImplementedError: for ``injected_args``.
    """
    if injected_args:
        not_offered("@tool(injected_args=...)")
    return _tool(fn, **kwargs)
