"""Writing agent outputs to Kafka topics with Flink's ``KafkaSink``.

``write_json_topic`` (and ``kafka_sink`` for several topics at once, fed by ``to_kafka_rows``)
builds a ``pyflink.datastream.connectors.kafka.KafkaSink`` writing JSON values keyed by the
agent key.

Delivery guarantees of the sink (``delivery_guarantee``):

- ``"exactly-once"``: records are written in Kafka transactions committed when a checkpoint
  completes; consumers reading with ``isolation.level=read_committed`` see each output once,
  also across failures and restores. Needs checkpointing, and results become visible only at
  checkpoints (latency ~ the checkpoint interval). The producer's ``transaction.timeout.ms``
  (``transaction_timeout_ms``, default 15 min) must exceed the checkpoint interval plus the
  longest checkpoint and restart time (or Kafka aborts a transaction Flink still means to
  commit, and its records are lost), and may not exceed the broker's
  ``transaction.max.timeout.ms`` (15 min by default; Flink's own default of 1 h is refused by a
  default broker, hence ours). ``transactional_id_prefix`` must be unique per job on a Kafka
  cluster and stable across restarts of that job.
- ``"at-least-once"``: flushed at each checkpoint; a restore can write duplicates.
- ``"none"``: fire and forget.
"""

from __future__ import annotations

import base64
import dataclasses
import logging
from collections.abc import Callable
from typing import Any, Literal

import orjson
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from ..api.internal import cut_masked, described
from ..io import excerpt
from ._fresh import shipped
from ._kafka_jars import SERIALIZER, add_kafka_jars, check_servers, new_java

__all__ = ["DeliveryGuarantee", "kafka_sink", "to_kafka_rows", "write_json_topic"]

_SINK_FIELDS = ["topic", "key", "value"]

DeliveryGuarantee = Literal["exactly-once", "at-least-once", "none"]
"""What ``kafka_sink`` and ``write_json_topic`` promise (see the module docstring)."""

MAX_REQUEST_BYTES = 1_048_576
"""The Kafka producer's default ``max.request.size``: no record may be larger."""
_RECORD_OVERHEAD = 128
"""Bytes a record takes beyond its key and value in the producer's size check (at most ~90)."""

log = logging.getLogger(__name__)


def _json_form(value: Any) -> Any:
    """What orjson cannot encode itself, in the JSON form an output event's field takes.

    Agent outputs reach the sink as the action made them: a pydantic model (structured
    output), a ``decimal.Decimal``, ``bytes`` (key types the runtime keeps) become pydantic's
    JSON form (a model its fields by alias; ``bytes`` that are not UTF-8 base64 text), as
    they are in the output after a restore.

    Returns:
        The value's JSON form.

    Raises:
        TypeError: for a value with no JSON form.
    """
    try:
        return to_jsonable_python(value)
    except Exception:  # noqa: BLE001 - PydanticSerializationError, UnicodeDecodeError
        if isinstance(value, (bytes, bytearray)):
            return base64.b64encode(bytes(value)).decode("ascii")
        raise TypeError(f"{type(value).__name__} has no JSON form") from None


def _key_text(key: Any) -> str | None:
    if key is None or isinstance(key, str):
        return key
    return orjson.dumps(key, default=_json_form, option=orjson.OPT_NON_STR_KEYS).decode()


def _default_key(record: Any) -> Any:
    """The Kafka key of a record when no key selector is given.

    Returns:
        Its ``"key"`` item (a dict) or ``key`` attribute (a pydantic model, a dataclass), as
        ``from_datastream`` keys records; ``None`` (no Kafka key) otherwise.
    """
    if isinstance(record, dict):
        return record.get("key")
    if isinstance(record, BaseModel) or (
            dataclasses.is_dataclass(record) and not isinstance(record, type)):
        return getattr(record, "key", None)
    return None


def _check_checkpointing(env: Any, topic: str) -> None:
    """Warn of exactly-once output from a local job that takes no checkpoints.

    Its transactions are committed at checkpoints: without them a bounded job's output is
    committed at its end only, and an unbounded job's never (``read_committed`` consumers see
    nothing, and Kafka aborts it after ``transaction.timeout.ms``). A warning, not a refusal:
    a bounded job without checkpoints is a common, working program. A job for a cluster is
    not checked here (the cluster's configuration may enable checkpointing).
    """
    from ._workers import on_local_target

    if not on_local_target(env) \
            or env.get_checkpoint_config().is_checkpointing_enabled():
        return
    log.warning(
        "exactly-once output to Kafka topic %r is committed at checkpoints, and this job "
        "takes none: a bounded job's output becomes visible to read_committed consumers at "
        "its end only, an unbounded job's never (Kafka aborts it after "
        "transaction_timeout_ms). Enable checkpointing before adding the sink "
        "(create_stream_environment(checkpoint_interval_ms=10_000), or "
        "env.enable_checkpointing(10_000)), or pass delivery_guarantee='at-least-once'", topic)


