"""flink-agents-py: event-driven, durable AI agents on Apache Flink, in Python.

Public API: ``flink_agents_py.api``. Execution: ``AgentsExecutionEnvironment``.
"""

from ._environment import AgentsExecutionEnvironment

__version__ = "0.1.0"
__all__ = ["AgentsExecutionEnvironment", "__version__"]
