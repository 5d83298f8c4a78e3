"""Memory as an action sees it: the committed tree plus the action's own uncommitted writes."""

from __future__ import annotations

import copy
from typing import Any, cast

from ...api import Memory, MemoryRef
from ...api.internal import MemoryObject, memory_ref_of
from .._serde import from_json_value, is_tagged_model, to_json_value

__all__ = ["ActionMemory", "apply_writes"]

_DELETE = object()


_ATOMIC = frozenset({str, int, float, bool, type(None)})


def _copy(value: Any) -> Any:
    """A deep copy of a memory value (JSON-form data, fast; anything else by ``deepcopy``)."""
    kind = type(value)
    if kind is dict or kind is MemoryObject:
        return {k: v if type(v) in _ATOMIC else _copy(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _ATOMIC else _copy(v) for v in value]
    if kind in _ATOMIC:
        return value
    return copy.deepcopy(value)


def _read(value: Any) -> Any:
    """A copy of a stored value as an action reads it: its pydantic models rebuilt."""
    kind = type(value)
    if kind is dict:
        if is_tagged_model(value):
            return from_json_value(value)
        return {k: v if type(v) in _ATOMIC else _read(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _ATOMIC else _read(v) for v in value]
    return _copy(value)


_PATHS: dict[str, list[str]] = {}
"""Checked paths, split (read only: shared by every write log that holds them)."""
_CACHED_PATH_CHARS = 256
"""The longest path ``_PATHS`` keeps: a path made from a record (a name it holds) may be any
length, and the cache outlives the runs that used it."""


def _split(path: str) -> list[str]:
    parts = _PATHS.get(path) if type(path) is str else None
    if parts is not None:
        return parts
    if not isinstance(path, str) or not path or any(not p for p in path.split(".")):
        shown = path if not isinstance(path, str) or len(path) <= 200 else path[:200] + "..."
        raise ValueError(f"memory path must be dotted names like 'a.b', got {shown!r}")
    parts = path.split(".")
    if len(path) <= _CACHED_PATH_CHARS:
        if len(_PATHS) >= 4096:
            _PATHS.clear()
        _PATHS[path] = parts
    return parts


def _get(tree: dict[str, Any], parts: list[str], default: Any) -> Any:
    node: Any = tree
    for p in parts:
        if not isinstance(node, dict) or p not in node:
            return default
        node = node[p]
    return node


def _apply(tree: dict[str, Any], parts: list[str], value: Any) -> None:
    node = tree
    for p in parts[:-1]:
        nxt = node.get(p)
        if not isinstance(nxt, dict):
            if value is _DELETE:
                return
            nxt = node[p] = {}
        node = nxt
    if value is _DELETE:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = _copy(value)


def apply_writes(tree: dict[str, Any], writes: list[tuple[list[str], Any]]) -> None:
    """Apply an action's write log to a committed tree, in order (in place)."""
    for parts, value in writes:
        _apply(tree, parts, value)


class ActionMemory(Memory):
    """One action's view of a memory tree.

    Reads see the committed tree as of the action's first write plus the action's own writes;
    writes are logged and applied to the committed tree when the action completes
    (``apply_writes``), so an action that fails or is re-executed after a restore leaves no
    partial writes behind.

    Args:
        base: the committed tree (not modified by this class).
        name: ``"short_term_memory"`` or ``"sensory_memory"``, for error messages.
    """

    def __init__(self, base: dict[str, Any], name: str) -> None:
        self._base = base
        self._name = name
        self._view: dict[str, Any] | None = None
        self.writes: list[tuple[list[str], Any]] = []

    def rebase(self, base: dict[str, Any]) -> None:
        """Read the committed tree from ``base`` from now on (own writes are kept)."""
        self._base = base

    def _tree(self) -> dict[str, Any]:
        return self._view if self._view is not None else self._base

    def get(self, path: str | MemoryRef, default: Any = None) -> Any:
        """Return a copy of the value at ``path`` (a dotted path or a ``MemoryRef``).

        Its models are rebuilt and an object (a dict) is a ``MemoryObject``; ``default``
        (itself, not a copy) when nothing is there.
        """
        ref = memory_ref_of(path)
        text = ref.path if ref is not None else cast(str, path)
        value = _get(self._tree(), _split(text), _DELETE)
        if value is _DELETE:
            return default
        if type(value) is dict and not is_tagged_model(value):
            return MemoryObject(self, text, _read(value))
        return _read(value)

    def set(self, path: str, value: Any) -> MemoryRef:
        """Log a write of ``value`` at ``path`` (JSON form checked now); return its reference."""
        parts = _split(path)
        stored = to_json_value(value, f"{self._name} value at {path!r}")
        if self._view is None:
            self._view = _copy(self._base)
        _apply(self._view, parts, stored)
        self.writes.append((parts, stored))
        return MemoryRef(path=path, type_name=type(value).__qualname__)

    def delete(self, path: str) -> None:
        """Log a deletion of ``path``."""
        parts = _split(path)
        if self._view is None:
            self._view = _copy(self._base)
        _apply(self._view, parts, _DELETE)
        self.writes.append((parts, _DELETE))

    def to_dict(self) -> dict[str, Any]:
        """Return a copy of the whole tree as this action sees it."""
        tree: dict[str, Any] = _copy(self._tree())
        return tree
