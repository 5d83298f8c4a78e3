"""Plan-build checks of embedding models, vector stores and long-term memory references."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Set as AbstractSet
from typing import Any

from ..api import (
    EmbeddingModelSetup,
    LongTermMemoryOptions,
    ResourceDescriptor,
    ResourceError,
    ResourceType,
    VectorStore,
)
from ..api.internal import import_qualified
from ._declared import declared_hint

__all__ = ["agent_identity", "check_knowledge_references", "default_collection",
           "name_default_collections"]


def _class_of(rp: Any, where: str, problems: list[str]) -> type | None:
    try:
        cls = import_qualified(rp.descriptor.clazz)
    except ResourceError as e:
        problems.append(f"{where}: {e}")
        return None
    return cls if isinstance(cls, type) else None


def check_knowledge_references(resources: dict[ResourceType, dict[str, Any]],
                               config: dict[str, Any], problems: list[str],
                               broken: AbstractSet[tuple[ResourceType, str]] = frozenset(),
                               own: dict[ResourceType, dict[str, Any]] | None = None) -> None:
    """Add a problem for each name that points nowhere.

    An embedding model setup naming an undeclared connection, a vector store naming an
    undeclared embedding model, and a long-term memory configuration naming an undeclared
    vector store.

    Args:
        resources: the resources a name may point at, by type and name (an internal
            sub-agent's: its own and its ancestors', ``_inherited.visible``).
        config: the agent's configuration.
        problems: where each problem is added.
        broken: ``(type, name)`` of resources declared but refused (their own problem is
            listed already): a name pointing at one is not reported again.
        own: the agent's own compiled resources, whose names are checked (``None``: those
            of ``resources``).
    """
    own = resources if own is None else own
    connections = resources.get(ResourceType.EMBEDDING_MODEL_CONNECTION, {})
    setups = resources.get(ResourceType.EMBEDDING_MODEL, {})
    stores = resources.get(ResourceType.VECTOR_STORE, {})
    for name, rp in own.get(ResourceType.EMBEDDING_MODEL, {}).items():
        where = f"embedding_model resource {name!r}"
        cls = _class_of(rp, where, problems)
        conn = rp.descriptor.arguments.get("connection")
        if cls is not None and issubclass(cls, EmbeddingModelSetup) and conn is not None \
                and conn not in connections \
                and (ResourceType.EMBEDDING_MODEL_CONNECTION, conn) not in broken:
            problems.append(f"{where} names connection {conn!r}, which is not declared"
                            + declared_hint(str(conn), connections,
                                            "embedding_model_connection"))
    for name, rp in own.get(ResourceType.VECTOR_STORE, {}).items():
        where = f"vector_store resource {name!r}"
        cls = _class_of(rp, where, problems)
        model = rp.descriptor.arguments.get("embedding_model")
        if cls is not None and issubclass(cls, VectorStore) and model is not None \
                and model not in setups and (ResourceType.EMBEDDING_MODEL, model) not in broken:
            problems.append(f"{where} names embedding model {model!r}, which is not declared"
                            + declared_hint(str(model), setups, "embedding_model"))
    ltm = config.get(LongTermMemoryOptions.VECTOR_STORE)
    if ltm is not None and ltm not in stores and (ResourceType.VECTOR_STORE, ltm) not in broken:
        problems.append(f"configuration {LongTermMemoryOptions.VECTOR_STORE!r} names vector "
                        f"store {ltm!r}, which is not declared"
                        + declared_hint(str(ltm), stores, "vector_store"))


def agent_identity(agent: Any) -> str:
    """Who a plan is of: the agent's class as ``module:qualname``.

    An agent of a class of this package (a plain ``Agent``, a ``ReActAgent``, one the YAML
    loader builds) is told apart by its actions' functions and its ``name`` (when it has
    one), appended. Its resources are left out, so adding one keeps the agent's memory and
    default collections.

    Args:
        agent: the agent being compiled.

    Returns:
        The identity (stable across processes and restarts of the same program).
    """
    cls = type(agent)
    ident = f"{cls.__module__}:{cls.__qualname__}"
    if cls.__module__.startswith("flink_agents_py."):
        fns = [f"{getattr(fn, '__module__', '')}:{getattr(fn, '__qualname__', repr(fn))}"
               for _, fn, _ in agent.declared_actions()]
        name = getattr(agent, "name", "")
        ident += "+" + ",".join(fns) + (f"|{name}" if isinstance(name, str) and name else "")
    return ident


def default_collection(agent: str, resource: str) -> str:
    """The collection a vector store declared without one uses: its agent's and its own.

    Readable (the agent class's name and the resource's name) and unique (a digest of the
    agent's full identity and the resource name), within Chroma's collection name rules
    (3 to 63 characters of ``[A-Za-z0-9_-]``, starting and ending with a letter or digit).

    Args:
        agent: the agent's identity (``agent_identity``).
        resource: the vector store's resource name.

    Returns:
        The collection name.
    """
    cls_name = agent.split("+", 1)[0].rsplit(":", 1)[-1].rsplit(".", 1)[-1]
    digest = hashlib.blake2b(f"{agent}|{resource}".encode(), digest_size=5).hexdigest()
    readable = re.sub(r"[^A-Za-z0-9_-]+", "_", f"{cls_name}_{resource}").strip("_-")[:48]
    return f"{readable or 'store'}_{digest}"


def name_default_collections(resources: dict[ResourceType, dict[str, Any]],
                             agent: str) -> dict[ResourceType, dict[str, Any]]:
    """Give each vector store declared without a collection one named after it and its agent.

    So two agents never share documents by accident (two in-memory stores of one process
    share Chroma's in-memory database; two stores of one persist directory share its files).
    A store that names its collection keeps it, and shares it as its backend does. A store
    declared as an instance gets the name set on it (when it had none).

    Args:
        resources: the compiled resources.
        agent: the agent's identity.

    Returns:
        The resources, with those vector stores' descriptors carrying the collection.
    """
    stores = resources.get(ResourceType.VECTOR_STORE)
    if not stores:
        return resources
    for name, rp in list(stores.items()):
        inst = rp._instance
        if inst is not None:
            if isinstance(inst, VectorStore) and inst.collection is None:
                inst.collection = default_collection(agent, name)
            continue
        if "collection" in rp.descriptor.arguments:
            continue
        try:
            cls = import_qualified(rp.descriptor.clazz)
        except ResourceError:
            continue  # reported elsewhere
        field = getattr(cls, "model_fields", {}).get("collection")
        if not (isinstance(cls, type) and issubclass(cls, VectorStore)) or field is None \
                or field.default is not None:
            continue
        descriptor = ResourceDescriptor(rp.descriptor.clazz, **{
            **rp.descriptor.arguments, "collection": default_collection(agent, name)})
        stores[name] = rp.model_copy(update={"descriptor": descriptor})
    return resources
