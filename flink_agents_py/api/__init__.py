"""The public API of flink-agents-py: agents, actions, events, resources, the runner context.

Nothing here imports the runtime or PyFlink; the runtime implements ``RunnerContext``.
"""

from ._agent import (
    ActionSpec,
    Agent,
    ResourceSpec,
    action,
    chat_model_connection,
    chat_model_setup,
    mcp_server,
    prompt,
)
from ._chat_models import ChatModelConnection, ChatModelSetup
from ._context import Memory, RunnerContext
from ._errors import (
    ActionError,
    AgentsError,
    ChatResponseError,
    DurableExecutionError,
    NotInActionContextError,
    PlanError,
    ProviderError,
    ResourceError,
    ResourceNotFoundError,
    SerializationError,
    UnsupportedAwaitError,
)
from ._events import (
    ChatRequestEvent,
    ChatResponseEvent,
    Event,
    InputEvent,
    OutputEvent,
    ToolRequestEvent,
    ToolResponseEvent,
    event_class_for,
    event_from_json,
    event_type_of,
)
from ._messages import ChatMessage, ChatResponse, MessageRole, TokenUsage, ToolCall, ToolResult
from ._prompts import Prompt, fill_placeholders
from ._resources import ResourceDescriptor, ResourceType, Resource, import_qualified, qualified_name
from ._tools import RESERVED_TOOL_PREFIX, FunctionTool, ToolMetadata, ToolSpec, tool

__all__ = [
    "ActionError",
    "ActionSpec",
    "Agent",
    "AgentsError",
    "ChatMessage",
    "ChatModelConnection",
    "ChatModelSetup",
    "ChatRequestEvent",
    "ChatResponse",
    "ChatResponseError",
    "ChatResponseEvent",
    "DurableExecutionError",
    "Event",
    "FunctionTool",
    "InputEvent",
    "Memory",
    "MessageRole",
    "NotInActionContextError",
    "OutputEvent",
    "PlanError",
    "Prompt",
    "ProviderError",
    "RESERVED_TOOL_PREFIX",
    "Resource",
    "ResourceDescriptor",
    "ResourceError",
    "ResourceNotFoundError",
    "ResourceSpec",
    "ResourceType",
    "RunnerContext",
    "SerializationError",
    "TokenUsage",
    "ToolCall",
    "ToolMetadata",
    "ToolRequestEvent",
    "ToolResponseEvent",
    "ToolResult",
    "ToolSpec",
    "UnsupportedAwaitError",
    "action",
    "chat_model_connection",
    "chat_model_setup",
    "event_class_for",
    "event_from_json",
    "event_type_of",
    "fill_placeholders",
    "import_qualified",
    "mcp_server",
    "prompt",
    "qualified_name",
    "tool",
]