class _ToRow:
    """A record -> ``Row(topic, key, value)`` (JSON value) for the helper serializer.

    A record that cannot be written would fail the sink, the job and every restart of it
    (the same output comes again), and no other output of the checkpoint would be committed:
    one too large for the producer (``max_request_bytes``, its ``max.request.size``), one with
    no JSON form (an object of no JSON type, nesting deeper than orjson writes: 255 levels)
    or whose key selector raises. Such a record is written as an error row in its place (and
    logged at WARNING).
    """

    def __init__(self, topic: str | Callable[[Any], str],
                 key_selector: Callable[[Any], Any],
                 max_request_bytes: int = MAX_REQUEST_BYTES) -> None:
        self.topic = topic
        self.key_selector = key_selector
        self.max_request_bytes = max_request_bytes

    def __call__(self, record: Any) -> Any:
        from pyflink.common import Row

        topic = self.topic(record) if callable(self.topic) else self.topic
        key = None
        try:
            key = _key_text(self.key_selector(record))
        except Exception as e:  # noqa: BLE001 - one record's failure, not the job's
            return Row(topic, None, self._error_row(
                topic, None, f"its Kafka key could not be made ({described(e)})",
                _shown(record)).decode())
        try:
            value = orjson.dumps(record, default=_json_form, option=orjson.OPT_NON_STR_KEYS)
        except TypeError as e:  # orjson.JSONEncodeError, or a value's own failure
            return Row(topic, key, self._error_row(
                topic, key, f"a {type(record).__name__} record has no JSON form ({e}): write "
                "JSON data, a pydantic model or a dataclass", _shown(record)).decode())
        size = len(value) + len(key.encode("utf-8", "surrogatepass") if key else b"")
        if size + _RECORD_OVERHEAD > self.max_request_bytes:
            value = self._error_row(
                topic, key, f"a record of {size:,} bytes for Kafka topic {topic!r} is over the "
                f"producer's max.request.size of {self.max_request_bytes:,} bytes: this "
                "error row was written in its place (raise max.request.size, and the "
                "topic's max.message.bytes, to write such records)", value)
        return Row(topic, key, value.decode())

    @staticmethod
    def _error_row(topic: str, key: str | None, error: str, value: bytes | str) -> bytes:
        if not error.startswith("a record of "):
            error = (f"a record for Kafka topic {topic!r} could not be written: {error}; this "
                     "error row was written in its place")
        if key is not None:  # a lone surrogate has no UTF-8 (it is written escaped)
            key = key.encode("utf-8", "backslashreplace").decode("utf-8")
        log.warning("key %s: %s", key, error)
        return orjson.dumps({"kind": "error", "topic": topic, "key": key, "error": error,
                             "value": excerpt(value, 1000)})


def _shown(record: Any) -> str:
    """A record's printable ``repr`` (for an error row), whatever its ``repr`` does."""
    try:
        text = repr(record)
    except Exception as e:  # noqa: BLE001 - RecursionError, a repr of its own that raises
        text = f"<{type(record).__name__}: repr failed: {type(e).__name__}>"
    return cut_masked(text, 2000).encode("utf-8", "backslashreplace").decode("utf-8")


def to_kafka_rows(ds: Any, topic: str | Callable[[Any], str],
                  key_selector: Callable[[Any], Any] | None = None, name: str | None = None,
                  max_request_bytes: int = MAX_REQUEST_BYTES) -> Any:
    """Map records to the ``Row(topic, key, value)`` elements ``kafka_sink`` writes.

    Use it to send several streams (results, errors) to different topics through one sink
    (one transaction per checkpoint): ``to_kafka_rows(a, "x").union(to_kafka_rows(b, "y"))``.

    Args:
        ds: a ``DataStream`` of records with a JSON form: JSON data, pydantic models
            (by alias), dataclasses; ``Decimal``, ``UUID``, dates and ``bytes`` (UTF-8 text,
            else base64) as text, as in an agent output after a restore.
        topic: the topic, or a function of the record giving it.
        key_selector: the record's Kafka key (default: its ``"key"`` field or attribute);
            strings are written as they are, other values as JSON, ``None`` as no key.
        name: the map's name and uid (default ``to-kafka-<topic>``).
        max_request_bytes: the sink producer's ``max.request.size``. A record too large for
            it is written as an error row in its place, ``{"kind": "error", "topic", "key",
            "error", "value"}`` (an excerpt), and logged at WARNING: sent as it is, it would
            fail the job at every restart.

    Returns:
        A ``DataStream`` of ``Row(topic, key, value)``.

    """
    from pyflink.common import Types

    label = name or f"to-kafka-{topic if isinstance(topic, str) else 'rows'}"
    row_type = Types.ROW_NAMED(_SINK_FIELDS, [Types.STRING(), Types.STRING(), Types.STRING()])
    to_row = _ToRow(topic, key_selector or _default_key, max_request_bytes)
    return ds.map(shipped(to_row), output_type=row_type).name(label).uid(label)


