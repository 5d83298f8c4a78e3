"""Long-term memory: named sets of text items an action can add to, search, get and delete.

Shaped like Apache Flink Agents' long-term memory (``ctx.long_term_memory``,
``get_memory_set(name)``, ``MemorySet.add/get/search/delete``, ``MemorySetItem``). A memory
set belongs to the agent and the current key (``shared=True``: to every key of the agent):
every operation is scoped to it, so an item id of another key or agent finds and deletes
nothing. It is backed by
a ``VECTOR_STORE`` resource (named by the agent's configuration
``LongTermMemoryOptions.VECTOR_STORE``) whose embedding model embeds the items.

Consistency is that of short-term memory: the adds and deletes an action makes apply when
the action completes (in one durable call, with the events it sent), so a failed action
leaves nothing behind and a replayed one does not add twice; until then only the action sees
its own adds (in ``get``, not in ``search``: they are not embedded yet). Reads are durable
calls recorded in the callback that made them, so a replay sees what the first execution
saw; a read made again after a restore leaves out what the key's crashed attempt wrote
after the checkpoint.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from ._errors import UsageError
from ._memory_sets import CompactionStrategy, VersionedMemorySet

__all__ = ["MemorySetItem", "MemorySet", "ItemCount", "BaseLongTermMemory", "LongTermMemoryOptions"]


class LongTermMemoryOptions:
    """Agent configuration keys of long-term memory (``agent.set_config(**{KEY: value})``)."""

    VECTOR_STORE = "long-term-memory.vector-store"
    """Name of the ``VECTOR_STORE`` resource that holds the memory items (required)."""
    COLLECTION = "long-term-memory.collection"
    """The collection of that store used for memory (default: ``long_term_memory``; every
    item is scoped to its agent, so agents may share it)."""


class MemorySetItem(BaseModel):
    """One item of a memory set.

    Attributes:
        memory_set_name: the set it belongs to.
        id: its id (stable on a replay: a keyed hash of the scope, the set, the action
            execution that added it and its position, under a secret the store keeps).
        value: the text (a ``ChatMessage`` in a set made with ``item_type=ChatMessage``).
        created_at: when it was written (UTC), as recorded by the write.
        updated_at: as ``created_at`` (items are not updated in place).
        additional_metadata: the metadata given on ``add``.
        score: on search results, the distance to the query (smaller is closer).

    ``compacted``, ``created_time`` and ``last_accessed_time`` read it as Flink Agents 0.2
    names them.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    memory_set_name: str
    id: str
    value: Any
    created_at: datetime | None = None
    updated_at: datetime | None = None
    additional_metadata: dict[str, Any] | None = None
    score: float | None = None

    @property
    def compacted(self) -> bool:
        """Whether the item is a summary of others (``compact`` made it)."""
        return "compacted_from" in (self.additional_metadata or {})

    @property
    def created_time(self) -> datetime | None:
        """``created_at`` (Flink Agents 0.2's name)."""
        return self.created_at

    @property
    def last_accessed_time(self) -> datetime | None:
        """``updated_at`` (Flink Agents 0.2's name; reads do not touch items here)."""
        return self.updated_at


