"""The Flink host: the runtime core in a PyFlink ``KeyedProcessFunction``. Needs apache-flink."""

from ._builder import FlinkAgentBuilder, FlinkExecutionEnvironment
from ._environment import create_stream_environment, python_path_for_workers
from ._files import LINE_ERRORS, FileInput, NumberedLines, read_lines_file
from ._kafka import (
    KAFKA_CONNECTOR_VERSION,
    KafkaInput,
    KafkaMessage,
    add_kafka_jars,
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
