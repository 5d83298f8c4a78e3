"""The Flink host: the runtime core in a PyFlink ``KeyedProcessFunction``. Needs apache-flink.

Each public name is imported from its module on first use (PEP 562), so a TaskManager that
unpickles an ``AgentOperator`` loads the operator's modules only, not the job-building
client, the Kafka connector or the worker checks.
"""

from typing import TYPE_CHECKING

from ..api.internal import lazy_exports
from . import _quiet  # noqa: F401 - (the package's root quiets beam's optional filesystems)

if TYPE_CHECKING:
    from ._builder import FlinkAgentBuilder, FlinkExecutionEnvironment
    from ._environment import create_stream_environment, python_path_for_workers
    from ._files import LINE_ERRORS, FileInput, NumberedLines, read_lines_file
    from ._kafka import (
        KAFKA_CONNECTOR_VERSION,
        KafkaInput,
        KafkaMessage,
        add_kafka_jars,
        check_servers,
        from_kafka,
        kafka_jars,
        kafka_sink,
        parse_kafka_url,
        read_json_topic,
        to_kafka_rows,
        write_json_topic,
    )
    from ._kafka_journal import KafkaJournal
    from ._operator import DRAIN_TIMESTAMP, ERROR_TAG, AgentOperator
    from ._workers import WorkerSetup, WorkerSetupError, configure_workers

__all__ = [
    "AgentOperator",
    "DRAIN_TIMESTAMP",
    "ERROR_TAG",
    "FileInput",
    "FlinkAgentBuilder",
    "FlinkExecutionEnvironment",
    "KAFKA_CONNECTOR_VERSION",
    "KafkaInput",
    "KafkaJournal",
    "KafkaMessage",
    "LINE_ERRORS",
    "NumberedLines",
    "WorkerSetup",
    "WorkerSetupError",
    "add_kafka_jars",
    "check_servers",
    "configure_workers",
    "create_stream_environment",
    "from_kafka",
    "kafka_jars",
    "kafka_sink",
    "parse_kafka_url",
    "python_path_for_workers",
    "read_json_topic",
    "read_lines_file",
    "to_kafka_rows",
    "write_json_topic",
]

_HOMES: dict[str, str] = {
    **dict.fromkeys(("FlinkAgentBuilder", "FlinkExecutionEnvironment"), "_builder"),
    **dict.fromkeys(("create_stream_environment", "python_path_for_workers"), "_environment"),
    **dict.fromkeys(("LINE_ERRORS", "FileInput", "NumberedLines", "read_lines_file"), "_files"),
    **dict.fromkeys(("KAFKA_CONNECTOR_VERSION", "KafkaInput", "KafkaMessage", "add_kafka_jars",
                     "check_servers", "from_kafka", "kafka_jars", "kafka_sink", "parse_kafka_url",
                     "read_json_topic", "to_kafka_rows", "write_json_topic"), "_kafka"),
    "KafkaJournal": "_kafka_journal",
    **dict.fromkeys(("DRAIN_TIMESTAMP", "ERROR_TAG", "AgentOperator"), "_operator"),
    **dict.fromkeys(("WorkerSetup", "WorkerSetupError", "configure_workers"), "_workers"),
}
"""Each public name's module in this package."""


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)
