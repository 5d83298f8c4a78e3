"""The local runner: the runtime core hosted in-process (no PyFlink).

Each public name is imported from its module on first use (PEP 562): a Flink job whose key
selector is ``default_key_selector`` unpickles it in its workers without loading the runner.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._clock import AdvanceTime, AfterRecords
    from ._records import default_key_selector
    from ._runner import LocalAgentJob, LocalExecutionEnvironment, LocalRunResult

__all__ = ["AdvanceTime", "AfterRecords", "LocalAgentJob", "LocalExecutionEnvironment",
           "LocalRunResult", "default_key_selector"]

_HOMES: dict[str, str] = {
    "AdvanceTime": "_clock",
    "AfterRecords": "_clock",
    "default_key_selector": "_records",
    "LocalAgentJob": "_runner",
    "LocalExecutionEnvironment": "_runner",
    "LocalRunResult": "_runner",
}
"""Each public name's module in this package."""


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use (PEP 562), then keep it here.

    Args:
        name: the attribute asked for.

    Returns:
        The object named ``name`` in ``__all__``.

    Raises:
        AttributeError: for a name this package does not export.
    """
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the not yet imported public ones included.

    Returns:
        The sorted names.
    """
    return sorted(set(globals()) | set(__all__))
