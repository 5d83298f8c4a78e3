"""YAML text to plain data, keeping the line of every place.

``NodeIndex`` knows the lines; ``Report`` collects problems by place.

The document is composed once into PyYAML's node tree (a ``SafeLoader`` with YAML 1.2
booleans); duplicate keys are reported and ``<<`` merge keys resolved on the nodes; then the
tree is turned into dicts and lists, a fresh copy per place (an alias read twice gives two
copies), recording ``loc -> node`` on the way. Every later check speaks in locations
(``("agents", 0, "on")``) and ``Report`` turns them into ``file:line: path: message``.

A document is read within a budget: at most ``MAX_NODES`` nodes once aliases and merge keys
are expanded, nested at most ``MAX_DEPTH`` levels. A few hundred bytes of nested aliases (a
"billion laughs") expand to billions of nodes; such a document is refused with a
``YamlError`` naming the file and line after at most ``MAX_NODES`` nodes of work.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..api.internal import clip
from ._errors import MESSAGE_MAX_CHARS, Loc, YamlError, YamlProblem, loc_path, quoted

__all__ = ["MAX_DEPTH", "MAX_NODES", "MAX_SOURCE_BYTES", "NodeIndex", "Parsed", "Report",
           "Tracked", "describe",
           "parse", "read_source", "read_yaml"]

_MERGE_TAG = "tag:yaml.org,2002:merge"

MAX_NODES = 20_000
"""The most nodes a document may have once its aliases and merge keys are expanded (a
document of agents has hundreds)."""

MAX_DEPTH = 64
"""The deepest a document may nest (mappings and lists in mappings and lists)."""

MAX_SOURCE_BYTES = 16 * 1024 * 1024
"""The biggest document read: 16 MiB (bytes of a file or of ``bytes``, characters of a
text). A document of agents is a few kilobytes; a bigger one is refused before it is read."""


class _OverBudget(Exception):
    """The document is bigger or deeper than the budget.

    Attributes:
        message: what went over.
        line: the line of the node where it went over.
        loc: the place being read then (``()`` while the tree is composed).
    """

    def __init__(self, message: str, line: int | None, loc: Loc = ()) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.loc = loc


def _over_size(node: Node, loc: Loc = ()) -> _OverBudget:
    return _OverBudget(
        f"the document expands to more than {MAX_NODES} nodes once its aliases (*name) and "
        "merge keys (<<) are expanded, which no document of agents needs (an alias bomb?); "
        "it is not read", int(node.start_mark.line) + 1, loc)


class _Loader(yaml.SafeLoader):
    """A safe loader whose booleans are YAML 1.2's (``on``/``yes``/``no`` stay strings).

    Composing the node tree is bounded too: at most ``MAX_NODES`` nodes (an alias counts
    once here) nested at most ``MAX_DEPTH`` levels, so a huge or deep document stops early.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.composed = 0
        self.depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        self.composed += 1
        self.depth += 1
        try:
            if self.composed > MAX_NODES or self.depth > MAX_DEPTH + 1:
                line = int(self.peek_event().start_mark.line) + 1
                if self.depth > MAX_DEPTH + 1:
                    raise _OverBudget(f"the document nests deeper than {MAX_DEPTH} levels",
                                      line)
                raise _OverBudget(f"the document has more than {MAX_NODES} nodes, which no "
                                  "document of agents needs; it is not read", line)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


class Tracked(list[Any]):
    """A list of the document that remembers each item's original index (``origin``).

    Items may be dropped while the document is checked; ``origin[i]`` stays the index the
    ``i``-th remaining item had in the file, so later problems still name the right line.
    """

    def __init__(self, items: list[Any]) -> None:
        super().__init__(items)
        self.origin: list[int] = list(range(len(items)))

    def drop(self, index: int) -> None:
        """Remove the item at (current) ``index``."""
        del self[index]
        del self.origin[index]


def original_loc(data: Any, loc: Loc) -> Loc:
    """Translate a location in ``data`` (after items were dropped) to the file's location.

    Args:
        data: the document's data, with ``Tracked`` lists.
        loc: a location in ``data`` as it is now.

    Returns:
        The same place with every list index as it was in the file.
    """
    out: list[str | int] = []
    node = data
    for part in loc:
        if isinstance(node, Tracked) and isinstance(part, int) and 0 <= part < len(node):
            out.append(node.origin[part])
            node = node[part]
        else:
            out.append(part)
            node = node.get(part) if isinstance(node, dict) else None
    return tuple(out)


