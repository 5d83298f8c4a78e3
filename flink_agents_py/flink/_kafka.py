"""Kafka in and out of agent jobs, with Flink's own Kafka connector.

Reading: ``read_json_topic`` builds a ``pyflink.datastream.connectors.kafka.KafkaSource`` and
turns each record into a Python value (JSON by default). Values arrive as bytes and are
decoded with the rules of ``flink_agents_py.io`` (a leading byte order mark removed; over
``max_record_bytes``, a NUL byte or invalid UTF-8 refused): a record that cannot be decoded or
does not parse leaves through ``KafkaInput.errors`` with its topic, partition and offset, and
the job goes on.
``from_kafka`` also keys the records for an agent (``FlinkAgentBuilder``).

Writing: ``write_json_topic`` (and ``kafka_sink`` for several topics at once) builds a
``pyflink.datastream.connectors.kafka.KafkaSink`` writing JSON values keyed by the agent key,
with the delivery guarantee chosen (``"exactly-once"``, ``"at-least-once"``, ``"none"``:
see ``_kafka_sink``). The connector is the shaded ``flink-sql-connector-kafka`` jar plus a
small helper jar (``_kafka_jars``; ``add_kafka_jars`` adds both to a job).

The code is in three modules: ``_kafka_jars`` (jars, URLs), ``_kafka_source`` (reading) and
``_kafka_sink`` (writing); this module gathers their names.
"""

from __future__ import annotations

from ._kafka_jars import (
    KAFKA_CONNECTOR_VERSION,
    add_kafka_jars,
    check_servers,
    kafka_jars,
    parse_kafka_url,
)
from ._kafka_sink import _ToRow as _ToRow  # used by tests
from ._kafka_sink import kafka_sink, to_kafka_rows, write_json_topic
from ._kafka_source import KafkaInput, KafkaMessage, from_kafka, json_value, read_json_topic
from ._kafka_source import _Parse as _Parse  # used by tests

__all__ = [
    "KAFKA_CONNECTOR_VERSION",
    "KafkaInput",
    "KafkaMessage",
    "add_kafka_jars",
    "check_servers",
    "from_kafka",
    "json_value",
    "kafka_jars",
    "kafka_sink",
    "parse_kafka_url",
    "read_json_topic",
    "to_kafka_rows",
    "write_json_topic",
]
