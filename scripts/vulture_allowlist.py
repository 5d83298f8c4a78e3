"""The allow-list of the unused-code gate (``scripts/unused_code.py``, run by ``make lint``).

Code that nothing in the repository calls, yet is used: public API (fields, members and
methods of classes in a package's ``__all__``), hooks that Python, pydantic, asyncio, tqdm or
PyFlink call, and functions the plan names as ``module:qualname`` strings. vulture reads this
file (it is never run): naming an attribute here marks every attribute of that name as used.
Add a line only for such code, with the reason; delete dead code instead.
"""

# ruff: noqa: B018
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from shlex import shlex

from tqdm import tqdm

import flink_agents_py
import flink_agents_py.flink
import flink_agents_py.local
import flink_agents_py.observability
from flink_agents_py.agents import ReActAgent
from flink_agents_py.api import (
    Event,
    MemorySetItem,
    ResourceName,
    RunnerContext,
    RunStatus,
    SubagentSetup,
    TokenUsage,
    ToolMetadata,
    ToolResponse,
)
from flink_agents_py.compat import (
    AgentConfigOptions,
    Configuration,
    ErrorHandlingStrategy,
    EventContext,
    InjectedArg,
    JavaFunction,
    LongTermMemoryBackend,
    LongTermMemoryOptions,
    MemoryEvent,
    MemoryEventOptions,
    MemoryType,
    NotOfferedVectorStore,
    OpenAIChatModelConnection,
    ShortTermMemoryTtlUpdate,
    ShortTermMemoryTtlVisibility,
    ToolParameterSource,
)
from flink_agents_py.compat import RunStatus as CompatRunStatus
from flink_agents_py.observability import Distribution
from flink_agents_py.runtime._builtin_actions import chat_model_action, tool_call_action
from flink_agents_py.runtime._knowledge import DurableVectorStore, context_retrieval_action
from flink_agents_py.runtime.core._stepper import _StepperLoop
from flink_agents_py.starter.my_agent import scripted_model
from flink_agents_py.testing import ThrottlingProvider

flink_agents_py.__getattr__  # PEP 562: the package's lazy attributes
flink_agents_py.flink.__dir__  # PEP 562: dir() lists the lazy names too
flink_agents_py.local.__dir__
flink_agents_py.observability.__dir__

# public API: model fields, names and members nothing in the repository reads
TokenUsage.input_tokens
TokenUsage.output_tokens
MemorySetItem.memory_set_name
MemorySetItem.updated_at
ResourceName.ChatModel.OPENAI_COMPLETIONS_CONNECTION
ResourceName.ChatModel.OPENAI_COMPLETIONS_SETUP
ResourceName.ChatModel.VLLM_CONNECTION
ResourceName.ChatModel.VLLM_SETUP
ResourceName.ChatModel.ANTHROPIC_CONNECTION
ResourceName.ChatModel.ANTHROPIC_SETUP
ResourceName.ChatModel.LLAMA_CPP_CONNECTION
ResourceName.ChatModel.SCRIPTED_CONNECTION
ResourceName.EmbeddingModel.OPENAI_CONNECTION
ResourceName.EmbeddingModel.OPENAI_SETUP
ResourceName.EmbeddingModel.MINILM_CONNECTION
ResourceName.EmbeddingModel.MINILM_SETUP
RunStatus.terminal
CompatRunStatus.State.NOT_STARTED
CompatRunStatus.State.RUNNING
CompatRunStatus.State.FAILED
Distribution.percentile
DurableVectorStore.aget  # docs/how-to/knowledge.md

# Flink Agents' sub-agent metadata methods: the plan calls them by name (plan/_plan.py)
ReActAgent.get_subagent_description
ReActAgent.get_subagent_input_schema

# built-in actions: the plan names them as "module:qualname" strings (plan/_plan.py)
chat_model_action
tool_call_action
context_retrieval_action
scripted_model  # the starter's model (flink_agents_py/starter/my_agent.py), by its name

# asyncio calls these on the running loop (runtime/core/_stepper.py's stand-in loop)
_StepperLoop.call_at
_StepperLoop.get_debug
_StepperLoop.is_running

# attributes of other libraries' objects we set: tqdm's bar (flink/_progress.py), shlex's
# lexer (skills/_commands.py)
tqdm.initial
tqdm.last_print_n
shlex.whitespace_split

# the throttling fake provider (testing/_throttling.py): http.server's hooks and attributes,
# and its public figures read by tests and the bench
ThreadingHTTPServer.daemon_threads
ThreadingHTTPServer.request_queue_size
BaseHTTPRequestHandler.protocol_version
BaseHTTPRequestHandler.log_message
BaseHTTPRequestHandler.do_POST
ThrottlingProvider.served_rate
OpenAIChatModelConnection.reuse_client  # Flink Agents' argument, taken and ignored

