"""Sensory and short-term memory as an action sees it: a tree addressed by dotted paths.

``Memory`` is the root an action gets (``ctx.sensory_memory``, ``ctx.short_term_memory``);
reading a path that holds an object (a dict) gives a ``MemoryObject``, a dict that also reads
and writes the memory below its path, as Apache Flink Agents' nested memory objects do.
``set`` returns a ``MemoryRef`` naming what it wrote, which an event can carry in place of
the data (``ctx.short_term_memory.get(ref)`` or ``ref.resolve(ctx)`` reads it back).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from ._context import RunnerContext

__all__ = ["Memory", "MemoryObject", "MemoryRef", "memory_ref_of"]


class MemoryRef(BaseModel):
    """A reference to a value in memory, as ``Memory.set`` returns it.

    Small and JSON: an event may carry it in place of the data (Flink Agents' idiom for
    large values passed between actions).

    Attributes:
        path: the value's absolute dotted path.
        type_name: the class name of the value written (informative).
    """

    model_config = ConfigDict(frozen=True)

    path: str
    type_name: str = ""

    @staticmethod
    def create(path: str, type_name: str) -> MemoryRef:
        """A reference to ``path`` (Flink Agents' constructor)."""
        return MemoryRef(path=path, type_name=type_name)

    def resolve(self, ctx: RunnerContext) -> Any:
        """The value referred to: in ``ctx.short_term_memory``, else in ``ctx.sensory_memory``.

        A reference does not say which memory made it; the sensory memory is read when the
        short-term memory has nothing at its path (Flink Agents' memory page resolves a
        sensory memory's reference this way).

        Returns:
            The value, or ``None`` when neither memory has one at its path.
        """
        missing = object()
        value = ctx.short_term_memory.get(self, missing)  # one read on a hit, as before
        return ctx.sensory_memory.get(self) if value is missing else value


_REF_KEYS = frozenset(("path", "type_name"))


def memory_ref_of(value: Any) -> MemoryRef | None:
    """``value`` as a ``MemoryRef``.

    Returns:
        It when it is one, one made from its JSON form (an event carrying a reference is
        rebuilt from JSON, its attributes as plain dicts), else ``None``.
    """
    if isinstance(value, MemoryRef):
        return value
    if type(value) is dict and value.keys() == _REF_KEYS and isinstance(value["path"], str) \
            and isinstance(value["type_name"], str):
        return MemoryRef(path=value["path"], type_name=value["type_name"])
    return None


class Memory(ABC):
    """A JSON tree addressed by dotted paths (``"product.count"``).

    Writes made by an action become visible to other actions when the action completes
    (all of them at once, with the events it sent); until then only the writing action sees
    them. Values must be JSON-serializable (a pydantic model is kept with its class and read
    back as it).

    Flink Agents' ``MemoryObject`` methods are here too: ``set`` returns a ``MemoryRef``,
    ``get`` takes one, reading an object (a dict) gives a ``MemoryObject``, and
    ``new_object``, ``get_field_names``, ``get_fields`` and ``is_exist`` work on paths.
    """

    @abstractmethod
    def get(self, path: str | MemoryRef, default: Any = None) -> Any:
        """Return the value at ``path``, or ``default`` when nothing is there.

        Args:
            path: a dotted path (``"product.count"``), or a ``MemoryRef`` (absolute).
            default: what to return when nothing is stored there.

        Returns:
            The stored value (a dict as a ``MemoryObject``), or ``default``.
        """

    @abstractmethod
    def set(self, path: str, value: Any) -> MemoryRef:
        """Store ``value`` (JSON) at ``path``, creating parents as needed.

        Args:
            path: a dotted path (``"product.count"``).
            value: a value with a JSON form.

        Returns:
            A reference to the value written.

        Raises:
            SerializationError: when ``value`` has no JSON form.
        """

    @abstractmethod
    def delete(self, path: str) -> None:
        """Remove what is at ``path`` (nothing happens when nothing is there).

        Args:
            path: a dotted path (``"product.count"``).
        """

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """Return a deep copy of the whole tree as this action sees it."""

    def new_object(self, path: str, *, overwrite: bool = False) -> MemoryObject:
        """The object at ``path``, made empty there when missing (Flink Agents' ``new_object``).

        An object already at ``path`` is returned as it is, its fields kept, ``overwrite`` or
        not, as Flink Agents' memory does (it was emptied before this port found it).

        Args:
            path: a dotted path.
            overwrite: replace a value that is not an object (else that is an error).

        Returns:
            The object, reading and writing below ``path``.

        Raises:
            ValueError: when a value that is not an object is there and not ``overwrite``.
        """
        found = self.get(path, _MISSING)
        if found is not _MISSING and not isinstance(found, dict) and not overwrite:
            raise ValueError(f"memory field {path!r} exists but is not an object "
                             "(new_object(..., overwrite=True) replaces it)")
        if not isinstance(found, dict):
            self.set(path, {})
        made = self.get(path)
        assert isinstance(made, MemoryObject)
        return made

    def get_field_names(self) -> list[str]:
        """The names of the top-level fields, sorted."""
        return sorted(self.to_dict())

    def get_fields(self) -> dict[str, Any]:
        """The top-level fields by name (an object as a ``MemoryObject``)."""
        return {name: self.get(name) for name in self.get_field_names()}

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, str):
            return False
        try:
            return self.get(path, _MISSING) is not _MISSING
        except ValueError:  # a path nothing can be stored at ('', 'a..b'): not there
            return False

    def _by_path(self, key: Any, instead: str) -> TypeError:
        """The error for ``memory[key]`` (memory is read and written by path)."""
        name = getattr(self, "_name", None) or type(self).__name__
        where = f"ctx.{name}" if name.endswith("_memory") else name
        return TypeError(f"{where} is read and written by dotted path, not by [key]: write "
                         f"{where}.{instead.format(key=key)}")

    def __getitem__(self, key: Any) -> Any:
        raise self._by_path(key, "get({key!r})")

    def __setitem__(self, key: Any, value: Any) -> None:
        raise self._by_path(key, "set({key!r}, value) (the change is kept when the action "
                                 "completes)")

    def __delitem__(self, key: Any) -> None:
        raise self._by_path(key, "delete({key!r})")

    def is_exist(self, path: str) -> bool:
        """Whether something is stored at ``path`` (Flink Agents' name for ``path in memory``).

        Returns:
            Whether a value or an object is there; ``False`` for a path nothing can be
            stored at (``""``, ``"a..b"``), as in Flink Agents (``get``, ``set`` and
            ``delete`` refuse it: ``ValueError``).
        """
        return path in self

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())