class MemorySet(ABC):
    """A memory set as one action sees it (valid only during that action)."""

    name: str
    shared: bool

    @abstractmethod
    def add(self, items: str | list[str],
            metadatas: dict[str, Any] | list[dict[str, Any]] | None = None) -> list[str]:
        """Add items; they are stored when the action completes.

        Args:
            items: one text or a list of texts (non-empty).
            metadatas: one metadata dict for all items, or one per item (JSON scalars).

        Returns:
            The ids the items will have.

        Raises:
            EmbeddingError: for an empty text.
            VectorStoreError: for metadata that is not JSON scalars, or a count mismatch.

        """

    @abstractmethod
    def get(self, ids: str | list[str] | None = None, filters: dict[str, Any] | None = None,
            limit: int | None = 100) -> list[MemorySetItem]:
        """Items by id, or up to ``limit`` items matching ``filters``.

        The action's own pending adds and deletes are applied.

        Args:
            ids: one id or a list of ids; when given, ``filters`` and ``limit`` are ignored.
            filters: metadata field values the items must have.
            limit: the most items to return (a whole number >= 0); ``None``: every item.

        Returns:
            The items found.

        Raises:
            ValueError: for another ``limit`` (before anything is read).
        """

    @abstractmethod
    def search(self, query: str, limit: int, filters: dict[str, Any] | None = None,
               **kwargs: Any) -> list[MemorySetItem]:
        """The ``limit`` stored items closest in meaning to ``query`` (a durable call).

        Args:
            query: the text to search for.
            limit: the most items to return (a whole number >= 0).
            filters: metadata field values the items must have.
            **kwargs: arguments of the vector store's query.

        Returns:
            The items, closest first.

        Raises:
            ValueError: for another ``limit`` (before anything is read).
        """

    @abstractmethod
    def asearch(self, query: str, limit: int, filters: dict[str, Any] | None = None,
                **kwargs: Any) -> Awaitable[list[MemorySetItem]]:
        """Async form of ``search``: the action is suspended, other keys run meanwhile."""

    @abstractmethod
    def delete(self, ids: str | list[str] | None = None) -> None:
        """Delete items when the action completes.

        Args:
            ids: one id or a list of ids; ``None``: every item of the set.
        """

    @abstractmethod
    def acompact(self, chat_model: str, *, instructions: str | None = None,
                 max_items: int = 200) -> Awaitable[str | None]:
        """Summarize the set's items into one item with a chat model (awaitable).

        The chat is a durable chat call; the summary is added, and the summarized items
        deleted, when the action completes.

        Args:
            chat_model: name of a ``CHAT_MODEL`` setup.
            instructions: the system message (default: summarize the facts, one per line).
            max_items: the most items summarized at once (the oldest first).

        Returns:
            The summary item's id, or ``None`` when the set has fewer than two items.

        Raises:
            ChatResponseError: when the chat fails.
            VectorStoreError: when the model answers with an empty summary.

        """

    @property
    def size(self) -> ItemCount:
        """How many items the set holds, counting this action's pending adds and deletes.

        Read as a method (``memory_set.size()``, Flink Agents 0.3's form) or as a property
        (``memory_set.size``, 0.2's): the count is an ``int`` that also answers a call.
        """
        return ItemCount(self.count_items())

    @abstractmethod
    def count_items(self) -> int:
        """The count ``size`` gives (each read is a durable call)."""


class ItemCount(int):
    """A memory set's item count: an ``int`` that also returns itself when called.

    Flink Agents 0.2 read ``memory_set.size`` as a property, 0.3 calls ``size()``; a program
    of either compares, adds and formats the value as the number it is.
    """

    __slots__ = ()

    def __call__(self) -> int:
        """The count as a plain ``int`` (``memory_set.size()``)."""
        return int(self)


