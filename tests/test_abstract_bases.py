"""Provider and store bases: an incomplete subclass fails when made, naming what it misses."""

from __future__ import annotations

import asyncio
import importlib
import inspect
from typing import Any

import pytest

from flink_agents_py.api import (
    AsyncSubagentSetup,
    ChatMessage,
    ChatModelConnection,
    ChatResponse,
    DeferredSubagentSetup,
    Document,
    EmbeddingModelConnection,
    EmbeddingResult,
    MessageRole,
    VectorStore,
)
from flink_agents_py.observability import EventLogSink

HELLO = [ChatMessage(role=MessageRole.USER, content="hi")]


def reply(text: str) -> ChatResponse:
    return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text))


@pytest.mark.parametrize(("base", "missing"), [
    (ChatModelConnection, ["chat"]),
    (EmbeddingModelConnection, ["embed_texts"]),
    (VectorStore, ["_add_embedding", "_query_embedding", "delete", "get"]),
    (EventLogSink, ["write"]),
    (DeferredSubagentSetup, ["prepare"]),
    (AsyncSubagentSetup, ["call_fetch_result", "call_query_status", "call_submit_request"]),
])
def test_a_subclass_missing_methods_fails_when_made_naming_each(base, missing):
    incomplete = type("Incomplete", (base,), {"__module__": __name__})
    with pytest.raises(TypeError, match="Can't instantiate abstract class Incomplete") as e:
        incomplete()
    for name in missing:
        assert name in str(e.value)
    assert sorted(incomplete.__abstractmethods__) == missing


def test_a_chat_connection_needs_chat_or_achat_not_both():
    class Sync(ChatModelConnection):
        def chat(self, messages, **kwargs: Any) -> ChatResponse:
            return reply("sync")

    class Async(ChatModelConnection):
        async def achat(self, messages, **kwargs: Any) -> ChatResponse:
            return reply(f"async {kwargs.get('model')}")

    class AsyncChild(Async):
        temperature: float = 0.0

    assert Sync().chat(HELLO).message.content == "sync"
    assert asyncio.run(Sync().achat(HELLO)).message.content == "sync"
    # an achat-only connection's chat runs achat, with the arguments it was given
    assert Async().chat(HELLO, model="m").message.content == "async m"
    assert AsyncChild().chat(HELLO).message.content == "async None"


def test_complete_subclasses_are_made_and_work():
    class Embedder(EmbeddingModelConnection):
        def embed_texts(self, texts, *, model=None, **options: Any) -> EmbeddingResult:
            return EmbeddingResult(embeddings=[[float(len(t))] for t in texts])

    assert Embedder().embed("abc") == [3.0]

    class Store(VectorStore):
        def _add_embedding(self, documents, collection_name, **kwargs: Any) -> list[str]:
            return [d.id or "" for d in documents]

        def _query_embedding(self, embedding, limit, collection_name, filters,
                             **kwargs: Any) -> list[Document]:
            return []

        def get(self, ids=None, collection_name=None, filters=None, limit=100,
                **kwargs: Any) -> list[Document]:
            return []

        def delete(self, ids=None, collection_name=None, filters=None, **kwargs: Any) -> None:
            return None

        def size(self, collection_name=None) -> int:
            return 0

    assert Store().count() == 0


LIBRARY_MODULES = [
    "flink_agents_py.integrations.chat_models",
    "flink_agents_py.integrations.embedding_models",
    "flink_agents_py.integrations.vector_stores",
    "flink_agents_py.integrations.mcp",
    "flink_agents_py.observability",
    "flink_agents_py.compat",
    "flink_agents_py.testing",
    "flink_agents_py.agents",
    "bench._agents",
    "bench._p5",
]


def _subclasses(base: type) -> set[type]:
    found, todo = set(), [base]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def test_every_library_and_bench_subclass_of_a_base_is_concrete():
    for module in LIBRARY_MODULES:
        importlib.import_module(module)
    bases = [ChatModelConnection, EmbeddingModelConnection, VectorStore, EventLogSink]
    shipped = {cls for base in bases for cls in _subclasses(base)
               if cls.__module__.startswith(("flink_agents_py.", "bench."))}
    names = {cls.__name__ for cls in shipped}
    assert {"ScriptedChatModel", "OpenAIChatModel", "AnthropicChatModel", "OllamaChatModel",
            "LlamaCppChatModel", "HashingEmbeddingModel", "ChromaVectorStore", "FileSink",
            "MemorySink", "SlowChatModel"} <= names
    abstract = sorted(cls.__qualname__ for cls in shipped if inspect.isabstract(cls))
    assert abstract == []