_MISSING = object()


class MemoryObject(dict[str, Any], Memory):
    """An object (a dict) read from memory, which also reads and writes below its path.

    As a dict it is a copy of what was there when read, plus the writes made through it;
    ``get``, ``set``, ``delete``, ``new_object``, ``is_exist``, ``get_field_names`` and
    ``get_fields`` go to the memory (paths relative to the object's), so they are live.
    Stored, sent or copied, it is a plain dict.

    Args:
        root: the memory it was read from.
        path: its absolute dotted path.
        value: the object's fields.
    """

    def __init__(self, root: Memory, path: str, value: Mapping[str, Any]) -> None:
        super().__init__(value)
        self._root = root
        self._path = path

    def _full(self, path: str) -> str:
        return f"{self._path}.{path}" if path else self._path

    def get(self, path: str | MemoryRef, default: Any = None) -> Any:
        """The value at ``path`` below this object (a ``MemoryRef`` is absolute)."""
        ref = memory_ref_of(path)
        if ref is not None:
            return self._root.get(ref, default)
        return self._root.get(self._full(str(path)), default)

    def set(self, path: str, value: Any) -> MemoryRef:
        """Store ``value`` at ``path`` below this object; returns its reference."""
        ref = self._root.set(self._full(path), value)
        self._put(path, self._root.get(ref))
        return ref

    def delete(self, path: str) -> None:
        """Remove what is at ``path`` below this object."""
        self._root.delete(self._full(path))
        *parents, leaf = path.split(".")
        node: Any = self
        for p in parents:
            node = node.get(p) if isinstance(node, MemoryObject) else (
                node.get(p) if isinstance(node, dict) else None)
        if isinstance(node, dict):
            dict.pop(node, leaf, None)

    def new_object(self, path: str, *, overwrite: bool = False) -> MemoryObject:
        """The object at ``path`` below this object, made empty there when missing."""
        made = self._root.new_object(self._full(path), overwrite=overwrite)
        self._put(path, made)
        return made

    def to_dict(self) -> dict[str, Any]:
        """A deep copy of the object's fields as plain data."""
        value: dict[str, Any] = _plain(self._root.get(self._path, {}))
        return value

    def _put(self, path: str, value: Any) -> None:
        *parents, leaf = path.split(".")
        node: dict[str, Any] = self
        for p in parents:
            nxt = dict.get(node, p)
            if not isinstance(nxt, dict):
                nxt = {}
                dict.__setitem__(node, p, nxt)
            node = nxt
        dict.__setitem__(node, leaf, value)

    def __contains__(self, path: object) -> bool:
        return Memory.__contains__(self, path)

    def __iter__(self) -> Iterator[str]:
        return dict.__iter__(self)

    def __reduce__(self) -> Any:
        return (dict, (_plain(self),))

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        value: dict[str, Any] = _plain(self)
        return value

    __hash__ = None  # type: ignore[assignment]


def _plain(value: Any) -> Any:
    """A deep copy of ``value`` with every ``MemoryObject`` a plain dict."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
