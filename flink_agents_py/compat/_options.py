"""Flink Agents' configuration: options, ``Configuration``, and what each option does here.

A program configures its environment as in Flink Agents (``agents_env.get_config().set(
AgentExecutionOptions.X, value)``, ``set_int("key", n)``, ``get_configuration(path)``).
Here:

- ``NUM_ASYNC_THREADS`` is the environment's ``max_in_flight``;
- ``ERROR_HANDLING_STRATEGY`` / ``MAX_RETRIES`` are the ``error_policy`` /
  ``retry_max_attempts`` (retries + 1) of every chat model setup that does not set its own;
- every key (these too, long-term memory's, a program's own) goes into the configuration of each
  agent applied afterwards (``Agent.set_config``), an agent's own value winning;
- the file event log's options (``baseLogDir``, ``eventLoggerType``, ``prettyPrint``,
  ``event-log.*``) write Flink Agents' event log files (``observability.ApacheEventLog``);
- options of Flink Agents' machinery that has no counterpart here (its SLF4J event logger,
  action state stores, ``*.async`` switches: every call is asynchronous) are taken and
  change nothing (logged once); ``SHORT_TERM_MEMORY_STATE_TTL_MS`` is refused: memory never expires
  here, and a program relying on it would grow without bound.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from ..api import AgentConfig, UsageError
from ..api import LongTermMemoryOptions as _OurLongTermMemoryOptions
from ..api.internal import register_plan_credentials
from ..observability.internal import APACHE_KEYS

log = logging.getLogger(__name__)

__all__ = ["ConfigOption", "Configuration", "AgentExecutionOptions", "AgentConfigOptions",
           "ConditionEvaluationFailureStrategy", "MemoryEventOptions", "ErrorHandlingStrategy",
           "EventLogLevel", "LoggerType", "LongTermMemoryBackend",
           "LongTermMemoryOptions", "ShortTermMemoryTtlUpdate", "ShortTermMemoryTtlVisibility"]


@dataclass(frozen=True)
class ConfigOption:
    """One configuration option: its ``key``, type and ``default``.

    In Flink Agents' order: ``ConfigOption("my.key", int, 5)``.
    """

    key: str
    config_type: Any = None
    default: Any = None

    def get_key(self) -> str:
        """The option's key (Flink Agents' accessor)."""
        return self.key

    def get_type(self) -> Any:
        """The option's value type (Flink Agents' accessor)."""
        return self.config_type

    def get_default_value(self) -> Any:
        """The option's default (Flink Agents' accessor)."""
        return self.default


class ErrorHandlingStrategy(Enum):
    """What a failed model call of the built-in chat action does (our ``error_policy``)."""

    RETRY = "retry"
    FAIL = "fail"
    IGNORE = "ignore"


class LongTermMemoryBackend(Enum):
    """Long-term memory backends: an external vector store (the only one here)."""

    EXTERNAL_VECTOR_STORE = "external_vector_store"


class ShortTermMemoryTtlUpdate(Enum):
    """When Flink Agents renews a short-term memory TTL (no effect: memory never expires)."""

    ON_CREATE_AND_WRITE = "ON_CREATE_AND_WRITE"
    ON_READ_AND_WRITE = "ON_READ_AND_WRITE"


class ShortTermMemoryTtlVisibility(Enum):
    """Whether Flink Agents returns expired short-term memory (no effect: none expires)."""

    NEVER_RETURN_EXPIRED = "NEVER_RETURN_EXPIRED"
    RETURN_EXPIRED_IF_NOT_CLEANED_UP = "RETURN_EXPIRED_IF_NOT_CLEANED_UP"


class AgentExecutionOptions:
    """Flink Agents' execution options (see the module docstring for what each does here)."""

    NUM_ASYNC_THREADS = ConfigOption("num-async-threads", int, 32)
    """The most I/O calls (model, tool) running at once: our ``max_in_flight``."""
    ERROR_HANDLING_STRATEGY = ConfigOption("error-handling-strategy", ErrorHandlingStrategy,
                                           ErrorHandlingStrategy.FAIL)
    """The default ``error_policy`` of the chat model setups."""
    MAX_RETRIES = ConfigOption("max-retries", int, 3)
    """Retries of a model call under ``RETRY`` (``retry_max_attempts`` is this plus one)."""
    RETRY_WAIT_INTERVAL = ConfigOption("retry-wait-interval", int, 1)
    CHAT_ASYNC = ConfigOption("chat.async", bool, True)
    TOOL_CALL_ASYNC = ConfigOption("tool-call.async", bool, True)
    RAG_ASYNC = ConfigOption("rag.async", bool, True)
    SHORT_TERM_MEMORY_STATE_TTL_MS = ConfigOption("short-term-memory.state-ttl.ms", int, 0)
    """Refused above 0 (memory never expires here); 0 (disabled) is taken."""
    SHORT_TERM_MEMORY_STATE_TTL_UPDATE_TYPE = ConfigOption(
        "short-term-memory.state-ttl.update-type", ShortTermMemoryTtlUpdate,
        ShortTermMemoryTtlUpdate.ON_READ_AND_WRITE)
    """Consulted by Flink Agents only with a TTL: no effect here."""
    SHORT_TERM_MEMORY_STATE_TTL_VISIBILITY = ConfigOption(
        "short-term-memory.state-ttl.visibility", ShortTermMemoryTtlVisibility,
        ShortTermMemoryTtlVisibility.NEVER_RETURN_EXPIRED)
    """Consulted by Flink Agents only with a TTL: no effect here."""
    TOOL_CALL_PARALLEL = ConfigOption("tool-call.parallel", bool, True)
    """``False``: a round's tool calls run one after another (the setups' ``tool_dispatch``
    ``"serial"``, for those that do not set their own)."""
    AGENT_RUN_BEGIN_EVENT = ConfigOption("agent-run.begin-event", bool, False)
    TOOL_CALL_NUM_ASYNC_THREADS = ConfigOption("tool-call.num-async-threads", int, 32)
    TOOL_CALL_BATCH_TIMEOUT = ConfigOption("tool-call.batch.timeout", int, -1)


