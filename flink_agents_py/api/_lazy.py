"""Public names a package imports from its modules on first use (PEP 562)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, homes: Mapping[str, str], names: Iterable[str]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's module-level ``__getattr__`` and ``__dir__`` for names it loads lazily.

    A Flink worker unpickling an operator imports the packages on its way; names only a
    job's client uses (the builder, Kafka, the local runner, traces) then cost nothing there.

    Args:
        package: the package's ``__name__``.
        homes: each lazily loaded public name -> its module in the package (``"_builder"``).
        names: every public name of the package (its ``__all__``), for ``dir()``.

    Returns:
        ``(__getattr__, __dir__)``: the first imports a name's module on first use and keeps
        the name in the package (raising ``AttributeError`` for a name it does not export);
        the second lists the package's names, those not imported yet included.
    """
    public = frozenset(names)

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module hook's name (PEP 562)
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:  # noqa: N807
        return sorted(set(vars(sys.modules[package])) | public)

    return __getattr__, __dir__
