"""Apache Flink Agents' public names, for programs written for Flink Agents 0.3.

A Flink Agents program runs here after its ``flink_agents`` imports are replaced by one::

    from flink_agents_py.compat import (Agent, InputEvent, OutputEvent, RunnerContext,
                                        action, ResourceName, AgentsExecutionEnvironment, ...)

Every name is ours (re-exported) or a thin alias or adapter over ours: no second
implementation. ``docs/reference/flink-agents-names.md`` lists every Flink Agents name and
what it is here.
"""

from ..agents import ReActAgent
from ..api import (
    AsyncSubagentSetup,
    ChatMessage,
    ChatModelConnection,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponse,
    ChatResponseEvent,
    DeferredSubagentSetup,
    Event,
    EventType,
    FunctionTool,
    InputEvent,
    InternalSubagent,
    MessageRole,
    OutputEvent,
    Prompt,
    Resource,
    ResourceDescriptor,
    ResourceName,
    ResourceType,
    RunnerContext,
    SubagentFuture,
    SubagentResult,
    SubagentSetup,
    ToolRequestEvent,
    ToolResponseEvent,
    action,
    chat_model_connection,
    chat_model_setup,
    embedding_model_connection,
    embedding_model_setup,
    mcp_server,
    prompt,
    tool,
    vector_store,
)
from ._environment import (
    AgentExecutionOptions,
    AgentsExecutionEnvironment,
    ConfigOption,
    Configuration,
)
from ._names import (
    CALLABLE_NAME_PREFIX,
    STRUCTURED_OUTPUT,
    BaseAsyncSubagentSetup,
    BaseDeferredSubagentSetup,
    InternalSubagentResourceDescriptorBuilder,
    OutputSchema,
    PreparedTriple,
    RunStatus,
    Tool,
)
from ._resources import (
    AnthropicChatModelConnection,
    AnthropicChatModelSetup,
    OllamaChatModelConnection,
    OllamaChatModelSetup,
    OllamaEmbeddingModelConnection,
    OpenAIChatModelConnection,
    OpenAIChatModelSetup,
    OpenAIEmbeddingModelConnection,
)
from ._skills import Agent, Skills, skills

BaseChatModelConnection = ChatModelConnection
"""Flink Agents' name of ``ChatModelConnection``."""
BaseChatModelSetup = ChatModelSetup
"""Flink Agents' name of ``ChatModelSetup``."""
SerializableResource = Resource
"""Flink Agents' serializable resource base: every resource here is data (pydantic)."""

__all__ = [
    "Agent",
    "AgentExecutionOptions",
    "AgentsExecutionEnvironment",
    "AnthropicChatModelConnection",
    "AnthropicChatModelSetup",
    "AsyncSubagentSetup",
    "BaseAsyncSubagentSetup",
    "BaseChatModelConnection",
    "BaseChatModelSetup",
    "BaseDeferredSubagentSetup",
    "CALLABLE_NAME_PREFIX",
    "ChatMessage",
    "ChatModelConnection",
    "ChatModelSetup",
    "ChatRequestEvent",
    "ChatResponse",
    "ChatResponseEvent",
    "ConfigOption",
    "Configuration",
    "DeferredSubagentSetup",
    "Event",
    "EventType",
    "FunctionTool",
    "InputEvent",
    "InternalSubagent",
    "InternalSubagentResourceDescriptorBuilder",
    "MessageRole",
    "OllamaChatModelConnection",
    "OllamaChatModelSetup",
    "OllamaEmbeddingModelConnection",
    "OpenAIChatModelConnection",
    "OpenAIChatModelSetup",
    "OpenAIEmbeddingModelConnection",
    "OutputEvent",
    "OutputSchema",
    "PreparedTriple",
    "Prompt",
    "ReActAgent",
    "Resource",
    "ResourceDescriptor",
    "ResourceName",
    "ResourceType",
    "RunStatus",
    "RunnerContext",
    "STRUCTURED_OUTPUT",
    "SerializableResource",
    "Skills",
    "SubagentFuture",
    "SubagentResult",
    "SubagentSetup",
    "Tool",
    "ToolRequestEvent",
    "ToolResponseEvent",
    "action",
    "chat_model_connection",
    "chat_model_setup",
    "embedding_model_connection",
    "embedding_model_setup",
    "mcp_server",
    "prompt",
    "skills",
    "tool",
    "vector_store",
]
