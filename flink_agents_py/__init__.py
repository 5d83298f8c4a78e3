"""flink-agents-py: event-driven, durable AI agents on Apache Flink, in Python.

Public API: ``flink_agents_py.api``. Execution: ``AgentsExecutionEnvironment`` (imported on
first use, so ``import flink_agents_py.api`` loads no runtime).
"""

from typing import TYPE_CHECKING, Any

from ._beam_logging import quiet_optional_filesystems
from ._logging import install_fallback_handler

if TYPE_CHECKING:
    from ._environment import AgentsExecutionEnvironment

__version__ = "0.1.0"
__all__ = ["AgentsExecutionEnvironment", "__version__"]

# before PyFlink starts apache-beam: a program that builds its own StreamExecutionEnvironment
# (Flink Agents' programs do) would print beam's "Failed to import GCSFileSystem" otherwise
quiet_optional_filesystems()
# this package's warnings carry their level and logger name when logging is unconfigured
install_fallback_handler()


def __getattr__(name: str) -> Any:
    """Import ``AgentsExecutionEnvironment`` on first use (PEP 562).

    Args:
        name: the attribute asked for.

    Returns:
        The ``AgentsExecutionEnvironment`` class.

    Raises:
        AttributeError: for any other name.
    """
    if name == "AgentsExecutionEnvironment":
        from ._environment import AgentsExecutionEnvironment

        return AgentsExecutionEnvironment
    raise AttributeError(f"module 'flink_agents_py' has no attribute {name!r}")


def _load_builtin_actions() -> None:
    """Import the runtime, which hands the plan its built-in actions (the plan's first read).

    The plan names no runtime module (``plan.BUILTIN_ACTIONS`` calls this when empty).
    """
    from . import runtime  # noqa: F401 - it registers them on import
