"""The local runner: the runtime core hosted in-process (no PyFlink)."""

from ._clock import AdvanceTime, AfterRecords
from ._runner import (
    LocalAgentJob,
    LocalExecutionEnvironment,
    LocalRunResult,
    default_key_selector,
)

__all__ = ["AdvanceTime", "AfterRecords", "LocalAgentJob", "LocalExecutionEnvironment",
           "LocalRunResult", "default_key_selector"]
