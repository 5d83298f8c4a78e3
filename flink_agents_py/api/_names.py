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

__all__ = ["ResourceName", "EventType", "flink_agents_class"]

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


def _their_classes() -> dict[str, str]:
    """Apache Flink Agents' resource class names, each with the class path here it stands for.

    Its ``ResourceName`` constants are its classes' paths, which a program may also write out
    (``ResourceDescriptor(clazz="flink_agents.integrations.chat_models.ollama_chat_model.
    OllamaChatModelConnection")``, its ``ResourceDescriptor``'s documented use). The modules
    moved between its versions; the class names did not.

    Returns:
        Flink Agents' class name -> our class path.
    """
    chat, embed, store = ResourceName.ChatModel, ResourceName.EmbeddingModel, \
        ResourceName.VectorStore
    return {
        "OllamaChatModelConnection": chat.OLLAMA_CONNECTION,
        "OllamaChatModelSetup": chat.OLLAMA_SETUP,
        "OpenAIChatModelConnection": chat.OPENAI_COMPLETIONS_CONNECTION,
        "OpenAIChatModelSetup": chat.OPENAI_COMPLETIONS_SETUP,
        "VLLMChatModelConnection": chat.VLLM_CONNECTION,
        "VLLMChatModelSetup": chat.VLLM_SETUP,
        "AnthropicChatModelConnection": chat.ANTHROPIC_CONNECTION,
        "AnthropicChatModelSetup": chat.ANTHROPIC_SETUP,
        "TongyiChatModelConnection": chat.TONGYI_CONNECTION,
        "TongyiChatModelSetup": chat.TONGYI_SETUP,
        "AzureOpenAIChatModelConnection": chat.AZURE_OPENAI_CONNECTION,
        "AzureOpenAIChatModelSetup": chat.AZURE_OPENAI_SETUP,
        "JavaChatModelConnection": chat.JAVA_WRAPPER_CONNECTION,
        "JavaChatModelSetup": chat.JAVA_WRAPPER_SETUP,
        "OllamaEmbeddingModelConnection": embed.OLLAMA_CONNECTION,
        "OllamaEmbeddingModelSetup": embed.OLLAMA_SETUP,
        "OpenAIEmbeddingModelConnection": embed.OPENAI_CONNECTION,
        "OpenAIEmbeddingModelSetup": embed.OPENAI_SETUP,
        "JavaEmbeddingModelConnection": embed.JAVA_WRAPPER_CONNECTION,
        "JavaEmbeddingModelSetup": embed.JAVA_WRAPPER_SETUP,
        "ChromaVectorStore": store.CHROMA_VECTOR_STORE,
        "JavaVectorStore": store.JAVA_WRAPPER_VECTOR_STORE,
        "JavaCollectionManageableVectorStore":
            store.JAVA_WRAPPER_COLLECTION_MANAGEABLE_VECTOR_STORE,
        "MCPServer": ResourceName.MCP_SERVER,
    }


def flink_agents_class(path: str) -> str:
    """The class path here for Apache Flink Agents' class path ``path`` (else ``path``).

    Args:
        path: a ``ResourceDescriptor``'s class path.

    Returns:
        Ours for one of Flink Agents' resource classes (``flink_agents.`` and a class name
        listed in ``_their_classes``), else ``path`` unchanged: a class it has no
        counterpart of here fails to import, and that error says so.
    """
    if not path.startswith("flink_agents."):
        return path
    return _their_classes().get(path.replace(":", ".").rpartition(".")[2], path)
