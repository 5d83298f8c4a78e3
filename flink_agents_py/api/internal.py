"""What the library's other packages use from the API's private modules (not user API).

User code imports from ``flink_agents_py.api``; the plan, the runtime, the hosts and the
integrations import these helpers from here, never from ``api._*`` modules themselves
(``tests/test_layers.py`` checks).
"""

from ._dynamic_events import event_to_send
from ._embeddings import check_texts
from ._errors import already_applied, shown_key, too_deep
from ._event_build import SLOT_SETTERS, not_an_event_message
from ._event_ids import EVENT_ID_SOURCE
from ._event_json import event_from_json, stored_event_from_json
from ._event_types import BUILTIN_TYPE_NAMES, FLINK_AGENTS_NAMES, BuiltinEventType, builtin_keys
from ._events import _REGISTRY as EVENT_TYPES
from ._events import (
    EVENT_CLASS_KEY,
    Event,
    builtin_of,
    event_class_for,
    event_class_tag,
    json_schema_of,
    output_classes_of,
)
from ._field_hints import unknown_key_message
from ._flow import collect_rate_limits
from ._key_forms import ACCEPTED as KEY_TYPES
from ._key_forms import TAGS as KEY_TAGS
from ._key_forms import key_from_json, key_json, tagged_json, untag
from ._lazy import lazy_exports
from ._loops import close_loop_clients, register_loop_owner
from ._memory import MemoryObject, memory_ref_of
from ._messages import (
    MAX_TOKEN_COUNT,
    one_json_object,
    refuse_empty_answer,
    refuse_truncated_calls,
    strict_json,
    strict_json_at,
)
from ._metric_groups import agent_metric_group
from ._names import flink_agents_class
from ._prompts import warn_unfilled_in
from ._resources import import_qualified, resource_type_argument
from ._secret_fields import register_resource_secrets
from ._secret_scrub import described, error_text, group_types, scrub_exception, validation_masked
from ._secret_urls import (
    register_plan_credentials,
    register_sdk_default_url,
    register_sdk_env_headers,
)
from ._secrets import (
    MESSAGE_MAX_CHARS,
    SECRET_VALUE_PATTERNS,
    SECRETS,
    MaskedStr,
    clip,
    cut_masked,
    has_known_secret,
    is_credential_name,
    mask_known,
    mask_known_value,
    mask_secrets,
    mask_value,
    register_header_secret,
    registered_secret_count,
)
from ._subagents import (
    TEXT_INPUT_SCHEMA,
    declared_input_schema,
    subagent_callable,
    subagent_prompt_values,
)
from ._tools import (
    RESERVED_TOOL_PREFIX,
    UNREADABLE_ARGUMENTS,
    offered_tool_name,
    refuse_unreadable_arguments,
)
from ._warnings import warn_at_user

__all__ = [
    "MAX_TOKEN_COUNT",
    "already_applied",
    "warn_unfilled_in",
    "strict_json",
    "strict_json_at",
    "output_classes_of",
    "not_an_event_message",
    "unknown_key_message",
    "KEY_TAGS",
    "KEY_TYPES",
    "key_from_json",
    "key_json",
    "tagged_json",
    "untag",
    "lazy_exports",
    "flink_agents_class",
    "close_loop_clients",
    "register_loop_owner",
    "BUILTIN_TYPE_NAMES",
    "FLINK_AGENTS_NAMES",
    "BuiltinEventType",
    "builtin_keys",
    "builtin_of",
    "EVENT_CLASS_KEY",
    "EVENT_ID_SOURCE",
    "SLOT_SETTERS",
    "EVENT_TYPES",
    "Event",
    "MaskedStr",
    "MemoryObject",
    "agent_metric_group",
    "MESSAGE_MAX_CHARS",
    "RESERVED_TOOL_PREFIX",
    "UNREADABLE_ARGUMENTS",
    "refuse_truncated_calls",
    "refuse_empty_answer",
    "one_json_object",
    "refuse_unreadable_arguments",
    "SECRET_VALUE_PATTERNS",
    "check_texts",
    "clip",
    "cut_masked",
    "shown_key",
    "collect_rate_limits",
    "event_class_for",
    "event_class_tag",
    "event_from_json",
    "stored_event_from_json",
    "too_deep",
    "event_to_send",
    "group_types",
    "has_known_secret",
    "import_qualified",
    "is_credential_name",
    "resource_type_argument",
    "json_schema_of",
    "mask_known",
    "mask_known_value",
    "mask_secrets",
    "mask_value",
    "memory_ref_of",
    "offered_tool_name",
    "register_header_secret",
    "register_plan_credentials",
    "register_sdk_default_url",
    "register_sdk_env_headers",
    "register_resource_secrets",
    "registered_secret_count",
    "SECRETS",
    "scrub_exception",
    "described",
    "error_text",
    "subagent_callable",
    "declared_input_schema",
    "TEXT_INPUT_SCHEMA",
    "subagent_prompt_values",
    "validation_masked",
    "warn_at_user",
]
