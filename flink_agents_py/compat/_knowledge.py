"""Flink Agents' names for embeddings, vector stores, retrieval and memory, over ours."""

from __future__ import annotations

from enum import Enum
from typing import Protocol, runtime_checkable

from ..api import (
    EmbeddingModelConnection,
    EmbeddingModelSetup,
    Memory,
    VectorStore,
)

__all__ = [
    "BaseEmbeddingModelConnection",
    "BaseEmbeddingModelSetup",
    "BaseVectorStore",
    "CollectionManageableVectorStore",
    "MemoryObject",
    "MemoryType",
    "SubagentMetadataProvider",
]

BaseEmbeddingModelConnection = EmbeddingModelConnection
"""Flink Agents' name of ``EmbeddingModelConnection`` (implement ``embed_texts``)."""
BaseEmbeddingModelSetup = EmbeddingModelSetup
"""Flink Agents' name of ``EmbeddingModelSetup``."""
BaseVectorStore = VectorStore
"""Flink Agents' name of ``VectorStore``."""
CollectionManageableVectorStore = VectorStore
"""Flink Agents' base of stores that manage collections: every ``VectorStore`` here names
its collection per call; ``ChromaVectorStore`` creates missing ones on write
(``create_collection_if_not_exists``) and drops them with ``delete_collection``."""
MemoryObject = Memory
"""Flink Agents' name of the short-term and sensory memory an action sees (``Memory``)."""


class MemoryType(Enum):
    """The two memories an action sees (Flink Agents' ``memory_object.MemoryType``).

    ``SENSORY`` is ``ctx.sensory_memory``, ``SHORT_TERM`` ``ctx.short_term_memory``; a
    ``MemoryRef`` does not say which memory made it here (``resolve`` reads the short-term
    memory, else the sensory one).
    """

    SENSORY = "sensory"
    SHORT_TERM = "short_term"


@runtime_checkable
class SubagentMetadataProvider(Protocol):
    """An agent that describes itself when given as a sub-agent (``ReActAgent`` does).

    ``add_resource(name, ResourceType.AGENT, agent)`` takes the description and the input
    schema from these methods when the agent has them.
    """

    def get_subagent_description(self) -> str:
        """What the sub-agent does, as the chat model is told."""
        ...

    def get_subagent_input_schema(self) -> str:
        """The JSON Schema (text) of the sub-agent's input."""
        ...