class BaseLongTermMemory(ABC):
    """``ctx.long_term_memory``: finds memory sets by name."""

    @abstractmethod
    def get_memory_set(self, name: str, shared: bool = False) -> MemorySet:
        """The memory set ``name`` of the current key (``shared``: of every key).

        Sets exist once something was added; a set nothing was added to is empty.

        Args:
            name: the set's name.
            shared: the set every key shares, instead of the current key's.

        Returns:
            The set, as this action sees it.

        Raises:
            ResourceError: when the agent configures no long-term memory vector store.
            ValueError: for an empty name.
        """

    @abstractmethod
    def delete_memory_set(self, name: str, shared: bool = False) -> bool:
        """Delete every item of the set when the action completes.

        Args:
            name: the set's name.
            shared: the set every key shares, instead of the current key's.

        Returns:
            Whether the set held items.
        """

    def get_or_create_memory_set(
        self, name: str, item_type: type = str, capacity: int = 100,
        compaction_strategy: CompactionStrategy | None = None, *,
        compaction_config: CompactionStrategy | None = None, shared: bool = False,
    ) -> VersionedMemorySet:
        """The set ``name`` in Apache Flink Agents 0.2's form (see ``api._memory_sets``).

        Args:
            name: the set's name.
            item_type: ``str`` or ``ChatMessage``.
            capacity: the size at which an add summarizes the set.
            compaction_strategy: how (a ``SummarizationStrategy``; ``None``: never).
            compaction_config: Flink Agents 0.2.1's name of ``compaction_strategy``.
            shared: the set every key shares, instead of the current key's.

        Returns:
            The set, as this action sees it.
        """
        return VersionedMemorySet(self, self.get_memory_set(name, shared), item_type,
                                  capacity, compaction_strategy or compaction_config)

    def summarize_set(self, memory_set: MemorySet, chat_model: str,
                      instructions: str | None) -> str | None:
        """Summarize the set's items into one with a chat model, in a synchronous action.

        Args:
            memory_set: the set.
            chat_model: the name of a ``CHAT_MODEL`` setup.
            instructions: the system message (default: ours).

        Returns:
            The summary item's id, or ``None`` when the set has fewer than two items.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot summarize a memory set")

    # -- Apache Flink Agents' set-taking forms: each is the set's own method ----------------
    def _set(self, memory_set: MemorySet | VersionedMemorySet | str) -> Any:
        return self.get_memory_set(memory_set) if isinstance(memory_set, str) else memory_set

    def size(self, memory_set: MemorySet | VersionedMemorySet | str) -> int:
        """How many items the set holds (Flink Agents 0.2's ``ltm.size(memory_set)``).

        Returns:
            The count.
        """
        found = self._set(memory_set)
        return int(found.size)

    def add(self, memory_set: MemorySet | VersionedMemorySet | str, memory_items: Any,
            metadatas: Any = None, *, ids: Any = None) -> list[str]:
        """``memory_set.add(memory_items, metadatas)`` (Flink Agents' form).

        Flink Agents 0.2's third argument is ``ids`` (0.3's: ``metadatas``): a text or a list
        of texts there is taken as ``ids``.

        Returns:
            The ids of the items added.

        Raises:
            UsageError: for ``ids`` (item ids are made per key here).
        """
        if ids is None and (isinstance(metadatas, str) or (
                isinstance(metadatas, list) and metadatas
                and all(isinstance(m, str) for m in metadatas))):
            ids, metadatas = metadatas, None
        found = self._set(memory_set)
        if isinstance(found, VersionedMemorySet):
            return found.add(memory_items, ids, metadatas)
        if ids is not None:
            raise UsageError(f"memory set {found.name!r}: add(ids=...) is not offered (item "
                             "ids are made per key): use the ids add returns")
        return found.add(memory_items, metadatas)  # type: ignore[no-any-return]

    def get(self, memory_set: MemorySet | str, ids: str | list[str] | None = None,
            filters: dict[str, Any] | None = None, limit: int | None = 100
            ) -> list[MemorySetItem]:
        """``memory_set.get(ids, filters, limit)`` (Flink Agents' form).

        Returns:
            The items found.
        """
        found = self._set(memory_set)
        if isinstance(found, VersionedMemorySet):  # 0.2's form: one id gives one item
            return found.get(ids)  # type: ignore[no-any-return]
        items: list[MemorySetItem] = found.get(ids, filters, limit)
        return items

    def delete(self, memory_set: MemorySet | str, ids: str | list[str] | None = None) -> None:
        """``memory_set.delete(ids)`` (Flink Agents' form)."""
        self._set(memory_set).delete(ids)

    def search(self, memory_set: MemorySet | str, query: str, limit: int,
               filters: dict[str, Any] | None = None, **kwargs: Any) -> list[MemorySetItem]:
        """``memory_set.search(query, limit, filters, **kwargs)`` (Flink Agents' form).

        Returns:
            The items closest to ``query``.
        """
        found: list[MemorySetItem] = self._set(memory_set).search(query, limit, filters,
                                                                  **kwargs)
        return found