class LoggerType(Enum):
    """Flink Agents' event logger types: ``FILE`` is its file event log (``ApacheEventLog``)."""

    SLF4J = "slf4j"
    FILE = "file"


class EventLogLevel(Enum):
    """How much of an event Flink Agents' file event log writes."""

    OFF = "OFF"
    STANDARD = "STANDARD"
    VERBOSE = "VERBOSE"


class ConditionEvaluationFailureStrategy(Enum):
    """Flink Agents' choice when an action's trigger condition fails to evaluate (no effect)."""

    WARN_AND_SKIP = "WARN_AND_SKIP"
    FAIL = "FAIL"


class AgentConfigOptions:
    """Flink Agents' core options: its file event log's (see ``observability.ApacheEventLog``).

    Its action-state machinery's options have no effect here.
    """

    JOB_IDENTIFIER = ConfigOption("job-identifier", str, None)
    ERROR_HANDLING_STRATEGY = AgentExecutionOptions.ERROR_HANDLING_STRATEGY
    """Flink Agents 0.2's place of ``AgentExecutionOptions.ERROR_HANDLING_STRATEGY`` (the same
    option: its programs set ``AgentConfigOptions.ERROR_HANDLING_STRATEGY``)."""
    MAX_RETRIES = AgentExecutionOptions.MAX_RETRIES
    """Flink Agents 0.2's place of ``AgentExecutionOptions.MAX_RETRIES`` (the same option)."""
    BASE_LOG_DIR = ConfigOption("baseLogDir", str, None)
    """Where Flink Agents' file event log is written (``events-{job}-{task}-{subtask}.log``)."""
    EVENT_LOGGER_TYPE = ConfigOption("eventLoggerType", LoggerType, LoggerType.SLF4J)
    """``FILE`` without ``BASE_LOG_DIR``: the file event log in ``{tmp}/flink-agents``."""
    PRETTY_PRINT = ConfigOption("prettyPrint", bool, False)
    EVENT_LOG_LEVEL = ConfigOption("event-log.level", EventLogLevel, EventLogLevel.STANDARD)
    EVENT_LOG_MAX_STRING_LENGTH = ConfigOption("event-log.standard.max-string-length", int,
                                               2000)
    EVENT_LOG_MAX_ARRAY_ELEMENTS = ConfigOption("event-log.standard.max-array-elements", int,
                                                20)
    EVENT_LOG_MAX_DEPTH = ConfigOption("event-log.standard.max-depth", int, 5)
    ACTION_STATE_STORE_BACKEND = ConfigOption("actionStateStoreBackend", str, None)
    KAFKA_BOOTSTRAP_SERVERS = ConfigOption("kafkaBootstrapServers", str, "localhost:9092")
    KAFKA_ACTION_STATE_TOPIC = ConfigOption("kafkaActionStateTopic", str, None)
    KAFKA_ACTION_STATE_TOPIC_NUM_PARTITIONS = ConfigOption(
        "kafkaActionStateTopicNumPartitions", int, 64)
    KAFKA_ACTION_STATE_TOPIC_REPLICATION_FACTOR = ConfigOption(
        "kafkaActionStateTopicReplicationFactor", int, 1)
    FLUSS_BOOTSTRAP_SERVERS = ConfigOption("flussBootstrapServers", str, "localhost:9123")
    FLUSS_ACTION_STATE_DATABASE = ConfigOption("flussActionStateDatabase", str, "flink_agents")
    FLUSS_ACTION_STATE_TABLE = ConfigOption("flussActionStateTable", str, None)
    FLUSS_ACTION_STATE_TABLE_BUCKETS = ConfigOption("flussActionStateTableBuckets", int, 64)
    FLUSS_SECURITY_PROTOCOL = ConfigOption("flussSecurityProtocol", str, "PLAINTEXT")
    FLUSS_SASL_MECHANISM = ConfigOption("flussSaslMechanism", str, "PLAIN")
    FLUSS_SASL_JAAS_CONFIG = ConfigOption("flussSaslJaasConfig", str, None)
    FLUSS_SASL_USERNAME = ConfigOption("flussSaslUsername", str, None)
    FLUSS_SASL_PASSWORD = ConfigOption("flussSaslPassword", str, None)
    CONDITION_EVALUATION_FAILURE_STRATEGY = ConfigOption(
        "action.trigger-condition.evaluate-failure-strategy", ConditionEvaluationFailureStrategy,
        ConditionEvaluationFailureStrategy.WARN_AND_SKIP)
    EVENT_LOG_TRACE_ENABLED = ConfigOption("event-log.trace.enabled", bool, False)
    """Flink Agents' trace records in its event log: not written here (no effect)."""
    EVENT_LISTENERS = ConfigOption("event-listeners", list, None)
    """Flink Agents' event listeners (``compat.EventListener`` classes, or their text),
    called for every event the agent processes (``compat._listeners``)."""
    TRACE_LOG_OUTPUT_BASE_DIR = ConfigOption("trace-log.base-dir", str, None)
    """Where Flink Agents' file Trace Log is written (``traces-{job}-{task}-{subtask}.log``;
    ``observability._apache_trace_log``)."""
    TRACE_LOG_OUTPUT_TYPE = ConfigOption("trace-log.output-type", LoggerType, None)
    TRACE_LOG_OUTPUT_PRETTY_PRINT = ConfigOption("trace-log.pretty-print", bool, False)
    TRACE_LOG_TARGETS = ConfigOption("trace-log.targets", list, None)
    """What the Trace Log records: ``[{"scope": "EVENT_ONLY" | "ALL" | {"entityType", "entityName"},
    "detail": "OFF" | "STANDARD" | "VERBOSE"}]`` (the default: events at ``STANDARD``)."""
    TRACE_LOG_MAX_STRING_LENGTH = ConfigOption("trace-log.standard.max-string-length", int,
                                               2000)
    TRACE_LOG_MAX_ARRAY_ELEMENTS = ConfigOption("trace-log.standard.max-array-elements", int,
                                                20)
    TRACE_LOG_MAX_DEPTH = ConfigOption("trace-log.standard.max-depth", int, 5)