@dataclass
class NodeIndex:
    """Where each place of the document is: ``loc -> value node`` and ``loc -> key node``."""

    values: dict[Loc, Node] = field(default_factory=dict)
    keys: dict[Loc, Node] = field(default_factory=dict)

    def line(self, loc: Loc, *, at_key: bool = False) -> int | None:
        """The 1-based line of ``loc``; a place missing from the file gets its parent's line.

        Args:
            loc: the place (file coordinates).
            at_key: the line of the key rather than of its value (for unknown keys).

        Returns:
            The line, or ``None`` when not even a parent is in the file.
        """
        if at_key and loc in self.keys:
            return int(self.keys[loc].start_mark.line) + 1
        for n in range(len(loc), -1, -1):
            node = self.values.get(loc[:n])
            if node is not None:
                return int(node.start_mark.line) + 1
        return None


class Report:
    """The problems of one document, by place, turned into one ``YamlError``.

    Attributes:
        source: the file name.
        index: where each place is.
        translate: maps a location in the (pruned) data to the file's location.
        problems: ``(file location, line, message)`` in the order found.
    """

    def __init__(self, source: str, index: NodeIndex | None = None) -> None:
        self.source = source
        self.index = index or NodeIndex()
        self.translate: Callable[[Loc], Loc] = lambda loc: loc
        self.problems: list[tuple[Loc, int | None, str]] = []

    def add(self, loc: Loc, message: str, *, at_key: bool = False, line: int | None = None,
            translated: bool = False) -> None:
        """Record a problem at ``loc`` (a location in the current data, unless ``translated``)."""
        where = loc if translated else self.translate(loc)
        if line is None:
            line = self.index.line(where, at_key=at_key)
        self.problems.append((where, line, clip(message, MESSAGE_MAX_CHARS)))

    def count(self) -> int:
        """How many problems so far (compare two counts to see whether a step added any)."""
        return len(self.problems)

    def under(self, loc: Loc) -> bool:
        """Whether a problem lies at or below ``loc`` (a location in the current data)."""
        where = self.translate(loc)
        return any(p[: len(where)] == where for p, _, _ in self.problems)

    def error(self) -> YamlError:
        """Every problem as one error (in line order)."""
        return YamlError(self.source, [YamlProblem(self.source, line, loc_path(loc), message)
                                       for loc, line, message in self.problems])


@dataclass
class Parsed:
    """A document read into plain data.

    Attributes:
        data: dicts, ``Tracked`` lists and scalars; ``None`` when the text is not YAML or empty.
        unreadable: places whose value could not be constructed (already reported).
    """

    data: Any
    unreadable: set[Loc]


def read_source(path_or_text: Any) -> tuple[str, str]:
    """Return ``(text, source name)`` for a path, a file object, bytes or YAML text.

    Bytes (a file's, a binary stream's, ``bytes``) are read as UTF-8. A source bigger than
    ``MAX_SOURCE_BYTES`` is refused before it is read in full.

    Raises:
        YamlError: naming the source when it is bigger than ``MAX_SOURCE_BYTES``, or when
            its bytes are not UTF-8 (with the line and column of the first bad byte).
        TypeError: for anything else.
        OSError: when a file cannot be read.
    """
    if isinstance(path_or_text, os.PathLike):
        p = Path(path_or_text)
        return _read_file(p, str(p))
    if hasattr(path_or_text, "read"):
        source = str(getattr(path_or_text, "name", "<stream>"))
        data = path_or_text.read(MAX_SOURCE_BYTES + 1)
        _check_size(len(data), source)
        return (_decode(data, source) if isinstance(data, bytes) else str(data)), source
    if isinstance(path_or_text, bytes):
        _check_size(len(path_or_text), "<string>")
        return _decode(path_or_text, "<string>"), "<string>"
    if not isinstance(path_or_text, str):
        raise TypeError(f"expected a path, a file object or YAML text, got "
                        f"{type(path_or_text).__name__}")
    _check_size(len(path_or_text), "<string>")
    s = path_or_text.strip()
    if "\n" not in s and s and (s.endswith((".yaml", ".yml")) or _is_file(s)):
        return _read_file(Path(s), s)
    return path_or_text, "<string>"


