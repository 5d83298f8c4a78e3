"""The public API of flink-agents-py: agents, actions, events, resources, the runner context.

Start with ``Agent``, ``action`` and ``RunnerContext``; ``__all__`` lists the rest by theme.
Nothing here imports the runtime or PyFlink; the runtime implements ``RunnerContext``.
Apache Flink Agents' names (``BaseEmbeddingModelConnection``...) live in
``flink_agents_py.compat``, test doubles in ``flink_agents_py.testing``.
"""

import warnings
from typing import Any

from ._agent import (
    ActionSpec,
    Agent,
    AgentNotInitializedError,
    ResourceSpec,
    action,
    chat_model_connection,
    chat_model_setup,
    embedding_model_connection,
    embedding_model_setup,
    mcp_server,
    prompt,
    vector_store,
)
from ._batch_calls import DurableCallSpec, Outcome
from ._budgets import Budget, BudgetExceededError, BudgetStateError, ModelPrice
from ._chat_models import ChatModelConnection, ChatModelSetup
from ._context import AgentConfig, RunnerContext
from ._dynamic_events import DynamicEvent
from ._embeddings import (
    EmbeddingError,
    EmbeddingModelConnection,
    EmbeddingModelSetup,
    EmbeddingResult,
    EmbeddingTokenUsage,
)
from ._errors import (
    ActionError,
    AgentAlreadyAppliedError,
    AgentsError,
    CallLimitError,
    ChatResponseError,
    DuplicateNameError,
    DurableExecutionError,
    EventChainLimitError,
    MissingApiKeyError,
    NotInActionContextError,
    PlanError,
    ProviderError,
    ReplayDivergenceError,
    ResourceError,
    ResourceNotFoundError,
    SerializationError,
    SubagentInputError,
    UnfinishedRunError,
    UnkeyedRecordError,
    UnreadErrorsError,
    UnsupportedAwaitError,
    UsageError,
)
from ._events import (
    ChatRequestEvent,
    ChatResponseEvent,
    Event,
    InputEvent,
    OutputEvent,
    ToolRequestEvent,
    ToolResponseEvent,
)
from ._flow import ErrorClass, FlowControl, RateLimitInfo, error_class, report_rate_limit
from ._long_term_memory import (
    BaseLongTermMemory,
    LongTermMemoryOptions,
    MemorySet,
    MemorySetItem,
)
from ._memory import Memory, MemoryObject, MemoryRef
from ._memory_sets import (
    CompactionConfig,
    CompactionStrategy,
    CompactionStrategyType,
    DatetimeRange,
    SummarizationStrategy,
    VersionedMemorySet,
)
from ._messages import (
    ChatMessage,
    ChatResponse,
    ChatResult,
    MessageRole,
    TokenUsage,
    ToolCall,
    ToolResult,
)
from ._metric_groups import MetricGroup
from ._names import EventType, ResourceName
from ._prompts import Prompt
from ._resources import Resource, ResourceDescriptor, ResourceType, qualified_name
from ._secrets import mask_secrets, register_secret, secret_from_env
from ._subagents import (
    AsyncSubagentSetup,
    DeferredSubagentSetup,
    InternalSubagent,
    PreparedCall,
    RunStatus,
    SubagentFuture,
    SubagentResult,
    SubagentSetup,
)
from ._tool_docs import ToolDocWarning
from ._tool_response import ToolFailure, ToolResponse
from ._tools import RESERVED_TOOL_PREFIX, FunctionTool, ToolMetadata, ToolSpec, tool
from ._vector_stores import (
    Collection,
    CollectionNotFoundError,
    ContextRetrievalRequestEvent,
    ContextRetrievalResponseEvent,
    DimensionMismatchError,
    Document,
    UnknownFilterFieldError,
    VectorStore,
    VectorStoreError,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
    format_context,
)
from ._waits import (
    APPROVAL_REQUEST_KIND,
    ApprovalRequest,
    ExternalEvent,
    ExternalEventError,
    UnmatchedEventError,
    WaitTimeoutError,
)