class MemoryEventOptions:
    """Flink Agents' memory observation events (``compat.ShortTermWriteEvent``...).

    ``MEMORY_GENERATE_EVENT``, ``SHORT_TERM_WRITE`` and ``SENSORY_WRITE`` turn off the write
    events an agent listening to them gets (on by default, as in Flink Agents); the others
    have no effect (reads and long-term operations send no events here).
    """

    MEMORY_GENERATE_EVENT = ConfigOption("memory.generate-event", bool, None)
    SHORT_TERM_WRITE = ConfigOption("memory.generate-event.short-term-write", bool, None)
    SHORT_TERM_READ = ConfigOption("memory.generate-event.short-term-read", bool, None)
    SENSORY_WRITE = ConfigOption("memory.generate-event.sensory-write", bool, None)
    SENSORY_READ = ConfigOption("memory.generate-event.sensory-read", bool, None)
    LONG_TERM_UPDATE = ConfigOption("memory.generate-event.long-term-update", bool, None)
    LONG_TERM_GET = ConfigOption("memory.generate-event.long-term-get", bool, None)
    LONG_TERM_SEARCH = ConfigOption("memory.generate-event.long-term-search", bool, None)
    AGENT_RUN_BEGIN_EVENT = AgentExecutionOptions.AGENT_RUN_BEGIN_EVENT