def _read_file(path: Path, source: str) -> tuple[str, str]:
    with path.open("rb") as f:
        data = f.read(MAX_SOURCE_BYTES + 1)  # no more than one byte over the limit
    _check_size(len(data), source)
    return _decode(data, source), source


def _check_size(size: int, source: str) -> None:
    """Refuse a source of more than ``MAX_SOURCE_BYTES``.

    Raises:
        YamlError: naming the source and the limit.
    """
    if size > MAX_SOURCE_BYTES:
        raise YamlError(source, [YamlProblem(
            source, None, "", f"the document is bigger than {MAX_SOURCE_BYTES:,} bytes "
                              f"({MAX_SOURCE_BYTES // (1024 * 1024)} MiB), which no document "
                              "of agents needs; it is not read")])


def _decode(data: bytes, source: str) -> str:
    """``data`` read as UTF-8.

    Returns:
        The text.

    Raises:
        YamlError: naming the source, the line and the column of the first byte that is
            not UTF-8.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        bad = data[e.start:e.end].hex(" ")
        raise YamlError(source, [YamlProblem(
            source, line, "", f"byte {e.start} (column {column}: 0x{bad}) is not UTF-8 "
                              f"({e.reason}); save the file as UTF-8")]) from None


def _is_file(s: str) -> bool:
    try:
        return Path(s).is_file()
    except (OSError, ValueError):  # a name too long, or with a NUL: YAML text, not a path
        return False


def describe(value: Any) -> str:
    """Say how a value reads in a message: ``a list``, ``nothing``, ``'x'``, ``3 (int)``."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if value is None:
        return "nothing"
    if isinstance(value, str):
        return quoted(value)
    return f"{clip(str(value), 200)} ({type(value).__name__})"


def parse(text: str, report: Report) -> Parsed:
    """Read ``text`` into plain data, filling ``report.index`` and reporting YAML problems.

    Args:
        text: the YAML document.
        report: receives the problems (not valid YAML, duplicate keys, bad merge keys,
            unreadable values, non-scalar keys).

    Returns:
        The data (``None`` when there is no document to check).
    """
    try:
        loader = _Loader(text)  # its reader refuses a NUL or a control character at once
        root = loader.get_single_node()
    except _OverBudget as e:
        report.add((), e.message, translated=True, line=e.line)
        return Parsed(None, set())
    except RecursionError:
        report.add((), f"the document is nested too deeply to read (at most {MAX_DEPTH} "
                   "levels)", translated=True)
        return Parsed(None, set())
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        what = " ".join(x for x in (e.context, e.problem) if x)
        report.add((), f"not valid YAML: {what}", translated=True,
                   line=mark.line + 1 if mark is not None else None)
        return Parsed(None, set())
    except yaml.YAMLError as e:
        report.add((), f"not valid YAML: {e}", translated=True)
        return Parsed(None, set())
    if root is None:
        return Parsed(None, set())
    budget = [MAX_NODES]
    unreadable: set[Loc] = set()
    try:
        _prepare(loader, root, report, budget)
        data = _construct(loader, root, (), report, unreadable, (), budget)
    except _OverBudget as e:
        # named at the entry it happened in (agents[0].config), not deep inside an expansion
        # (an alias's nodes carry the lines of its anchor: the line is that of a key as written)
        where = e.loc[:3]
        keyed = next((where[:n] for n in range(len(where), 0, -1)
                      if where[:n] in report.index.keys), None)
        line = report.index.line(keyed, at_key=True) if keyed else None
        report.add(where, e.message, translated=True, line=line or e.line)
        return Parsed(None, set())
    return Parsed(data, unreadable)


def _merged_pairs(node: MappingNode) -> int:
    """How many key-value pairs ``node`` has once its ``<<`` merge keys are resolved."""
    total = 0
    for k, v in node.value:
        if not (isinstance(k, ScalarNode) and k.tag == _MERGE_TAG):
            total += 1
        elif isinstance(v, MappingNode):
            total += len(v.value)
        elif isinstance(v, SequenceNode):
            total += sum(len(m.value) for m in v.value if isinstance(m, MappingNode))
    return total


