"""The local runner: the runtime core hosted in-process (no PyFlink)."""

from ._runner import (
    LocalAgentJob,
    LocalExecutionEnvironment,
    LocalRunResult,
    default_key_selector,
)

__all__ = ["LocalAgentJob", "LocalExecutionEnvironment", "LocalRunResult", "default_key_selector"]