class _Mem0:
    """Flink Agents' Mem0 long-term memory options; the store is ours (the rest: no effect)."""

    VECTOR_STORE = ConfigOption(_OurLongTermMemoryOptions.VECTOR_STORE, str, None)
    CHAT_MODEL_SETUP = ConfigOption("long-term-memory.mem0.chat-model-setup", str, None)
    EMBEDDING_MODEL_SETUP = ConfigOption("long-term-memory.mem0.embedding-model-setup", str,
                                         None)


class LongTermMemoryOptions(_OurLongTermMemoryOptions):
    """Our long-term memory keys, plus Flink Agents' names for them.

    ``Mem0.VECTOR_STORE`` and ``EXTERNAL_VECTOR_STORE_NAME`` name the ``VECTOR_STORE`` resource
    that holds the items (our ``VECTOR_STORE``). Items are stored as given (no model extracts
    facts from them, so ``Mem0.CHAT_MODEL_SETUP`` changes nothing); the store's embedding
    model embeds them.
    """

    Mem0 = _Mem0
    BACKEND = ConfigOption("long-term-memory.backend", LongTermMemoryBackend, None)
    EXTERNAL_VECTOR_STORE_NAME = ConfigOption(_OurLongTermMemoryOptions.VECTOR_STORE, str, None)
    ASYNC_COMPACTION = ConfigOption("long-term-memory.async-compaction", bool, False)


_SENT_MEMORY_EVENTS = frozenset({MemoryEventOptions.MEMORY_GENERATE_EVENT.key,
                                 MemoryEventOptions.SHORT_TERM_WRITE.key,
                                 MemoryEventOptions.SENSORY_WRITE.key})
"""The memory event options that take effect (``runtime._memory_events``)."""