def read_yaml(text: str, source: str = "<string>", *, kind: str = "YAML",
              first_line: int = 1) -> Any:
    """Any YAML text as plain data, read within the loader's budget: for untrusted YAML.

    The same reading as an agents document: at most ``MAX_NODES`` nodes once aliases and
    merge keys are expanded, ``MAX_DEPTH`` levels, duplicate keys refused, YAML 1.2 booleans
    (``yes``/``no``/``on`` stay strings), each alias read as a copy. Nothing is imported or
    built from tags (a safe loader).

    Args:
        text: the YAML text.
        source: its name in messages (a file name).
        kind: what the text is, in the message (``invalid <kind> <source> ...``).
        first_line: the line of ``source`` the text starts at (a part of a file, such as a
            skill's front matter: its problems name the file's lines).

    Returns:
        dicts, lists and scalars (``None`` for an empty text).

    Raises:
        YamlError: listing every problem with its line.
    """
    report = Report(source)
    parsed = parse(text, report)
    if report.problems:
        found = report.error()
        shift = first_line - 1
        raise YamlError(source, [YamlProblem(p.source, None if p.line is None else p.line + shift,
                                             p.path, p.message) for p in found.details], kind)
    return parsed.data


def read_yaml_file(path: str | os.PathLike[str], *, kind: str = "YAML") -> Any:
    """A YAML file as plain data, read as ``read_yaml`` reads text (for untrusted YAML).

    Args:
        path: the file.
        kind: what the file is, in the message (``invalid <kind> <path> ...``).

    Returns:
        dicts, lists and scalars (``None`` for an empty file).

    Raises:
        YamlError: naming the file and each problem's line: not UTF-8 (the byte too), over
            ``MAX_SOURCE_BYTES``, not YAML, over the loader's budget.
        OSError: when the file cannot be read.
    """
    try:
        text, source = _read_file(Path(path), os.fspath(path))
    except YamlError as e:
        raise YamlError(e.source, e.details, kind) from None
    return read_yaml(text, source, kind=kind)


def _prepare(loader: _Loader, root: Node, report: Report, budget: list[int]) -> None:
    """Report duplicate keys anywhere, then resolve ``<<`` merge keys in place.

    Raises:
        _OverBudget: when the merges would make more pairs than the budget left, or the
            document nests deeper than ``MAX_DEPTH``.
    """
    seen: set[int] = set()

    def walk(node: Node, loc: Loc) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        if len(loc) > MAX_DEPTH:
            raise _OverBudget(f"the document nests deeper than {MAX_DEPTH} levels",
                              int(node.start_mark.line) + 1, loc)
        if isinstance(node, MappingNode):
            first: dict[str, Node] = {}
            read_as: dict[Any, Node] = {}  # by the key's value: 1 and 01, null and ~
            for k, v in node.value:
                key = k.value if isinstance(k, ScalarNode) else "?"
                if isinstance(k, ScalarNode) and k.tag != _MERGE_TAG:
                    if k.value in first:
                        report.add((*loc, key), f"duplicate key {quoted(k.value)} (first at line "
                                   f"{first[k.value].start_mark.line + 1})", translated=True,
                                   line=k.start_mark.line + 1)
                    else:
                        first[k.value] = k
                        _same_value(loader, k, read_as, loc, report)
                walk(v, (*loc, key))
            if any(isinstance(k, ScalarNode) and k.tag == _MERGE_TAG for k, _ in node.value):
                budget[0] -= _merged_pairs(node)  # (the merged mappings are flattened already)
                if budget[0] < 0:
                    raise _over_size(node, loc)
            try:
                loader.flatten_mapping(node)
            except RecursionError:  # a merge key that merges the mapping it is in
                raise _OverBudget("a merge key (<<) merges the mapping it is in",
                                  int(node.start_mark.line) + 1, loc) from None
            except yaml.MarkedYAMLError as e:
                report.add(loc, f"bad merge key: {e.problem}", translated=True,
                           line=node.start_mark.line + 1)
        elif isinstance(node, SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, (*loc, i))

    walk(root, ())


