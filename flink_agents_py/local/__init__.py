"""The local runner: the runtime core hosted in-process (no PyFlink)."""

from ._clock import AdvanceTime, AfterRecords
from ._records import default_key_selector
from ._runner import LocalAgentJob, LocalExecutionEnvironment, LocalRunResult

__all__ = ["AdvanceTime", "AfterRecords", "LocalAgentJob", "LocalExecutionEnvironment",
           "LocalRunResult", "default_key_selector"]
