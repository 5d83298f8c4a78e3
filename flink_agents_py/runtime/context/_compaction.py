"""A memory set summarized in a synchronous action (Flink Agents 0.2's compaction on add)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...api import ChatMessage, ChatResponse, MemorySet, MessageRole, ResourceType, VectorStoreError

if TYPE_CHECKING:
    from ..recorder._execution import ActionExecution
    from ._long_term_memory import ActionLongTermMemory

COMPACT = ("Summarize these memory items into one short note that keeps every distinct "
           "fact, one fact per line. Answer with the note only.")
"""The default instructions of a compaction."""


def summarize(ltm: ActionLongTermMemory, memory_set: MemorySet, chat_model: str,
              instructions: str | None) -> str | None:
    """Replace the set's items (up to 200, oldest first) by one summary a chat model writes.

    The model call is a durable call of the action (a replay reads its recorded answer);
    the deletes and the summary's add apply when the action completes, as every write.

    Args:
        ltm: the action's long-term memory (``ActionLongTermMemory.summarize_set``).
        memory_set: the set, as the action sees it.
        chat_model: the name of a ``CHAT_MODEL`` setup.
        instructions: the system message (default: ``COMPACT``).

    Returns:
        The summary item's id, or ``None`` when the set has fewer than two items.

    Raises:
        VectorStoreError: when the model answers with an empty summary.
    """
    items = memory_set.get(limit=200)
    if len(items) < 2:
        return None
    ctx: ActionExecution = ltm._ctx  # noqa: SLF001 - the execution the memory belongs to
    setup = ctx.get_resource(chat_model, ResourceType.CHAT_MODEL)
    chat = setup.chat  # type: ignore[attr-defined]
    response = ctx.durable_execute(chat, compaction_messages(items, instructions))
    return replace_by_summary(memory_set, chat_model, items, response)


def compaction_messages(items: list[Any], instructions: str | None) -> list[ChatMessage]:
    """The request of a compaction: the instructions, then one line per item's value."""
    return [ChatMessage(role=MessageRole.SYSTEM, content=instructions or COMPACT),
            ChatMessage(role=MessageRole.USER, content="\n".join(f"- {i.value}" for i in items))]


def replace_by_summary(memory_set: MemorySet, chat_model: str, items: list[Any],
                       response: ChatResponse) -> str:
    """Log the deletes of ``items`` and the add of the model's summary (applied at completion).

    Returns:
        The summary item's id.

    Raises:
        VectorStoreError: when the model answered with an empty summary.
    """
    summary = (response.message.content or "").strip()
    if not summary:
        raise VectorStoreError(f"memory set {memory_set.name!r}: chat model {chat_model!r} "
                               "answered the compaction with an empty summary")
    memory_set.delete([i.id for i in items])
    return memory_set.add(summary, {"compacted_from": len(items)})[0]
