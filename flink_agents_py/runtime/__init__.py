"""The engine-neutral runtime core: no PyFlink here. Hosts (local, Flink) wrap ``AgentCore``."""

from ._context import ActionContext, DurableCall
from ._core import AgentCore, ErrorRecord, Failpoint, Journal, StepResult
from ._executor import IOExecutor
from ._journal import SqliteJournal
from ._observer import CompositeObserver, Observer
from ._serde import dumps as dumps_json
from ._serde import loads as loads_json
from ._resources import ResourceEnvironment, check_resources
from ._state import CallKind, CallRecord, InflightAction, InMemoryKeyState, KeyState, RunState

__all__ = [
    "ActionContext",
    "AgentCore",
    "CallKind",
    "CallRecord",
    "CompositeObserver",
    "DurableCall",
    "ErrorRecord",
    "Failpoint",
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
    "StepResult",
    "check_resources",
]
