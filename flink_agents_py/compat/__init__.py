"""Apache Flink Agents' public names, for programs written for Flink Agents 0.3.

A Flink Agents program runs here after its ``flink_agents`` imports are replaced by one::

    from flink_agents_py.compat import (Agent, InputEvent, OutputEvent, RunnerContext,
                                        action, ResourceName, AgentsExecutionEnvironment, ...)

Every name is ours (re-exported) or a thin alias or adapter over ours: no second
implementation. ``docs/reference/flink-agents-names.md`` lists every Flink Agents name and
what it is here.
"""

from collections.abc import Awaitable

from ..agents import ReActAgent
from ..api import (
    AgentConfig,
    AsyncSubagentSetup,
    BaseLongTermMemory,
    ChatMessage,
    ChatModelConnection,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponse,
    ChatResponseEvent,
    Collection,
    CompactionConfig,
    CompactionStrategy,
    CompactionStrategyType,
    ContextRetrievalRequestEvent,
    ContextRetrievalResponseEvent,
    DatetimeRange,
    DeferredSubagentSetup,
    Document,
    DurableCallSpec,
    DynamicEvent,
    EmbeddingModelConnection,
    EmbeddingModelSetup,
    Event,
    FunctionTool,
    InputEvent,
    InternalSubagent,
    Memory,
    MemoryRef,
    MemorySet,
    MemorySetItem,
    MessageRole,
    MetricGroup,
    Outcome,
    OutputEvent,
    Prompt,
    Resource,
    ResourceDescriptor,
    ResourceName,
    ResourceType,
    RunnerContext,
    SubagentFuture,
    SubagentResult,
    SummarizationStrategy,
    ToolMetadata,
    ToolRequestEvent,
    ToolResponse,
    ToolResponseEvent,
    VectorStore,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
    action,
    chat_model_connection,
    chat_model_setup,
    embedding_model_connection,
    embedding_model_setup,
    mcp_server,
    prompt,
    vector_store,
)
from ..integrations.vector_stores import ChromaVectorStore
from ._environment import AgentsExecutionEnvironment
from ._functions import Function, JavaFunction, PythonFunction
from ._injected import InjectedArg, ToolParameterSource, tool
from ._knowledge import (
    BaseEmbeddingModelConnection,
    BaseEmbeddingModelSetup,
    BaseVectorStore,
    CollectionManageableVectorStore,
    MemoryObject,
    MemoryType,
    SubagentMetadataProvider,
)
from ._listeners import EventContext, EventListener
from ._memory_events import (
    AgentRunBeginEvent,
    EventType,
    LongTermGetEvent,
    LongTermSearchEvent,
    LongTermUpdateEvent,
    MemoryEvent,
    SensoryReadEvent,
    SensoryWriteEvent,
    ShortTermReadEvent,
    ShortTermWriteEvent,
)
from ._names import (
    CALLABLE_NAME_PREFIX,
    STRUCTURED_OUTPUT,
    BaseAsyncSubagentSetup,
    BaseDeferredSubagentSetup,
    InternalSubagentResourceDescriptorBuilder,
    OutputSchema,
    PreparedTriple,
    ResourceContext,
    RunStatus,
    Tool,
    ToolType,
)
from ._options import (
    AgentConfigOptions,
    AgentExecutionOptions,
    ConditionEvaluationFailureStrategy,
    ConfigOption,
    Configuration,
    ErrorHandlingStrategy,
    EventLogLevel,
    LoggerType,
    LongTermMemoryBackend,
    LongTermMemoryOptions,
    MemoryEventOptions,
    ShortTermMemoryTtlUpdate,
    ShortTermMemoryTtlVisibility,
)
from ._resources import (
    AnthropicChatModelConnection,
    AnthropicChatModelSetup,
    AzureOpenAIChatModelConnection,
    AzureOpenAIChatModelSetup,
    McpServer,
    NotOfferedChatModelConnection,
    NotOfferedChatModelSetup,
    NotOfferedEmbeddingModel,
    NotOfferedVectorStore,
    OllamaChatModelConnection,
    OllamaChatModelSetup,
    OllamaEmbeddingModelConnection,
    OllamaEmbeddingModelSetup,
    OpenAIChatModelConnection,
    OpenAIChatModelSetup,
    OpenAIEmbeddingModelConnection,
    OpenAIEmbeddingModelSetup,
    TongyiChatModelConnection,
    TongyiChatModelSetup,
)
from ._skills import Agent, Skills, skills
from ._subagent_calls import (
    BaseSubagentCallable,
    DurableCallable,
    Result,
    Subagent,
    SubagentSetup,
)

LocalPrompt = Prompt
"""Flink Agents' prompt class (``prompts.prompt.LocalPrompt``, what ``Prompt.from_text`` and
``from_messages`` return there; ``LocalPrompt(template=text or [messages])``)."""
BaseChatModelConnection = ChatModelConnection
"""Flink Agents' name of ``ChatModelConnection``."""
BaseChatModelSetup = ChatModelSetup
"""Flink Agents' name of ``ChatModelSetup``."""
SerializableResource = Resource
"""Flink Agents' serializable resource base: every resource here is data (pydantic)."""
MCPServer = McpServer
"""Flink Agents' MCP server class (``integrations.mcp.mcp.MCPServer``, its tool use page's
``MCPServer(endpoint=...)``): the ``ResourceName.MCP_SERVER`` class."""

