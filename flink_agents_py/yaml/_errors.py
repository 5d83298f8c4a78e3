"""The errors of the YAML loader: one ``YamlError`` listing every ``YamlProblem``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..api import AgentsError

__all__ = ["Loc", "YamlError", "YamlProblem", "loc_path"]

Loc = tuple[str | int, ...]
"""A place in the document as keys and list indexes: ``("agents", 0, "actions", 1, "on")``."""


def loc_path(loc: tuple[Any, ...]) -> str:
    """Render a location as the document path users read: ``agents[0].actions[1].on``.

    Args:
        loc: keys (strings) and list indexes (ints).

    Returns:
        The dotted path; ``""`` for the document itself.
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out = f"{out}[{part}]"
        else:
            out = f"{out}.{part}" if out else str(part)
    return out


@dataclass(frozen=True)
class YamlProblem:
    """One problem of a document: where (file, line, path) and what.

    Attributes:
        source: the file name (``<string>`` for text).
        line: 1-based line, ``None`` when the problem has no place in the file.
        path: the culprit's path in the document (``agents[0].actions[1].on``).
        message: what is wrong.
    """

    source: str
    line: int | None
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line is not None else self.source
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class YamlError(AgentsError):
    """A YAML document of agents cannot be loaded.

    Attributes:
        source: the file name (``<string>`` for text).
        problems: every problem, each ``"file:line: path: message"``, in line order.
        details: the same problems as ``YamlProblem`` records.
    """

    def __init__(self, source: str, details: list[YamlProblem]) -> None:
        self.source = source
        self.details = sorted(details, key=lambda p: (p.line is None, p.line or 0))
        self.problems = [str(p) for p in self.details]
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid agents YAML {source} ({len(self.problems)} problem(s)):\n"
                         f"{lines}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.source, self.details))
