"""Apache Flink Agents' name catalogues, for programs ported from it.

``ResourceName`` holds class paths for ``ResourceDescriptor(clazz=...)``, and ``EventType``
trigger names for ``@action``.

Both are plain strings: ``ResourceDescriptor(clazz=ResourceName.VectorStore.CHROMA_VECTOR_STORE,
...)`` and ``@action(EventType.InputEvent)`` work as in Flink Agents. The chat model and
embedding connection and setup names point at the thin adapters of ``flink_agents_py.compat``,
which take Flink Agents' argument names (``request_timeout``, ``base_url``,
``extract_reasoning``, ``temperature``...) over our classes.
"""

from __future__ import annotations

from ._event_types import BuiltinEventType

__all__ = ["ResourceName", "EventType"]

_CHAT = "flink_agents_py.integrations.chat_models."
_EMBED = "flink_agents_py.integrations.embedding_models."
_COMPAT = "flink_agents_py.compat."


class ResourceName:
    """Class paths of the resource implementations, by kind and provider."""

    class ChatModel:
        """Chat model connections and setups."""

        # Flink Agents' argument names (request_timeout, base_url, extract_reasoning,
        # temperature...) are taken by the thin adapters of flink_agents_py.compat
        OLLAMA_CONNECTION = _COMPAT + "OllamaChatModelConnection"
        OLLAMA_SETUP = _COMPAT + "OllamaChatModelSetup"
        OPENAI_COMPLETIONS_CONNECTION = _COMPAT + "OpenAIChatModelConnection"
        OPENAI_COMPLETIONS_SETUP = _COMPAT + "OpenAIChatModelSetup"
        VLLM_CONNECTION = _COMPAT + "OpenAIChatModelConnection"
        VLLM_SETUP = _COMPAT + "OpenAIChatModelSetup"
        ANTHROPIC_CONNECTION = _COMPAT + "AnthropicChatModelConnection"
        ANTHROPIC_SETUP = _COMPAT + "AnthropicChatModelSetup"
        TONGYI_CONNECTION = _COMPAT + "TongyiChatModelConnection"  # DashScope, OpenAI's format
        TONGYI_SETUP = _COMPAT + "TongyiChatModelSetup"
        LLAMA_CPP_CONNECTION = _CHAT + "LlamaCppChatModel"
        SCRIPTED_CONNECTION = _CHAT + "ScriptedChatModel"
        AZURE_OPENAI_CONNECTION = _COMPAT + "AzureOpenAIChatModelConnection"
        AZURE_OPENAI_SETUP = _COMPAT + "AzureOpenAIChatModelSetup"
        # not offered: declaring them is fine, building one says what to use instead
        JAVA_WRAPPER_CONNECTION = _COMPAT + "NotOfferedChatModelConnection"
        JAVA_WRAPPER_SETUP = _COMPAT + "NotOfferedChatModelSetup"

    class EmbeddingModel:
        """Embedding model connections and setups."""

        OLLAMA_CONNECTION = _COMPAT + "OllamaEmbeddingModelConnection"
        OLLAMA_SETUP = _COMPAT + "OllamaEmbeddingModelSetup"
        OPENAI_CONNECTION = _COMPAT + "OpenAIEmbeddingModelConnection"
        OPENAI_SETUP = _COMPAT + "OpenAIEmbeddingModelSetup"
        MINILM_CONNECTION = _EMBED + "MiniLMEmbeddingModel"
        MINILM_SETUP = "flink_agents_py.api.EmbeddingModelSetup"
        JAVA_WRAPPER_CONNECTION = _COMPAT + "NotOfferedEmbeddingModel"  # not offered
        JAVA_WRAPPER_SETUP = _COMPAT + "NotOfferedEmbeddingModel"

    class VectorStore:
        """Vector stores."""

        CHROMA_VECTOR_STORE = "flink_agents_py.integrations.vector_stores.ChromaVectorStore"
        JAVA_WRAPPER_VECTOR_STORE = _COMPAT + "NotOfferedVectorStore"  # not offered
        JAVA_WRAPPER_COLLECTION_MANAGEABLE_VECTOR_STORE = _COMPAT + "NotOfferedVectorStore"

    MCP_SERVER = _COMPAT + "McpServer"
    """Flink Agents' MCP server (``endpoint=``, ``timeout=``, ``headers=``)."""


class EventType:
    """Routing types of the built-in events (what ``@action`` takes as a trigger).

    Each is our name of the type, equal to Apache Flink Agents' name of it too
    (``EventType.InputEvent == "InputEvent" == "_input_event"``: a ``BuiltinEventType``).
    """

    InputEvent = BuiltinEventType("InputEvent")
    OutputEvent = BuiltinEventType("OutputEvent")
    ChatRequestEvent = BuiltinEventType("ChatRequestEvent")
    ChatResponseEvent = BuiltinEventType("ChatResponseEvent")
    ToolRequestEvent = BuiltinEventType("ToolRequestEvent")
    ToolResponseEvent = BuiltinEventType("ToolResponseEvent")
    ContextRetrievalRequestEvent = BuiltinEventType("ContextRetrievalRequestEvent")
    ContextRetrievalResponseEvent = BuiltinEventType("ContextRetrievalResponseEvent")