# Flink Agents' configuration names (compat/_options.py): public API a ported program sets
# (most have no effect here; the module says which)
AgentConfigOptions.JOB_IDENTIFIER
AgentConfigOptions.BASE_LOG_DIR
AgentConfigOptions.EVENT_LOGGER_TYPE
AgentConfigOptions.PRETTY_PRINT
AgentConfigOptions.TRACE_LOG_OUTPUT_BASE_DIR
AgentConfigOptions.TRACE_LOG_OUTPUT_TYPE
AgentConfigOptions.TRACE_LOG_OUTPUT_PRETTY_PRINT
AgentConfigOptions.TRACE_LOG_TARGETS
AgentConfigOptions.TRACE_LOG_MAX_STRING_LENGTH
AgentConfigOptions.TRACE_LOG_MAX_ARRAY_ELEMENTS
AgentConfigOptions.TRACE_LOG_MAX_DEPTH
AgentConfigOptions.ACTION_STATE_STORE_BACKEND
AgentConfigOptions.KAFKA_BOOTSTRAP_SERVERS
AgentConfigOptions.KAFKA_ACTION_STATE_TOPIC
AgentConfigOptions.KAFKA_ACTION_STATE_TOPIC_NUM_PARTITIONS
AgentConfigOptions.KAFKA_ACTION_STATE_TOPIC_REPLICATION_FACTOR
AgentConfigOptions.FLUSS_BOOTSTRAP_SERVERS
AgentConfigOptions.FLUSS_ACTION_STATE_DATABASE
AgentConfigOptions.FLUSS_ACTION_STATE_TABLE_BUCKETS
AgentConfigOptions.FLUSS_SECURITY_PROTOCOL
AgentConfigOptions.FLUSS_SASL_MECHANISM
AgentConfigOptions.FLUSS_SASL_JAAS_CONFIG
AgentConfigOptions.FLUSS_SASL_USERNAME
AgentConfigOptions.FLUSS_SASL_PASSWORD
MemoryEventOptions.MEMORY_GENERATE_EVENT
MemoryEventOptions.SHORT_TERM_WRITE
MemoryEventOptions.SENSORY_WRITE
MemoryEventOptions.SENSORY_READ
MemoryEventOptions.LONG_TERM_UPDATE
MemoryEventOptions.LONG_TERM_GET
MemoryEventOptions.LONG_TERM_SEARCH
ErrorHandlingStrategy.RETRY
ErrorHandlingStrategy.IGNORE
LongTermMemoryBackend.EXTERNAL_VECTOR_STORE
ShortTermMemoryTtlUpdate.ON_CREATE_AND_WRITE
ShortTermMemoryTtlVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP
MemoryType.SENSORY  # Flink Agents' memory_object.MemoryType (compat): public API
LongTermMemoryOptions.Mem0
LongTermMemoryOptions.EXTERNAL_VECTOR_STORE_NAME
Configuration.get_int
Configuration.get_float
Configuration.get_bool
Configuration.set_int
Configuration.set_float
Configuration.set_bool

# Flink Agents' resource names of providers not offered (api/_names.py): declarable, and
# building one says what to use instead
ResourceName.ChatModel.AZURE_OPENAI_CONNECTION
ResourceName.ChatModel.AZURE_OPENAI_SETUP
ResourceName.ChatModel.TONGYI_CONNECTION
ResourceName.ChatModel.TONGYI_SETUP
ResourceName.ChatModel.JAVA_WRAPPER_CONNECTION
ResourceName.ChatModel.JAVA_WRAPPER_SETUP
ResourceName.EmbeddingModel.JAVA_WRAPPER_CONNECTION
ResourceName.EmbeddingModel.JAVA_WRAPPER_SETUP
ResourceName.VectorStore.JAVA_WRAPPER_VECTOR_STORE
ResourceName.VectorStore.JAVA_WRAPPER_COLLECTION_MANAGEABLE_VECTOR_STORE
NotOfferedVectorStore.model_post_init  # pydantic's hook (refuses to build)
Event.__init__.__pydantic_base_init__  # pydantic reads it: the events' own __init__ is its
RunnerContext.get_resource.metric_group  # Flink Agents' argument: taken, not used here
Event.get_attachment  # Flink Agents' event attachments: public API a ported program calls
Event.set_attachment
# the OpenTelemetry SDK calls these on its id generator (observability/_span_ids.py)
flink_agents_py.observability._span_ids.RunIds.generate_trace_id
flink_agents_py.observability._span_ids.RunIds.generate_span_id
flink_agents_py.observability._span_ids.RunIds.is_trace_id_random
InjectedArg.from_sensory_memory  # Flink Agents' injected tool arguments: public API
InjectedArg.from_short_term_memory
ToolParameterSource._missing_  # enum's hook: a source named in any case
MemoryEvent.is_memory_type  # Flink Agents' memory events (compat): public API
EventContext.eventType  # Flink Agents' listener context (compat): read by listeners
# Flink Agents 0.2's long-term memory forms (api/_memory_sets.py): public API ports call
MemorySetItem.compacted
MemorySetItem.created_time
MemorySetItem.last_accessed_time
flink_agents_py.api.BaseLongTermMemory.get_or_create_memory_set
# Flink Agents 0.3's function descriptors (compat/_functions.py): public API ports call
JavaFunction.for_action
JavaFunction.parameter_types
# Flink Agents' ToolMetadata.args_schema (api/_tool_metadata.py): read by ported connections
ToolMetadata.args_schema
ToolResponse.is_error  # Flink Agents' ToolResponse (api/_tool_response.py): public API
SubagentSetup.subagent_name  # Flink Agents' name of a setup's resource name: read by ported setups
# the crash checker's stand-in classes (testing/_sentinel.py): issubclass() calls the hook
flink_agents_py.testing._sentinel._Standing.__subclasscheck__