ReadableConfiguration = AgentConfig
"""Flink Agents' read-only configuration (``configuration.ReadableConfiguration``): what
``ctx.config`` is (``get``, ``get_str``, ``get_int``...)."""
WritableConfiguration = Configuration
"""Flink Agents' writable configuration (``configuration.WritableConfiguration``): what the
environment's ``get_config()`` gives (``set``, ``set_str``...)."""
AsyncExecutionResult = Awaitable
"""Flink Agents' type of what ``ctx.durable_execute_async(...)`` returns (an awaitable; its
``runner_context.AsyncExecutionResult``), for type hints and ``isinstance``."""

DurableCall = DurableCallSpec
"""Flink Agents' call of a batch (``runner_context.DurableCall``: ``func``, ``args``,
``kwargs``, ``id``, ``reconciler``, ``timeout``, by keyword), given to
``ctx.durable_execute_all_async``."""

chat_model_server = chat_model_connection
"""Flink Agents' first name of ``chat_model_connection`` (its ``chat_tongyi_example``)."""
chat_model = chat_model_setup
"""Flink Agents' first name of ``chat_model_setup``."""

__all__ = [
    "Agent",
    "AgentRunBeginEvent",
    "BaseSubagentCallable",
    "DurableCallable",
    "DurableCall",
    "DynamicEvent",
    "Outcome",
    "Result",
    "Subagent",
    "Function",
    "JavaFunction",
    "PythonFunction",
    "EventLogLevel",
    "LoggerType",
    "AgentConfigOptions",
    "AgentExecutionOptions",
    "AgentsExecutionEnvironment",
    "AnthropicChatModelConnection",
    "AnthropicChatModelSetup",
    "AzureOpenAIChatModelConnection",
    "AzureOpenAIChatModelSetup",
    "AsyncSubagentSetup",
    "BaseAsyncSubagentSetup",
    "BaseChatModelConnection",
    "BaseChatModelSetup",
    "BaseDeferredSubagentSetup",
    "BaseEmbeddingModelConnection",
    "BaseEmbeddingModelSetup",
    "BaseLongTermMemory",
    "BaseVectorStore",
    "CALLABLE_NAME_PREFIX",
    "ChatMessage",
    "ChatModelConnection",
    "ChatModelSetup",
    "ChatRequestEvent",
    "ChatResponse",
    "ChatResponseEvent",
    "ChromaVectorStore",
    "CollectionManageableVectorStore",
    "ConfigOption",
    "Configuration",
    "ReadableConfiguration",
    "WritableConfiguration",
    "AsyncExecutionResult",
    "ContextRetrievalRequestEvent",
    "ContextRetrievalResponseEvent",
    "DeferredSubagentSetup",
    "Collection",
    "CompactionConfig",
    "CompactionStrategy",
    "CompactionStrategyType",
    "DatetimeRange",
    "SummarizationStrategy",
    "Document",
    "EmbeddingModelConnection",
    "EmbeddingModelSetup",
    "ErrorHandlingStrategy",
    "Event",
    "EventType",
    "EventContext",
    "EventListener",
    "ShortTermWriteEvent",
    "ShortTermReadEvent",
    "SensoryWriteEvent",
    "SensoryReadEvent",
    "MemoryEvent",
    "LongTermUpdateEvent",
    "LongTermSearchEvent",
    "LongTermGetEvent",
    "FunctionTool",
    "InjectedArg",
    "ConditionEvaluationFailureStrategy",
    "MemoryEventOptions",
    "ToolParameterSource",
    "InputEvent",
    "InternalSubagent",
    "InternalSubagentResourceDescriptorBuilder",
    "LocalPrompt",
    "LongTermMemoryBackend",
    "LongTermMemoryOptions",
    "MCPServer",
    "MetricGroup",
    "McpServer",
    "Memory",
    "MemoryObject",
    "MemoryType",
    "MemoryRef",
    "MemorySet",
    "MemorySetItem",
    "MessageRole",
    "NotOfferedChatModelConnection",
    "NotOfferedChatModelSetup",
    "NotOfferedEmbeddingModel",
    "NotOfferedVectorStore",
    "OllamaChatModelConnection",
    "OllamaChatModelSetup",
    "OllamaEmbeddingModelConnection",
    "OllamaEmbeddingModelSetup",
    "OpenAIChatModelConnection",
    "OpenAIChatModelSetup",
    "OpenAIEmbeddingModelConnection",
    "OpenAIEmbeddingModelSetup",
    "TongyiChatModelConnection",
    "TongyiChatModelSetup",
    "OutputEvent",
    "OutputSchema",
    "PreparedTriple",
    "Prompt",
    "ReActAgent",
    "Resource",
    "ResourceContext",
    "ResourceDescriptor",
    "ResourceName",
    "ResourceType",
    "RunStatus",
    "RunnerContext",
    "STRUCTURED_OUTPUT",
    "SerializableResource",
    "ShortTermMemoryTtlUpdate",
    "ShortTermMemoryTtlVisibility",
    "Skills",
    "SubagentFuture",
    "SubagentMetadataProvider",
    "SubagentResult",
    "SubagentSetup",
    "Tool",
    "ToolMetadata",
    "ToolResponse",
    "ToolType",
    "ToolRequestEvent",
    "ToolResponseEvent",
    "VectorStore",
    "VectorStoreQuery",
    "VectorStoreQueryMode",
    "VectorStoreQueryResult",
    "action",
    "chat_model_connection",
    "chat_model_setup",
    "chat_model_server",
    "chat_model",
    "embedding_model_connection",
    "embedding_model_setup",
    "mcp_server",
    "prompt",
    "skills",
    "tool",
    "vector_store",
]