_NO_EFFECT = frozenset({
    *(o.key for o in vars(AgentConfigOptions).values() if isinstance(o, ConfigOption)
      if not o.key.startswith(APACHE_KEYS) and o.key != "event-listeners"),
    *(o.key for o in vars(MemoryEventOptions).values() if isinstance(o, ConfigOption)
      if o.key not in _SENT_MEMORY_EVENTS),
    AgentConfigOptions.EVENT_LOG_TRACE_ENABLED.key,
    AgentExecutionOptions.TOOL_CALL_NUM_ASYNC_THREADS.key,
    AgentExecutionOptions.TOOL_CALL_BATCH_TIMEOUT.key,
    AgentExecutionOptions.RETRY_WAIT_INTERVAL.key, AgentExecutionOptions.CHAT_ASYNC.key,
    AgentExecutionOptions.TOOL_CALL_ASYNC.key, AgentExecutionOptions.RAG_ASYNC.key,
    AgentExecutionOptions.SHORT_TERM_MEMORY_STATE_TTL_UPDATE_TYPE.key,
    AgentExecutionOptions.SHORT_TERM_MEMORY_STATE_TTL_VISIBILITY.key,
    LongTermMemoryOptions.BACKEND.key, LongTermMemoryOptions.ASYNC_COMPACTION.key,
    _Mem0.CHAT_MODEL_SETUP.key, _Mem0.EMBEDDING_MODEL_SETUP.key,
})


def _options_by_key() -> dict[str, ConfigOption]:
    classes = (AgentExecutionOptions, AgentConfigOptions, MemoryEventOptions, _Mem0,
               LongTermMemoryOptions)
    found = {o.key: o for c in classes for o in vars(c).values() if isinstance(o, ConfigOption)}
    for name, key in vars(_OurLongTermMemoryOptions).items():
        if name.isupper() and isinstance(key, str):
            found.setdefault(key, ConfigOption(key, str, None))
    return found


_OPTIONS = _options_by_key()
"""Every key an option of Flink Agents' or ours names, with its option."""


def _near_miss(key: str) -> str | None:
    """The known key ``key`` looks like a typo of (``num-async-thread``), else ``None``."""
    if key in _OPTIONS or key.startswith("event-log.type."):
        return None
    close = difflib.get_close_matches(key.lower(), list(_OPTIONS), n=1, cutoff=0.8)
    return close[0] if close else None


def _checked(option: ConfigOption, value: Any) -> None:
    """Raise ``UsageError`` when ``value`` cannot be ``option``'s (an enum's or a number's).

    Raises:
        UsageError: naming the key, the value and what it takes.
    """
    kind = option.config_type
    if isinstance(kind, type) and issubclass(kind, Enum):
        allowed = [str(m.value) for m in kind]
        if str(value).lower() not in {a.lower() for a in allowed}:
            raise UsageError(f"configuration {option.key!r}: {value!r} is not one of "
                             f"{', '.join(allowed)} ({kind.__name__})")
    elif kind in (int, float) and not isinstance(value, bool):
        try:
            kind(value)
        except (TypeError, ValueError):
            raise UsageError(f"configuration {option.key!r}: {value!r} is not "
                             f"{'an int' if kind is int else 'a number'}") from None


def _truthy(value: Any) -> bool:
    return value.strip().lower() not in ("false", "0", "no", "off") \
        if isinstance(value, str) else bool(value)


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


