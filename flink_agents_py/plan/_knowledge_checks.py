"""Plan-build checks of embedding models, vector stores and long-term memory references."""

from __future__ import annotations

from typing import Any

from ..api import (
    EmbeddingModelSetup,
    LongTermMemoryOptions,
    ResourceError,
    ResourceType,
    VectorStore,
)
from ..api._resources import import_qualified

__all__ = ["check_knowledge_references"]


def _class_of(rp: Any, where: str, problems: list[str]) -> type | None:
    try:
        cls = import_qualified(rp.descriptor.clazz)
    except ResourceError as e:
        problems.append(f"{where}: {e}")
        return None
    return cls if isinstance(cls, type) else None


def check_knowledge_references(resources: dict[ResourceType, dict[str, Any]],
                               config: dict[str, Any], problems: list[str]) -> None:
    """Add a problem for each name that points nowhere.

    An embedding model setup naming an undeclared connection, a vector store naming an
    undeclared embedding model, and a long-term memory configuration naming an undeclared
    vector store.
    """
    connections = resources.get(ResourceType.EMBEDDING_MODEL_CONNECTION, {})
    setups = resources.get(ResourceType.EMBEDDING_MODEL, {})
    stores = resources.get(ResourceType.VECTOR_STORE, {})
    for name, rp in setups.items():
        where = f"embedding_model resource {name!r}"
        cls = _class_of(rp, where, problems)
        conn = rp.descriptor.arguments.get("connection")
        if cls is not None and issubclass(cls, EmbeddingModelSetup) and conn is not None \
                and conn not in connections:
            problems.append(f"{where} names connection {conn!r}, which is not declared "
                            "(an embedding_model_connection)")
    for name, rp in stores.items():
        where = f"vector_store resource {name!r}"
        cls = _class_of(rp, where, problems)
        model = rp.descriptor.arguments.get("embedding_model")
        if cls is not None and issubclass(cls, VectorStore) and model is not None \
                and model not in setups:
            problems.append(f"{where} names embedding model {model!r}, which is not declared "
                            "(an embedding_model_setup)")
    ltm = config.get(LongTermMemoryOptions.VECTOR_STORE)
    if ltm is not None and ltm not in stores:
        problems.append(f"configuration {LongTermMemoryOptions.VECTOR_STORE!r} names vector "
                        f"store {ltm!r}, which is not declared")
