"""A tool function's docstring read for the model: its summary and its arguments' texts.

Google style (``Args:``), NumPy style (``Parameters`` underlined with dashes, as Apache
Flink Agents' examples write them) and reST (``:param name: text``).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

__all__ = ["docstring_parts"]


_NUMPY_SECTION = re.compile(r"(Parameters|Args|Arguments|Returns|Raises|Yields|Examples?|"
                            r"Notes|See Also|Attributes|Other Parameters)")
_NUMPY_ARGS = ("Parameters", "Args", "Arguments", "Other Parameters")


def _numpy_parts(lines: list[str]) -> tuple[str, dict[str, str]] | None:
    """Summary and argument docs of a NumPy-style docstring (``Parameters`` then dashes).

    Args:
        lines: the docstring's lines.

    Returns:
        ``(summary, {argument: description})``, or ``None`` when ``lines`` has no NumPy
        section header.
    """
    headers = [i for i in range(len(lines) - 1)
               if _NUMPY_SECTION.fullmatch(lines[i].strip())
               and re.fullmatch(r"-{3,}", lines[i + 1].strip())]
    if not headers:
        return None
    summary = " ".join(x.strip() for x in lines[:headers[0]] if x.strip())
    args: dict[str, str] = {}
    for h in headers:
        if lines[h].strip() not in _NUMPY_ARGS:
            continue
        indent: int | None = None
        current: list[str] = []  # (``x, y : int`` documents two parameters)
        for line in lines[h + 2:]:
            if not line.strip():
                continue
            if _NUMPY_SECTION.fullmatch(line.strip()):
                break
            width = len(line) - len(line.lstrip())
            if indent is None:
                indent = width
            if width <= indent:
                if width < indent:
                    break
                m = re.match(r"^(\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?::.*)?$",
                             line.strip())
                current = [n.strip().lstrip("*") for n in m.group(1).split(",")] if m else []
                for name in current:
                    args[name] = ""
            else:
                for name in current:
                    args[name] = f"{args[name]} {line.strip()}".strip()
    return summary, args


_REST_FIELD = re.compile(r":(param|parameter|arg|argument|key|keyword|type|returns?|rtype|"
                         r"raises?|except|exception|yields?|var|ivar|cvar|meta)\b[^:]*:(.*)")


def _rest_parts(lines: list[str]) -> tuple[str, dict[str, str]] | None:
    """Summary and argument docs of a reST (Sphinx) docstring (``:param name: text``).

    Args:
        lines: the docstring's lines.

    Returns:
        ``(summary, {argument: description})``, or ``None`` when no line is a ``:param``
        field.
    """
    if not any(re.match(r":(param|parameter|arg|argument)\s", x.strip()) for x in lines):
        return None
    summary: list[str] = []
    args: dict[str, str] = {}
    current: str | None = None
    in_fields = False
    for line in lines:
        stripped = line.strip()
        m = _REST_FIELD.fullmatch(stripped)
        if m:
            in_fields = True
            head = stripped[1:stripped.index(":", 1)].split()
            current = None
            if m.group(1) in ("param", "parameter", "arg", "argument", "key", "keyword") \
                    and len(head) >= 2:
                current = head[-1].lstrip("*")
                args[current] = m.group(2).strip()
        elif in_fields:
            if current is not None and stripped:
                args[current] = f"{args[current]} {stripped}".strip()
        elif stripped:
            summary.append(stripped)
    return " ".join(summary), args


_GOOGLE_SECTION = re.compile(
    r"(Args|Arguments|Parameters|Keyword Args|Keyword Arguments|Kwargs|Other Parameters|"
    r"Returns?|Raises?|Yields?|Warns|Examples?|Notes?|Warnings?|Attention|Caution|Danger|"
    r"Error|Hint|Important|Tip|Todo|See Also|References|Attributes|Methods):")
"""The section headers of a Google-style docstring (those Sphinx's napoleon reads)."""
_GOOGLE_ARGS = ("Args", "Arguments", "Parameters", "Keyword Args", "Keyword Arguments",
                "Kwargs", "Other Parameters")


def docstring_parts(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """The summary of ``fn``'s docstring and its arguments' descriptions.

    Args:
        fn: the function.

    Returns:
        ``(summary, {argument: description})``.
    """
    doc = inspect.getdoc(fn) or ""
    parts = _numpy_parts(doc.splitlines()) or _rest_parts(doc.splitlines())
    if parts is not None:
        return parts
    summary_lines: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        header = _GOOGLE_SECTION.fullmatch(stripped)
        if header and not line[:1].isspace():  # every section ends the one before
            section = header.group(1)
            current = None
            continue
        if section is None:
            summary_lines.append(stripped)
        elif section in _GOOGLE_ARGS:
            m = re.match(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", stripped)
            if m and line.startswith((" ", "\t")) and not line.startswith(("        ", "\t\t")):
                current = m.group(1).lstrip("*")
                args[current] = m.group(2)
            elif current and stripped:
                args[current] = f"{args[current]} {stripped}".strip()
    return " ".join(s for s in summary_lines if s).strip(), args