class Configuration:
    """Key-value configuration of an environment (Flink Agents' ``Configuration``)."""

    def __init__(self, on_set: Callable[[str, Any], None]) -> None:
        self._values: dict[str, Any] = {}
        self._on_set = on_set

    def set(self, option: ConfigOption | str, value: Any) -> Configuration:
        """Set ``option`` (a ``ConfigOption`` or its key) to ``value``.

        Returns:
            ``self``, for chaining.

        A key within a letter or two of an option's key (``num-async-thread``) is kept as
        the program's own and logged as a WARNING naming the option it resembles.

        Raises:
            UsageError: for ``SHORT_TERM_MEMORY_STATE_TTL_MS`` above 0 (not offered), and for
                a value an option cannot take (``error-handling-strategy`` ``"rety"``, a
                ``max-retries`` that is no number), naming the key and what it takes.
        """
        key = option.key if isinstance(option, ConfigOption) else str(option)
        value = _plain(value)
        if key == AgentExecutionOptions.SHORT_TERM_MEMORY_STATE_TTL_MS.key and value:
            raise UsageError(
                "short-term memory TTL (AgentExecutionOptions.SHORT_TERM_MEMORY_STATE_TTL_MS) "
                "is not offered: short-term memory is kept until an action deletes it "
                "(ctx.short_term_memory.delete(path)); keep a timestamp beside what should "
                "expire and delete it when read past its age")
        if key in _OPTIONS:
            _checked(_OPTIONS[key], value)
        elif (near := _near_miss(key)) is not None:
            log.warning("configuration %r is no option of Flink Agents' or flink-agents-py's; "
                        "did you mean %r? (kept as the program's own key, which ctx.config "
                        "reads)", key, near)
        if key in _NO_EFFECT:
            log.info("configuration %r: Flink Agents' option has no effect here (see "
                     "docs/reference/flink-agents-names.md)", key)
        register_plan_credentials({key: value}, f"configuration {key!r}")  # a credential
        self._values[key] = value
        self._on_set(key, value)
        return self

    def get(self, option: ConfigOption | str, default: Any = None) -> Any:
        """The value of ``option`` (its default when unset; an enum option's as its member)."""
        if isinstance(option, ConfigOption):  # read as an action reads it (``ctx.config``)
            return AgentConfig(self._values).get(option, default)
        return self._values.get(str(option), default)

    def set_str(self, key: str, value: str) -> Configuration:
        """Set ``key`` (Flink Agents' typed setters; all alike here). Returns ``self``."""
        return self.set(key, value)

    set_int = set_float = set_bool = set_str

    def get_str(self, key: str, default: Any = None) -> Any:
        """The value of ``key`` (Flink Agents' typed getters; all alike here)."""
        return self.get(key, default)

    get_int = get_float = get_bool = get_str

    def values(self) -> dict[str, Any]:
        """Every value set, by key."""
        return dict(self._values)

    def agent_config(self) -> dict[str, Any]:
        """Each agent's configuration (``ctx.config``): every key, as in Flink Agents.

        Returns:
            The keys and values set here, the host's and the chat defaults' included.
        """
        return dict(self._values)

    def chat_defaults(self) -> dict[str, Any]:
        """The chat model setups' defaults set here (``error_policy``, ``tool_dispatch``...)."""
        out: dict[str, Any] = {}
        strategy = self._values.get(AgentExecutionOptions.ERROR_HANDLING_STRATEGY.key)
        if strategy is not None:
            out["error_policy"] = str(strategy).lower()
        retries = self._values.get(AgentExecutionOptions.MAX_RETRIES.key)
        if retries is not None:
            out["retry_max_attempts"] = int(retries) + 1
        parallel = self._values.get(AgentExecutionOptions.TOOL_CALL_PARALLEL.key)
        if parallel is not None:
            out["tool_dispatch"] = "concurrent" if _truthy(parallel) else "serial"
        return out

    def load_yaml(self, path: str | Path) -> None:
        """Set every option of the ``agent:`` section of a Flink configuration file.

        Nested keys are joined with dots (``chat: {async: true}`` is ``chat.async``). The
        file is read within the YAML loader's budget (``yaml.read_yaml``: at most 20,000
        nodes once aliases are expanded, 64 levels deep): a few lines of aliases ("billion
        laughs") kept ``yaml.safe_load`` and the walk of the section going for ever.

        Raises:
            UsageError: when the file has no ``agent:`` mapping.
            YamlError: when the file is over the budget or not YAML, naming it and the line.
        """
        from ..yaml import read_yaml_file

        data = read_yaml_file(path, kind="Flink configuration YAML") or {}
        section = data.get("agent") if isinstance(data, dict) else None
        if not isinstance(section, dict):
            raise UsageError(f"{path}: no 'agent:' section (Flink Agents' options are "
                             "nested under 'agent:' in the Flink configuration file)")

        def walk(prefix: str, node: dict[str, Any]) -> None:
            for k, v in node.items():
                key = f"{prefix}{k}"
                if isinstance(v, dict):
                    walk(key + ".", v)
                else:
                    self.set(key, v)

        walk("", section)