def kafka_sink(
    bootstrap_servers: str,
    *,
    delivery_guarantee: DeliveryGuarantee = "exactly-once",
    transactional_id_prefix: str | None = None,
    transaction_timeout_ms: int = 900_000,
    properties: dict[str, str] | None = None,
) -> Any:
    """A ``KafkaSink`` for ``Row(topic, key, value)`` elements (see ``to_kafka_rows``).

    Needs the Kafka jars on the job (``add_kafka_jars(env)``; ``write_json_topic`` does it).

    Args:
        bootstrap_servers: ``host:port[,host:port...]``.
        delivery_guarantee: ``"exactly-once"`` (default; transactions committed at
            checkpoints), ``"at-least-once"`` or ``"none"``. See the module docstring.
        transactional_id_prefix: with exactly-once, the prefix of the transactional ids: unique
            per job on the Kafka cluster, stable across its restarts (required then).
        transaction_timeout_ms: with exactly-once, the producer's ``transaction.timeout.ms``:
            more than checkpoint interval + checkpoint duration + restart time, at most the
            broker's ``transaction.max.timeout.ms`` (default 900,000 = 15 min, both).
        properties: more Kafka producer properties.

    Returns:
        A ``pyflink.datastream.connectors.kafka.KafkaSink``.

    Raises:
        ValueError: for an unknown guarantee, or exactly-once without a prefix.

    """
    from pyflink.datastream.connectors.base import DeliveryGuarantee as FlinkGuarantee
    from pyflink.datastream.connectors.kafka import KafkaSink

    guarantees = {"exactly-once": FlinkGuarantee.EXACTLY_ONCE,
                  "at-least-once": FlinkGuarantee.AT_LEAST_ONCE, "none": FlinkGuarantee.NONE}
    if delivery_guarantee not in guarantees:
        raise ValueError(f"unknown delivery_guarantee {delivery_guarantee!r} "
                         f"({', '.join(guarantees)})")
    builder = (KafkaSink.builder()
               .set_bootstrap_servers(bootstrap_servers)
               .set_delivery_guarantee(guarantees[delivery_guarantee]))
    props = dict(properties or {})
    if delivery_guarantee == "exactly-once":
        if not transactional_id_prefix:
            raise ValueError("exactly-once delivery needs a transactional_id_prefix")
        builder.set_transactional_id_prefix(transactional_id_prefix)
        props.setdefault("transaction.timeout.ms", str(transaction_timeout_ms))
    for k, v in props.items():
        builder.set_property(k, str(v))
    # PyFlink's record serializer builder cannot take the key from a field; ours takes
    # topic, key and value from the Row.
    builder._j_builder.setRecordSerializer(new_java(SERIALIZER))
    return builder.build()


def write_json_topic(
    ds: Any,
    bootstrap_servers: str,
    topic: str,
    *,
    key_selector: Callable[[Any], Any] | None = None,
    delivery_guarantee: DeliveryGuarantee = "exactly-once",
    transactional_id_prefix: str | None = None,
    transaction_timeout_ms: int = 900_000,
    properties: dict[str, str] | None = None,
    name: str | None = None,
) -> Any:
    """Write records (an agent's outputs) to a topic as JSON values, keyed by the agent key.

    Args:
        ds: a ``DataStream`` of records with a JSON form (e.g. ``builder.to_datastream()``,
            whose outputs may be pydantic models); see ``to_kafka_rows``.
        bootstrap_servers: ``host:port[,host:port...]``.
        topic: the topic.
        key_selector: the Kafka key of a record, normally the agent key (default: the
            record's ``"key"`` field or attribute). Records of one key go to one partition,
            in order.
        delivery_guarantee: ``"exactly-once"`` (default), ``"at-least-once"`` or ``"none"``;
            see the module docstring (exactly-once needs checkpointing: on a local
            MiniCluster a job without it is refused).
        transactional_id_prefix: default ``flink-agents-py-<topic>``; see ``kafka_sink``.
        transaction_timeout_ms: see ``kafka_sink``.
        properties: more Kafka producer properties; ``max.request.size`` (default 1,048,576)
            is also the size over which a record is written as an error row in its place
            (see ``to_kafka_rows``).
        name: the sink's name and uid (default ``kafka-sink-<topic>``).

    Returns:
        The ``DataStreamSink``.

    Raises:
        ConnectionError: on a local MiniCluster, when none of ``bootstrap_servers`` answers
            (see ``check_servers``). Exactly-once output from a local job without
            checkpointing is logged as a warning (a bounded job's output is committed at its
            end only, an unbounded job's never).

    """
    label = name or f"kafka-sink-{topic}"
    env = ds.get_execution_environment()
    if delivery_guarantee == "exactly-once":
        _check_checkpointing(env, topic)
    check_servers(env, bootstrap_servers)
    add_kafka_jars(env)
    sink = kafka_sink(bootstrap_servers, delivery_guarantee=delivery_guarantee,
                      transactional_id_prefix=transactional_id_prefix or f"flink-agents-py-{topic}",
                      transaction_timeout_ms=transaction_timeout_ms, properties=properties)
    max_request = int((properties or {}).get("max.request.size", MAX_REQUEST_BYTES))
    rows = to_kafka_rows(ds, topic, key_selector, name=f"{label}-rows",
                         max_request_bytes=max_request)
    return rows.sink_to(sink).name(label).uid(label)
