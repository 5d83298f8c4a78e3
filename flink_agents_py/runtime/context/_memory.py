"""Memory as an action sees it: the committed tree plus the action's own uncommitted writes."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any, cast

import orjson

from ...api import Memory, MemoryRef
from ...api.internal import EVENT_ID_SOURCE, MemoryObject, cut_masked, memory_ref_of
from .._serde import _INT_MAX, _INT_MIN, MODEL_TAG, from_json_value, is_tagged_model, to_json_value
from ..core._stepper import DURABLE_FUNCTION
from ..recorder._round_trip import check_round_trip
from ._nested import refuse_nested
from ._owner import refuse_foreign

__all__ = ["ActionMemory", "RESERVED_ROOTS", "apply_writes", "apply_merges", "priors",
           "read_path", "Clock", "MemoryClock", "KeyMerge", "MemoryLoader"]

MemoryLoader = Callable[[], dict[str, Any]]
"""Gives a committed memory tree (read when first needed: a key's memory is loaded then)."""

KeyMerge = tuple[str, Callable[[Any], Any]]
"""A merge into the key's short-term memory: the path, and what makes the new value there
from the one committed (``None`` when there is none)."""

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


_TAG_TEXT = f'"{MODEL_TAG}"'.encode()
"""How a stored model's tag (or an escaped dict's) shows in a stored value's JSON text."""


def _read(value: Any) -> Any:
    """A copy of a stored value as an action reads it: its pydantic models rebuilt.

    A value holding no model (no ``$model`` in its JSON text) is copied through its JSON
    text, in C: a history of messages read costs what orjson does, not a walk in Python.

    Returns:
        The copy (exact: orjson writes and reads back every stored value, floats included).
    """
    kind = type(value)
    if kind is dict or kind is list:
        try:
            text = orjson.dumps(value)
        except orjson.JSONEncodeError:  # nested past orjson's depth: the walk copies it
            return _rebuilt(value)
        if _TAG_TEXT not in text:
            return orjson.loads(text)
        return _rebuilt(value)
    return _copy(value)


def _rebuilt(value: Any) -> Any:
    """``_read``'s walk in Python, rebuilding each tagged model it meets."""
    kind = type(value)
    if kind is dict:
        if is_tagged_model(value):
            return from_json_value(value)
        return {k: v if type(v) in _ATOMIC else _rebuilt(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _ATOMIC else _rebuilt(v) for v in value]
    return _copy(value)


_PATHS: dict[str, list[str]] = {}
"""Checked paths, split (read only: shared by every write log that holds them)."""
_CACHED_PATH_CHARS = 256
"""The longest path ``_PATHS`` keeps: a path made from a record (a name it holds) may be any
length, and the cache outlives the runs that used it."""
_REFS: dict[tuple[str, str], MemoryRef] = {}
"""The ``MemoryRef`` a write returns, by path and value type (paths as short as ``_PATHS``'s)."""


def _split(path: str) -> list[str]:
    parts = _PATHS.get(path) if type(path) is str else None
    if parts is not None:
        return parts
    if not isinstance(path, str) or not path or any(not p for p in path.split(".")):
        shown = path if not isinstance(path, str) or len(path) <= 200 else \
            cut_masked(path, 200) + "..."
        raise ValueError(f"memory path must be dotted names like 'a.b', got {shown!r}")
    parts = path.split(".")
    if MODEL_TAG in parts:  # a node of these fields would read back as a tagged model
        raise ValueError(
            f"memory path {path if len(path) <= 200 else cut_masked(path, 200) + '...'!r} "
            f"has a field "
            f"named {MODEL_TAG!r}, the name the runtime keeps for the class of a stored "
            "pydantic model (a memory object with it and a 'data' field would be read back "
            "as that class): rename the field")
    if len(path) <= _CACHED_PATH_CHARS:
        if len(_PATHS) >= 4096:
            _PATHS.clear()
        _PATHS[path] = parts
    return parts


def _get(tree: dict[str, Any], parts: list[str], default: Any) -> Any:
    node: Any = tree
    for p in parts:  # a stored model is a value: its tagged form has no fields to read
        if not isinstance(node, dict) or p not in node or (p == "data" and MODEL_TAG in node):
            return default
        node = node[p]
    return node


def _apply(tree: dict[str, Any], parts: list[str], value: Any,
           owned: dict[int, Any] | None = None) -> None:
    """Apply one write to ``tree`` (in place), copying each node on its path it does not own.

    Nodes below a tree's root are shared: an action's view shares what it has not written
    with the committed tree, and a committed node with the views made from it and with the
    undo entries of readers (``priors``). So no node below a root is changed in place: a
    write replaces each node along its path with a copy of it (one level, made in C), unless
    ``owned`` (by ``id``, holding the node) says this tree made it; the copies are added to
    ``owned``. The value is stored as it is: the caller hands a value nobody else changes
    (``to_json_value``'s fresh form, a stored value).
    """
    if owned is None:
        owned = {}
    node = tree
    for p in parts[:-1]:
        nxt = node.get(p)
        if not isinstance(nxt, dict) or MODEL_TAG in nxt:  # a value, a stored model too
            if value is _DELETE:
                return
            nxt = node[p] = {}
            owned[id(nxt)] = nxt
        elif id(nxt) not in owned:
            nxt = node[p] = dict(nxt)
            owned[id(nxt)] = nxt
        node = nxt
    if value is _DELETE:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = value


def apply_writes(tree: dict[str, Any], writes: list[tuple[list[str], Any]]) -> None:
    """Apply an action's write log to a committed tree, in order.

    The root is changed in place; every node below it on a written path is replaced, not
    changed (see ``_apply``): the actions in flight share the others.
    """
    owned: dict[int, Any] = {}  # nodes these writes made: theirs alone until they return
    for parts, value in writes:
        if len(parts) == 1 and type(value) in _ATOMIC:  # (what ``_apply`` does for it)
            tree[parts[0]] = value
        else:
            _apply(tree, parts, value, owned)


def priors(tree: dict[str, Any], writes: list[tuple[list[str], Any]]) -> list[list[Any]]:
    """What undoes ``writes`` on ``tree``: ``[path, old value]`` (``[path]``: it was absent).

    Taken before the writes are applied; applied newest first (``ActionMemory``), each puts
    back the value the first write under its path replaced.

    Returns:
        One entry per write, holding the old values themselves: a committed node below the
        root is never changed in place (``_apply``), so they stay as they were.
    """
    out: list[list[Any]] = []
    for parts, _ in writes:
        node: Any = tree
        for j, p in enumerate(parts):
            if not isinstance(node, dict) or MODEL_TAG in node:  # a value: the write made a branch
                out.append([parts[:j], node])
                break
            if p not in node:
                out.append([parts[:j + 1]])
                break
            node = node[p]
        else:
            out.append([list(parts), node])
    return out


class MemoryClock:
    """Counts an action execution's memory operations in its record (``InflightAction``).

    The count is kept in the record (``memory_ops``), so a write another action commits later
    is placed after it, also across a restore. Calling the clock counts one operation and
    gives the undo entries (``priors``, newest first) of writes committed after that
    operation's place in the first execution (usually none).

    It holds the record, never the execution: an ``ActionMemory`` holding it (and the
    execution holding both) makes no reference cycle, so an ended action's objects are freed
    at once, not left to the cyclic garbage collector.

    Args:
        record: the execution's in-flight record (``rebind`` it when the host hands a new one).
        key: the key it belongs to (to tell another key's use of the memory: ``_owner``).
    """

    __slots__ = ("record", "ops", "key")

    def __init__(self, record: Any, key: Any = None) -> None:
        self.record = record
        self.key = key
        self.ops = 0

    def __call__(self, memory: str) -> list[list[Any]]:
        try:  # ``refuse_foreign``'s usual case inline: the stepped execution is the clock's
            mine = EVENT_ID_SOURCE.get().__self__._clock is self  # type: ignore[union-attr]
        except AttributeError:  # none stepped (a durable call's function), or not one
            mine = False
        if not mine:
            refuse_foreign(None, memory, self)  # a memory kept and used by another action
        n = self.ops
        self.ops = n + 1
        record = self.record
        if record.memory_ops <= n:
            record.memory_ops = n + 1
        undo = record.memory_undo
        if not undo:
            return []
        return [e[2:] for e in reversed(undo) if e[0] > n and e[1] == memory]


Clock = Callable[[str], list[list[Any]]]
"""Counts one memory operation of an action (given the memory's name) and returns the undo
entries (``priors``, newest first) of writes other actions committed after the operation's
place in the action's first execution: a re-executed action reads what it read then."""


def read_path(tree: dict[str, Any], path: str) -> Any:
    """A copy of the value at ``path`` of a committed tree (``None`` when there is none).

    Args:
        tree: the tree.
        path: a dotted path.

    Returns:
        The value, copied.
    """
    return _copy(_get(tree, _split(path), None))


def apply_merges(tree: dict[str, Any], merges: list[KeyMerge]) -> None:
    """Apply merges to a committed tree, in order (in place), each on the value it finds.

    A merge, unlike a write, does not overwrite what others committed meanwhile: it makes
    the new value from the one committed when it is applied (a budget's spend adds a
    call's own to it), so what actions running at once merge is all kept.

    Args:
        tree: the key's committed short-term memory.
        merges: the paths and merge functions.
    """
    owned: dict[int, Any] = {}
    for path, merge in merges:
        parts = _split(path)  # the merge gets a copy: the committed value is shared
        _apply(tree, parts, to_json_value(merge(_copy(_get(tree, parts, None))),
                                          f"short_term_memory value at {path!r}"), owned)


RESERVED_ROOTS = {"_budget": "the spend of each budgeted chat model setup",
                  "_flink_agents_py": "the runtime's own entries (the key's epochs)"}
"""Top-level short-term memory entries the runtime writes, never an action (read: allowed;
``_budget`` may also be deleted, to start the key's spend from nothing)."""

SENSORY_RUNTIME_ROOTS = {"_chat": "the open chats", "_subagent": "a sub-agent call's input"}
"""Top-level sensory memory entries the runtime keeps (read by path; not listed)."""


def _refuse_reserved(parts: list[str], path: str, deleting: bool) -> None:
    """Refuse an action's write under a reserved entry (see ``RESERVED_ROOTS``).

    An action writing fields its record names would otherwise let a record set the key's
    spend (an agent budget's entry is adopted by the count every key shares) or its memory
    epoch.

    Raises:
        ValueError: naming the entry.
    """
    what = RESERVED_ROOTS.get(parts[0])
    if what is None or (deleting and parts[0] == "_budget"):
        return
    shown = path if len(path) <= 200 else cut_masked(path, 200) + "..."
    raise ValueError(f"short-term memory path {shown!r} is under {parts[0]!r}, reserved for "
                     f"{what}: an action may read it"
                     + (" or delete it" if parts[0] == "_budget" else "")
                     + " but not write it (keep the action's own data under another name)")


class ActionMemory(Memory):
    """One action's view of a memory tree.

    Reads see the committed tree as of the action's first write plus the action's own writes
    (the view: a root of its own over the committed tree's nodes, each node on a written path
    copied, so a first write costs what its path holds, not what the tree holds);
    writes are logged and applied to the committed tree when the action completes
    (``apply_writes``), so an action that fails or is re-executed after a restore leaves no
    partial writes behind. A read before the first write sees the committed tree as it was
    at that read in the action's first execution: what other actions of the run committed
    after it is undone (``clock``), so a re-executed action reads what it read the first time.

    Args:
        base: the committed tree (not modified by this class).
        name: ``"short_term_memory"`` or ``"sensory_memory"``, for error messages.
        clock: counts each operation and gives what to undo for it (see ``Clock``).
    """

    def __init__(self, base: dict[str, Any], name: str, clock: Clock | None = None) -> None:
        self._base = base
        self._name = name
        self._clock = clock
        self._view: dict[str, Any] | None = None
        self._owned: dict[int, Any] = {}  # the view's nodes it made (see ``_apply``)
        self.writes: list[tuple[list[str], Any]] = []

    def rebase(self, base: dict[str, Any]) -> None:
        """Read the committed tree from ``base`` from now on (own writes are kept)."""
        self._base = base

    def _tree(self) -> dict[str, Any]:
        """The tree one operation sees (counted by the clock; inline in ``get`` and ``_write``)."""
        undo = self._clock(self._name) if self._clock is not None else None
        if self._view is not None:
            return self._view
        return self._undone(undo) if undo else self._base

    def _undone(self, undo: list[list[Any]], owned: dict[int, Any] | None = None
                ) -> dict[str, Any]:
        """The committed tree with ``undo`` applied (see ``Clock``), sharing what it keeps.

        Returns:
            A new root, over new nodes on each undone path (added to ``owned``) and the
            committed tree's nodes elsewhere.
        """
        tree = dict(self._base)
        if owned is None:
            owned = {}
        for entry in undo:
            _apply(tree, entry[0], entry[1] if len(entry) > 1 else _DELETE, owned)
        return tree

    def get(self, path: str | MemoryRef, default: Any = None) -> Any:
        """Return a copy of the value at ``path`` (a dotted path or a ``MemoryRef``).

        Its models are rebuilt and an object (a dict) is a ``MemoryObject``; ``default``
        (itself, not a copy) when nothing is there.
        """
        if type(path) is str:
            text = path
        else:
            ref = memory_ref_of(path)
            text = ref.path if ref is not None else cast(str, path)
        clock = self._clock  # (``_tree`` inline) counted first: a refused path is counted too
        if type(clock) is MemoryClock:  # (its call inline when the stepped execution is
            try:  # the clock's and nothing is to be undone; else called: checked in full)
                mine = EVENT_ID_SOURCE.get().__self__._clock is clock  # type: ignore[union-attr]
            except AttributeError:
                mine = False
            if mine and not (record := clock.record).memory_undo:
                n = clock.ops
                clock.ops = n + 1
                if record.memory_ops <= n:
                    record.memory_ops = n + 1
                undo = None
            else:
                undo = clock(self._name)
        else:
            undo = clock(self._name) if clock is not None else None
        value: Any = self._view
        if value is None:
            value = self._undone(undo) if undo else self._base
        try:  # (``_split``'s cache inline: one look-up, safe beside another thread's clear)
            parts = _PATHS[text]
        except (KeyError, TypeError):  # (not cached; or unhashable: ``_split`` refuses it)
            parts = _split(text)
        for p in parts:  # (``_get`` inline)
            if not isinstance(value, dict) or p not in value \
                    or (p == "data" and MODEL_TAG in value):
                return default
            value = value[p]
        kind = type(value)
        if kind in _ATOMIC:  # (what ``_read`` gives back as it is)
            return value
        if kind is dict and not is_tagged_model(value):
            return MemoryObject(self, text, _read(value))
        return _read(value)

    def _own_view(self) -> dict[str, Any]:
        """The tree the action's writes go to (counted by the clock; made by its first write).

        Returns:
            The view: a new root over the committed tree's nodes (with what the clock says
            to undo), not a copy of the tree; a write copies the nodes on its path
            (``_apply``, ``_owned``).
        """
        clock = self._clock
        undo = clock(self._name) if clock is not None else None
        view = self._view
        if view is None:
            view = self._view = self._undone(undo, self._owned) if undo else dict(self._base)
        return view

    def set(self, path: str, value: Any) -> MemoryRef:
        """Log a write of ``value`` at ``path`` (JSON form checked now).

        Returns:
            Its reference.

        Raises:
            ValueError: for a path under a reserved entry of short-term memory
                (``RESERVED_ROOTS``; the runtime writes those with ``_set_reserved``).
            UsageError: inside a durable call's function (``refuse_nested``): a replay
                returns the call's result without running it, so the write would be lost.
        """
        if DURABLE_FUNCTION.get() is not None:  # (``refuse_nested``'s check inline)
            refuse_nested(f"{self._name}.set")  # a replay would not make the write again
        try:  # (``_split``'s cache inline, as in ``get``)
            parts = _PATHS[path]
        except (KeyError, TypeError):
            parts = _split(path)
        if parts[0] in RESERVED_ROOTS and self._name == "short_term_memory":
            _refuse_reserved(parts, path, False)
        return self._write(parts, path, value)

    def _set_reserved(self, path: str, value: Any) -> MemoryRef:
        """``set`` without the reserved-entry check: the runtime's own writes."""
        return self._write(_split(path), path, value)

    def _write(self, parts: list[str], path: str, value: Any) -> MemoryRef:
        kind = type(value)  # a scalar that is its JSON form: ``_serde._convert``'s first test
        if (kind is str and value.isascii()) or kind is bool or value is None \
                or (kind is int and _INT_MIN <= value <= _INT_MAX) \
                or (kind is float and value - value == 0.0):
            stored, scalar = value, True
        else:
            scalar = False
            stored = to_json_value(value, f"{self._name} value at {path!r}")
            if type(stored) is dict or type(stored) is list:  # a model's validators run on read
                check_round_trip(stored, f"{self._name} value at {path!r}")
        clock = self._clock  # (``_own_view`` and ``_tree`` inline; the clock's call as ``get``)
        if type(clock) is MemoryClock:
            try:
                mine = EVENT_ID_SOURCE.get().__self__._clock is clock  # type: ignore[union-attr]
            except AttributeError:
                mine = False
            if mine and not (record := clock.record).memory_undo:
                n = clock.ops
                clock.ops = n + 1
                if record.memory_ops <= n:
                    record.memory_ops = n + 1
                undo = None
            else:
                undo = clock(self._name)
        else:
            undo = clock(self._name) if clock is not None else None
        view = self._view
        if view is None:
            view = self._view = self._undone(undo, self._owned) if undo else dict(self._base)
        if scalar and len(parts) == 1:  # (what ``_apply`` does for it)
            view[parts[0]] = stored
        else:  # ``stored`` is a fresh form, shared with the write log: changed by no one
            _apply(view, parts, stored, self._owned)
        self.writes.append((parts, stored))
        key = (path, kind.__qualname__)
        try:  # a reference is frozen: one per path and type serves every write
            return _REFS[key]
        except KeyError:
            pass
        ref = MemoryRef(path=path, type_name=key[1])  # validated (two strings): cheaper than
        if len(path) <= _CACHED_PATH_CHARS:  # ``model_construct``'s loop
            if len(_REFS) >= 4096:
                _REFS.clear()
            _REFS[key] = ref
        return ref

    def delete(self, path: str) -> None:
        """Log a deletion of ``path`` (see ``set`` for the reserved entries)."""
        refuse_nested(f"{self._name}.delete")
        parts = _split(path)
        if self._name == "short_term_memory":
            _refuse_reserved(parts, path, True)
        _apply(self._own_view(), parts, _DELETE, self._owned)
        self.writes.append((parts, _DELETE))

    def to_dict(self) -> dict[str, Any]:
        """Return a copy of the whole tree as this action sees it.

        The runtime's own entries (``RESERVED_ROOTS``; in sensory memory the open chats and a
        sub-agent call's input, ``SENSORY_RUNTIME_ROOTS``) are left out, and so out of
        ``get_field_names``, ``get_fields`` and iteration: an agent that lists its memory sees
        its own fields only, as in Flink Agents (``get("_budget")`` reads them).
        """
        tree = self._tree()
        hidden = RESERVED_ROOTS if self._name == "short_term_memory" else SENSORY_RUNTIME_ROOTS
        if not hidden.keys().isdisjoint(tree):
            tree = {k: v for k, v in tree.items() if k not in hidden}
        copied: dict[str, Any] = _read(tree)  # its models rebuilt, as ``get`` reads them
        return copied

    def _names(self) -> list[str]:
        """The top-level fields ``to_dict`` would hold, in its order (one counted operation)."""
        tree = self._tree()
        hidden = RESERVED_ROOTS if self._name == "short_term_memory" else SENSORY_RUNTIME_ROOTS
        return [k for k in tree if k not in hidden]

    def get_field_names(self) -> list[str]:
        """The names of the top-level fields, sorted (``to_dict``'s, without copying it)."""
        return sorted(self._names())

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __contains__(self, path: object) -> bool:
        """Whether something is stored at ``path`` (``get``'s answer, without copying it)."""
        if not isinstance(path, str):
            return False
        tree = self._tree()  # counted first, as ``get`` counts a path it refuses
        try:
            parts = _split(path)
        except ValueError:  # a path nothing can be stored at ('', 'a..b'): not there
            return False
        return _get(tree, parts, _DELETE) is not _DELETE
