"""Apache Flink Agents 0.2's long-term memory forms, over our memory sets.

Flink Agents 0.2 makes a set with ``ctx.long_term_memory.get_or_create_memory_set(name,
item_type, capacity, compaction_strategy)`` (0.2.1: ``compaction_config``) and reads
``memory_set.size`` as a property; items may be ``ChatMessage``s; ``get(ids="one")`` gives
one item; an add that fills the set to its ``capacity`` summarizes it with the strategy's
chat model. ``VersionedMemorySet`` gives those forms over one of our ``MemorySet``s: no
second store, every operation is the set's own (scoped to the agent and the key, applied
when the action completes, replayed from its durable calls).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ._errors import UsageError
from ._messages import ChatMessage, MessageRole
from ._prompts import Prompt

if TYPE_CHECKING:
    from ._long_term_memory import BaseLongTermMemory, MemorySet, MemorySetItem

__all__ = ["CompactionStrategyType", "CompactionStrategy", "SummarizationStrategy",
           "CompactionConfig", "DatetimeRange", "VersionedMemorySet"]

_LOG = logging.getLogger("flink_agents_py.long_term_memory")


class CompactionStrategyType(Enum):
    """How a full memory set is compacted (Flink Agents 0.2: summarization only)."""

    SUMMARIZATION = "summarization"


class CompactionStrategy(BaseModel, ABC):
    """How a memory set is compacted when an add fills it to its capacity."""

    @property
    @abstractmethod
    def type(self) -> CompactionStrategyType:
        """The kind of compaction."""


class SummarizationStrategy(CompactionStrategy):
    """Summarize a full set's items into one with a chat model.

    Attributes:
        model: the name of a ``CHAT_MODEL`` setup.
        prompt: the instructions (a text or a ``Prompt``; default: ours).
        limit: how many summaries Flink Agents asks for; one is made here.
    """

    model: str
    prompt: str | Prompt | None = None
    limit: int = 1

    @property
    def type(self) -> CompactionStrategyType:
        """``SUMMARIZATION``."""
        return CompactionStrategyType.SUMMARIZATION


class CompactionConfig(SummarizationStrategy):
    """Flink Agents 0.2.1's name of ``SummarizationStrategy`` (``model``, ``prompt``, ``limit``)."""


class DatetimeRange(BaseModel):
    """The span of the items a compacted item summarizes (Flink Agents' ``created_time``)."""

    start: datetime
    end: datetime


def _is_metadata(value: Any) -> bool:
    return isinstance(value, dict) or (isinstance(value, list) and bool(value)
                                       and all(isinstance(v, dict) for v in value))