def _same_value(loader: _Loader, k: ScalarNode, read_as: dict[Any, Node], loc: Loc,
                report: Report) -> None:
    """Report key ``k`` when an earlier key of its mapping, written otherwise, reads the same.

    ``1`` and ``01``, ``null`` and ``~``, ``1`` and ``true`` (equal in Python) are one key
    once read: the later value silently replaced the earlier one.
    """
    try:
        value = loader.construct_object(k, deep=True)
        other = read_as.setdefault(value, k)
    except Exception:  # noqa: BLE001 - unreadable (any constructor's failure) or
        # unhashable: reported later (``_scalar``)
        loader.recursive_objects.pop(k, None)  # PyYAML keeps a node it failed on marked
        return
    if other is not k:
        report.add((*loc, k.value), f"duplicate key: {quoted(k.value)} reads as "
                   f"{describe(value)}, as {quoted(other.value)} at line "
                   f"{other.start_mark.line + 1} does, so one value would replace the other; "
                   "keep one of them", translated=True, line=k.start_mark.line + 1)


_UNREADABLE = object()
_MAX_INT_BITS = 4096
"""The largest integer read, in bits (about 1,233 decimal digits)."""

_PLAIN_TAGS = frozenset({"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"})
"""The tags of an untagged mapping and list (what the composer resolves them to)."""


def _construct(loader: _Loader, node: Node, loc: Loc, report: Report, unreadable: set[Loc],
               stack: tuple[int, ...], budget: list[int]) -> Any:
    budget[0] -= 1
    if budget[0] < 0:
        raise _over_size(node, loc)
    if len(stack) > MAX_DEPTH:
        raise _OverBudget(f"the document nests deeper than {MAX_DEPTH} levels once its "
                          "aliases are expanded", int(node.start_mark.line) + 1, loc)
    report.index.values[loc] = node
    if id(node) in stack:
        report.add(loc, "an alias refers to the node it is in", translated=True)
        unreadable.add(loc)
        return _UNREADABLE
    if isinstance(node, (MappingNode, SequenceNode)) and node.tag not in _PLAIN_TAGS:
        # a safe loader reads the scalars of a tagged mapping or list as plain data and drops
        # the tag: refused, as an unknown tag on a scalar is (the value never meant data)
        report.add(loc, f"the tag {quoted(node.tag)} is not read: a document of plain mappings, "
                   "lists and scalars has no tags", translated=True,
                   line=node.start_mark.line + 1)
        unreadable.add(loc)
        return _UNREADABLE
    if isinstance(node, MappingNode):
        out: dict[Any, Any] = {}
        for k, v in node.value:
            if not isinstance(k, ScalarNode) or k.tag == _MERGE_TAG:
                report.add(loc, "a key must be a plain name", translated=True,
                           line=k.start_mark.line + 1)
                continue
            key = _scalar(loader, k, loc, report, unreadable)
            if key is _UNREADABLE:
                continue
            place = (*loc, key)
            report.index.keys[place] = k
            value = _construct(loader, v, place, report, unreadable, (*stack, id(node)), budget)
            if value is _UNREADABLE:
                out.pop(key, None)
            else:
                out[key] = value
        return out
    if isinstance(node, SequenceNode):
        items = [_construct(loader, item, (*loc, i), report, unreadable, (*stack, id(node)),
                            budget) for i, item in enumerate(node.value)]
        return Tracked([None if item is _UNREADABLE else item for item in items])
    return _scalar(loader, node, loc, report, unreadable)


def _scalar(loader: _Loader, node: Node, loc: Loc, report: Report, unreadable: set[Loc]) -> Any:
    try:
        value = loader.construct_object(node, deep=True)
        if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
            raise ValueError(f"an integer of more than {_MAX_INT_BITS} bits (any message "
                             f"quoting it would fail: Python writes at most 4,300 digits)")
        return value
    except _OverBudget:
        raise
    except Exception as e:  # noqa: BLE001 - a safe constructor failing on the text: any
        # exception is an unreadable value. ValueError: an integer of more than 4,300 digits,
        # a date of month 13 (Python's int and datetime); OverflowError: a base-60 float past
        # a float's range (``1:2:...:3.5``, read as an integer first); KeyError: ``!!bool
        # maybe``; AttributeError: ``!!timestamp nope``
        loader.recursive_objects.pop(node, None)  # PyYAML keeps a node it failed on marked
        why = getattr(e, "problem", None) or (
            str(e) if isinstance(e, (ValueError, ArithmeticError)) else
            f"{quoted(node.value)} is not a {str(node.tag).rpartition(':')[2]}")
        report.add(loc, f"cannot read the value: {why}", translated=True,
                   line=node.start_mark.line + 1)
        unreadable.add(loc)
        return _UNREADABLE
