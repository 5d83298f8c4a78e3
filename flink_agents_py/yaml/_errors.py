"""The errors of the YAML loader: one ``YamlError`` listing every ``YamlProblem``."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from ..api import AgentsError
from ..api.internal import MESSAGE_MAX_CHARS, clip

__all__ = ["MESSAGE_MAX_CHARS", "VALUE_MAX_CHARS", "Loc", "YamlError", "YamlProblem",
           "loc_path", "quoted", "unknown_key"]

VALUE_MAX_CHARS = 200
"""The most characters of a value a message quotes (``quoted``); a longer one is cut."""

Loc = tuple[str | int, ...]
"""A place in the document as keys and list indexes: ``("agents", 0, "actions", 1, "on")``."""


def quoted(value: Any, limit: int = VALUE_MAX_CHARS) -> str:
    """How a message quotes a value of the document: its ``repr``, cut when long.

    A document may hold a huge value (a name of megabytes); a message quotes its start and
    end and says how much was cut (``api.internal.clip``), so every message stays short.

    Args:
        value: the value (a name, a key, a path...).
        limit: the most characters of its ``repr`` kept.

    Returns:
        ``repr(value)``, or its start, ``[... N of M characters cut ...]`` and its end.
    """
    return clip(repr(value), limit)


def loc_path(loc: tuple[Any, ...]) -> str:
    """Render a location as the document path users read: ``agents[0].actions[1].on``.

    Args:
        loc: keys (strings) and list indexes (ints).

    Returns:
        The dotted path (a long key cut, as ``quoted`` cuts); ``""`` for the document
        itself.
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out = f"{out}[{part}]"
        else:
            part = clip(str(part), VALUE_MAX_CHARS)  # a key of the document may be huge
            out = f"{out}.{part}" if out else part
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

    def __init__(self, source: str, details: list[YamlProblem], kind: str = "agents YAML"
                 ) -> None:
        self.source = source
        self.kind = kind  # what the file is, in the message ("skill front matter", ...)
        self.details = sorted(details, key=lambda p: (p.line is None, p.line or 0))
        self.problems = [str(p) for p in self.details]
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid {kind} {source} ({len(self.problems)} problem(s)):\n"
                         f"{lines}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.source, self.details, self.kind))


def unknown_key(key: Any, allowed: list[str]) -> str:
    """``unknown key 'promt'`` and, when one allowed key is close, ``; did you mean 'prompt'?``.

    Before, a misspelt key was followed by the whole list of allowed keys alone (21 for a chat
    model setup), for the reader to find the one meant.

    Args:
        key: the unknown key.
        allowed: the keys its place takes.

    Returns:
        The start of the message.
    """
    near = difflib.get_close_matches(key, allowed, n=1, cutoff=0.7) if isinstance(
        key, str) else []
    return f"unknown key {quoted(key)}" + (f" (did you mean {quoted(near[0])}?)" if near else "")
