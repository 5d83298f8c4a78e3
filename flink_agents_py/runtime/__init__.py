"""The engine-neutral runtime core: no PyFlink here. Hosts (local, Flink) wrap ``AgentCore``."""

from ..api.internal import key_from_json, key_json
from . import _builtins  # noqa: F401 - registers the built-in actions with the plan first
from ._flow import FlowController, FlowStats, flow_controller
from ._host_options import HostOptions
from ._keys import (
    JSON_KEYS,
    KEY_ENCODINGS,
    PICKLE_KEYS,
    KeyEncoding,
    KeyEncodingError,
    KeyEncodingMismatchError,
    decode_key,
    encode_key,
    key_encoding,
    mismatch_message,
)
from ._resources import ResourceEnvironment, check_resources, warm_up
from ._serde import dumps as dumps_json
from ._serde import loads as loads_json
from .context._action_context import ActionContext
from .context._calls import DurableCall
from .core._core import AgentCore, ErrorRecord, StepResult
from .core._executor import IOExecutor
from .core._observer import CompositeObserver, Observer, ObserverProbe, Probe
from .core._results import RejectedKey, rejected_record, select_key
from .core._waits import wall_clock_ms
from .recorder._journal import SqliteJournal
from .recorder._journaled import JournaledCall
from .recorder._ledger import Failpoint, Journal
from .recorder._state import (
    PARKED_SUFFIX,
    STATE_FORMAT_VERSION,
    SUPPORTED_STATE_FORMATS,
    CallKind,
    CallRecord,
    InflightAction,
    InMemoryKeyState,
    KeyState,
    RunState,
    StateFormatError,
)

__all__ = [
    "PARKED_SUFFIX",
    "wall_clock_ms",
    "ActionContext",
    "AgentCore",
    "CallKind",
    "CallRecord",
    "JournaledCall",
    "CompositeObserver",
    "FlowController",
    "FlowStats",
    "flow_controller",
    "ObserverProbe",
    "Probe",
    "DurableCall",
    "ErrorRecord",
    "RejectedKey",
    "rejected_record",
    "select_key",
    "Failpoint",
    "HostOptions",
    "IOExecutor",
    "InMemoryKeyState",
    "InflightAction",
    "Journal",
    "Observer",
    "KeyState",
    "ResourceEnvironment",
    "dumps_json",
    "loads_json",
    "RunState",
    "SqliteJournal",
    "STATE_FORMAT_VERSION",
    "SUPPORTED_STATE_FORMATS",
    "StateFormatError",
    "StepResult",
    "check_resources",
    "JSON_KEYS",
    "KEY_ENCODINGS",
    "PICKLE_KEYS",
    "KeyEncoding",
    "KeyEncodingError",
    "KeyEncodingMismatchError",
    "mismatch_message",
    "decode_key",
    "encode_key",
    "key_encoding",
    "key_from_json",
    "key_json",
    "warm_up",
]
