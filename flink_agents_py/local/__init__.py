"""The local runner: the runtime core hosted in-process (no PyFlink).

Each public name is imported from its module on first use (PEP 562): a Flink job whose key
selector is ``default_key_selector`` unpickles it in its workers without loading the runner.
"""

from typing import TYPE_CHECKING

from ..api.internal import lazy_exports

if TYPE_CHECKING:
    from ._clock import AdvanceTime, AfterRecords
    from ._environment import LocalExecutionEnvironment
    from ._records import default_key_selector
    from ._runner import LocalAgentJob, LocalRunResult

__all__ = ["AdvanceTime", "AfterRecords", "LocalAgentJob", "LocalExecutionEnvironment",
           "LocalRunResult", "default_key_selector"]

_HOMES: dict[str, str] = {
    "AdvanceTime": "_clock",
    "AfterRecords": "_clock",
    "default_key_selector": "_records",
    "LocalAgentJob": "_runner",
    "LocalExecutionEnvironment": "_environment",
    "LocalRunResult": "_runner",
}
"""Each public name's module in this package."""


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)