__all__ = [
    # an agent, its actions, the context an action gets
    "Agent",
    "action",
    "RunnerContext",
    "AgentConfig",
    "DurableCallSpec",
    "Outcome",
    "Memory",
    "MemoryObject",
    "MemoryRef",
    "MetricGroup",
    "ActionSpec",
    # events
    "Event",
    "DynamicEvent",
    "InputEvent",
    "OutputEvent",
    "EventType",
    "ChatRequestEvent",
    "ChatResponseEvent",
    "ToolRequestEvent",
    "ToolResponseEvent",
    "ContextRetrievalRequestEvent",
    "ContextRetrievalResponseEvent",
    # resources: declared on an agent by decorator or add_resource
    "ResourceDescriptor",
    "ResourceType",
    "ResourceName",
    "ResourceSpec",
    "Resource",
    "qualified_name",
    "chat_model_connection",
    "chat_model_setup",
    "embedding_model_connection",
    "embedding_model_setup",
    "mcp_server",
    "prompt",
    "tool",
    "vector_store",
    # chat models, messages, tools, prompts
    "ChatModelConnection",
    "ChatModelSetup",
    "ChatMessage",
    "MessageRole",
    "ChatResponse",
    "ChatResult",
    "TokenUsage",
    "ToolCall",
    "ToolResult",
    "FunctionTool",
    "ToolMetadata",
    "ToolResponse",
    "ToolFailure",
    "ToolSpec",
    "ToolDocWarning",
    "RESERVED_TOOL_PREFIX",
    "Prompt",
    # sub-agents
    "SubagentSetup",
    "InternalSubagent",
    "DeferredSubagentSetup",
    "AsyncSubagentSetup",
    "PreparedCall",
    "SubagentFuture",
    "SubagentResult",
    "RunStatus",
    # embeddings, vector stores, long-term memory
    "EmbeddingModelConnection",
    "EmbeddingModelSetup",
    "EmbeddingResult",
    "EmbeddingTokenUsage",
    "VectorStore",
    "VectorStoreQuery",
    "VectorStoreQueryMode",
    "VectorStoreQueryResult",
    "Collection",
    "Document",
    "format_context",
    "BaseLongTermMemory",
    "CompactionConfig",
    "CompactionStrategy",
    "CompactionStrategyType",
    "DatetimeRange",
    "SummarizationStrategy",
    "VersionedMemorySet",
    "LongTermMemoryOptions",
    "MemorySet",
    "MemorySetItem",
    # flow control and budgets
    "FlowControl",
    "RateLimitInfo",
    "ErrorClass",
    "error_class",
    "report_rate_limit",
    "Budget",
    "ModelPrice",
    # waits for outside events, tool approval
    "ExternalEvent",
    "ApprovalRequest",
    "APPROVAL_REQUEST_KIND",
    # secrets known by value, masked wherever text leaves the process
    "register_secret",
    "secret_from_env",
    "mask_secrets",
    # errors: AgentsError is the root of every one
    "AgentsError",
    "UsageError",
    "AgentAlreadyAppliedError",
    "PlanError",
    "DuplicateNameError",
    "ActionError",
    "AgentNotInitializedError",
    "NotInActionContextError",
    "ResourceError",
    "ResourceNotFoundError",
    "ProviderError",
    "MissingApiKeyError",
    "ChatResponseError",
    "EmbeddingError",
    "VectorStoreError",
    "CollectionNotFoundError",
    "DimensionMismatchError",
    "UnknownFilterFieldError",
    "BudgetExceededError",
    "BudgetStateError",
    "ExternalEventError",
    "WaitTimeoutError",
    "UnmatchedEventError",
    "DurableExecutionError",
    "ReplayDivergenceError",
    "SerializationError",
    "SubagentInputError",
    "UnsupportedAwaitError",
    "EventChainLimitError",
    "CallLimitError",
    "UnkeyedRecordError",
    "UnfinishedRunError",
    "UnreadErrorsError",
]

# names that moved out of the API: (their home, the name there); importing them from here
# still works, with a DeprecationWarning naming the new import
_MOVED: dict[str, tuple[str, str]] = {
    "BaseEmbeddingModelConnection": ("flink_agents_py.compat", "EmbeddingModelConnection"),
    "BaseEmbeddingModelSetup": ("flink_agents_py.compat", "EmbeddingModelSetup"),
    "BaseVectorStore": ("flink_agents_py.compat", "VectorStore"),
    "ScriptedRequest": ("flink_agents_py.testing", ""),
}


def __getattr__(name: str) -> Any:
    """Resolve a name that moved out of the API, warning where it lives now.

    Returns:
        The object under its old name.

    Raises:
        AttributeError: for any other name.
    """
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    home, ours = _MOVED[name]
    warnings.warn(
        f"flink_agents_py.api.{name} moved: import it from {home}"
        + (f" (or use flink_agents_py.api.{ours}, the same class)" if ours else ""),
        DeprecationWarning, stacklevel=2)
    if ours:
        return globals()[ours]  # Flink Agents' alias: our class under its old name
    import importlib

    return getattr(importlib.import_module(home), name)  # the one lookup that goes up
