"""The Flink host: the runtime core in a PyFlink ``KeyedProcessFunction``. Needs apache-flink."""

from ._builder import FlinkAgentBuilder, FlinkExecutionEnvironment
from ._environment import create_stream_environment, python_path_for_workers
from ._operator import DRAIN_TIMESTAMP, ERROR_TAG, AgentOperator

__all__ = [
    "AgentOperator",
    "DRAIN_TIMESTAMP",
    "ERROR_TAG",
    "FlinkAgentBuilder",
    "FlinkExecutionEnvironment",
    "create_stream_environment",
    "python_path_for_workers",
]
