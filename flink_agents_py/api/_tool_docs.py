"""A tool function's docstring read for the model: its summary and its arguments' texts.

Google style (``Args:``), NumPy style (``Parameters`` underlined with dashes, as Apache
Flink Agents' examples write them) and reST (``:param name: text``).
"""

from __future__ import annotations

import difflib
import inspect
import re
import typing
import warnings
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from pydantic.fields import FieldInfo

__all__ = ["ToolDocWarning", "docstring_parts", "warn_of_tool_docs"]


class ToolDocWarning(UserWarning):
    """A tool's signature or docstring tells the model less than it needs (the tool runs)."""


_WARNED: weakref.WeakSet[Any] = weakref.WeakSet()
"""The tool functions already warned about (once each)."""


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


def _described(param: inspect.Parameter) -> bool:
    """Whether ``param`` carries its description itself (``Annotated``, ``Field``)."""
    if isinstance(param.default, FieldInfo) and param.default.description:
        return True
    annotation = param.annotation
    if isinstance(annotation, str):
        return annotation.replace(" ", "").startswith(("Annotated[", "typing.Annotated["))
    return typing.get_origin(annotation) is typing.Annotated


def warn_of_tool_docs(fn: Callable[..., Any], skip: Iterable[str] = (),
                      description: str = "") -> None:
    """Warn, once per function, when tool ``fn`` leaves the model guessing.

    The model sees a tool only through its JSON Schema: a parameter with no type hint is
    ``{}`` there (any value), one with no description a bare name, and a docstring's
    ``Args:`` entry naming no parameter (a misspelling, a renamed parameter) is dropped
    without a word. The warning names the function's file and line, each such parameter
    and what to write; the tool still runs.

    Args:
        fn: the tool's function.
        skip: parameters the runtime fills (not shown to the model).
        description: the tool's description, when one was given apart from the docstring.
    """
    if getattr(fn, "__module__", None) is None or str(fn.__module__).startswith(
            "flink_agents_py."):
        return
    try:
        if fn in _WARNED:
            return
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # not weakly referenceable, or no signature to read
        return
    skipped = set(skip)
    shown = [p for p in params.values() if p.name not in skipped
             and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    summary, docs = docstring_parts(fn)
    problems: list[str] = []
    if not (description or summary):
        problems.append("the model is told nothing of what it does: give it a docstring "
                        "(its first line is the tool's description)")
    untyped = [p.name for p in shown if p.annotation is p.empty]
    if untyped:
        problems.append(f"the model is told no type for {', '.join(untyped)} (any value "
                        f"passes): annotate it, e.g. {untyped[0]}: str")
    names = [p.name for p in shown]
    for name in docs:
        if name not in params:
            near = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
            problems.append(f"its docstring describes {name!r}, which is no parameter"
                            + (f" (did you mean {near[0]!r}?)" if near else "")
                            + ": its text is dropped, the model never sees it")
    bare = [p.name for p in shown if not docs.get(p.name) and not _described(p)]
    if bare:
        problems.append(f"the model is told only the name of {', '.join(bare)}: describe "
                        f"{'it' if len(bare) == 1 else 'each'} under Args: in the docstring "
                        f"('{bare[0]}: what it is', indented)")
    if not problems:
        return
    _WARNED.add(fn)
    code = getattr(fn, "__code__", None)
    warnings.warn_explicit(
        ToolDocWarning(f"tool {getattr(fn, '__name__', fn)!r} ({fn.__qualname__}): "
                       + "; ".join(problems)),
        ToolDocWarning, getattr(code, "co_filename", "<tool>"),
        getattr(code, "co_firstlineno", 0))