class VersionedMemorySet:
    """A memory set as Flink Agents 0.2 shapes it, over one of ours (see the module).

    Attributes:
        name: the set's name.
        item_type: ``str`` or ``ChatMessage`` (messages are kept as their JSON text).
        capacity: the size at which an add compacts the set.
        compaction_strategy: how it compacts (``compaction_config``: the same).
    """

    def __init__(self, ltm: BaseLongTermMemory, memory_set: MemorySet, item_type: type,
                 capacity: int, compaction_strategy: CompactionStrategy | None) -> None:
        if item_type not in (str, ChatMessage):
            raise UsageError(f"memory set {memory_set.name!r}: item_type must be str or "
                             f"ChatMessage, not {item_type!r}")
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise UsageError(f"memory set {memory_set.name!r}: capacity must be a whole "
                             f"number >= 1, not {capacity!r}")
        self._ltm = ltm
        self._set = memory_set
        self.name = memory_set.name
        self.item_type = item_type
        self.capacity = capacity
        self.compaction_strategy = compaction_strategy

    @property
    def compaction_config(self) -> CompactionStrategy | None:
        """Flink Agents 0.2.1's name of ``compaction_strategy``."""
        return self.compaction_strategy

    def __repr__(self) -> str:
        return (f"MemorySet({self.name!r}, item_type={self.item_type.__name__}, "
                f"capacity={self.capacity})")

    @property
    def size(self) -> int:
        """How many items the set holds (a property, as in Flink Agents 0.2)."""
        return self._set.size

    def _text(self, item: Any) -> str:
        if self.item_type is ChatMessage:
            if not isinstance(item, ChatMessage):
                raise UsageError(f"memory set {self.name!r} holds ChatMessage items, not "
                                 f"{type(item).__name__}")
            return item.model_dump_json()
        if not isinstance(item, str):
            raise UsageError(f"memory set {self.name!r} holds str items, not "
                             f"{type(item).__name__}")
        return item

    def _read(self, item: MemorySetItem) -> MemorySetItem:
        if self.item_type is not ChatMessage:
            return item
        try:
            value: Any = ChatMessage.model_validate_json(item.value)
        except ValueError:  # a summary (or an item added as text through our API)
            value = ChatMessage(role=MessageRole.ASSISTANT, content=item.value)
        return item.model_copy(update={"value": value})

    def add(self, items: Any, ids: Any = None,
            metadatas: dict[str, Any] | list[dict[str, Any]] | None = None) -> list[str]:
        """Add items (one or a list); compact the set when it reaches its capacity.

        Args:
            items: a text or a ``ChatMessage`` (by ``item_type``), or a list of them.
            ids: names for the items: not offered (each item's id is made here, scoped to
                the key); a metadata dict given here by position is taken as
                ``metadatas``, as Flink Agents 0.3's ``add(items, metadatas)``.
            metadatas: one metadata dict for all items, or one per item.

        Returns:
            The ids the items will have.

        Raises:
            UsageError: for ``ids``, or an item that is not of the set's ``item_type``.
        """
        if ids is not None and metadatas is None and _is_metadata(ids):
            ids, metadatas = None, ids
        if ids is not None:
            raise UsageError(f"memory set {self.name!r}: add(ids=...) is not offered (item "
                             "ids are made per key, so another key cannot reach them): use "
                             "the ids add returns")
        many = items if isinstance(items, list) else [items]
        added = self._set.add([self._text(i) for i in many], metadatas)
        if self.compaction_strategy is not None and self.size >= self.capacity:
            self._compact()
        return added

    def _compact(self) -> None:
        strategy = self.compaction_strategy
        if not isinstance(strategy, SummarizationStrategy):
            _LOG.warning("memory set %r reached its capacity (%d) and %s is not a "
                         "summarization: left as it is", self.name, self.capacity,
                         type(strategy).__name__)
            return
        prompt = strategy.prompt
        if isinstance(prompt, Prompt):
            prompt = prompt.format_string()
        self._ltm.summarize_set(self._set, strategy.model, prompt)

    def get(self, ids: Any = None) -> Any:
        """Items by id, or every item (``ids=None``).

        Args:
            ids: one id (gives that item, or ``None``) or a list of ids.

        Returns:
            One item for one id given as text, else a list.
        """
        if isinstance(ids, str):
            found = self._set.get(ids)
            return self._read(found[0]) if found else None
        items = self._set.get(ids, None, None if ids is None else 100)
        return [self._read(i) for i in items]

    def search(self, query: str, limit: int, filters: dict[str, Any] | None = None,
               **kwargs: Any) -> list[MemorySetItem]:
        """The ``limit`` stored items closest in meaning to ``query``.

        Returns:
            The items, closest first.
        """
        return [self._read(i) for i in self._set.search(query, limit, filters, **kwargs)]

    async def asearch(self, query: str, limit: int, filters: dict[str, Any] | None = None,
                      **kwargs: Any) -> list[MemorySetItem]:
        """Async ``search``.

        Returns:
            The items, closest first.
        """
        found = await self._set.asearch(query, limit, filters, **kwargs)
        return [self._read(i) for i in found]

    def delete(self, ids: Any = None) -> None:
        """Delete items by id (``None``: every item) when the action completes."""
        self._set.delete(ids)

    def acompact(self, chat_model: str, *, instructions: str | None = None,
                 max_items: int = 200) -> Awaitable[str | None]:
        """Our ``MemorySet.acompact``.

        Returns:
            The awaitable of the summary item's id.
        """
        return self._set.acompact(chat_model, instructions=instructions, max_items=max_items)
