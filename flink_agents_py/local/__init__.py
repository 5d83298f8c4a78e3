"""The local runner: the runtime core hosted in-process (no PyFlink)."""

from ._clock import AdvanceTime
from ._runner import (
    LocalAgentJob,
    LocalExecutionEnvironment,
    LocalRunResult,
    default_key_selector,
)

__all__ = ["AdvanceTime", "LocalAgentJob", "LocalExecutionEnvironment", "LocalRunResult",
           "default_key_selector"]
