"""Reading Kafka topics into agent jobs with Flink's ``KafkaSource``.

``read_json_topic`` builds a ``pyflink.datastream.connectors.kafka.KafkaSource`` and turns each
record into a Python value (JSON by default). Values arrive as bytes and are decoded with the
rules of ``flink_agents_py.io`` (a leading byte order mark removed; over ``max_record_bytes``, a
NUL byte or invalid UTF-8 refused): a record that cannot be decoded or does not parse leaves
through ``KafkaInput.errors`` with its topic, partition and offset, and the job goes on.
``from_kafka`` also keys the records for an agent (``FlinkAgentBuilder``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from ..api import SerializationError
from ..api.internal import described, error_text
from ..io import MAX_RECORD_BYTES, decode_record, excerpt
from ..runtime.internal import loads_record
from ._fresh import shipped
from ._kafka_jars import DESERIALIZER, add_kafka_jars, check_servers, new_java
from ._keyed_input import Positioned, positioned_key, without_positions
from ._unread_errors import note_input_errors

__all__ = ["KafkaInput", "KafkaMessage", "from_kafka", "json_value", "read_json_topic"]


@dataclass(frozen=True)
class KafkaMessage:
    """One Kafka record as read, before parsing.

    Attributes:
        topic: the topic.
        partition: the partition.
        offset: the offset within the partition.
        timestamp: the record's timestamp (epoch ms).
        key: the key as text when its bytes are UTF-8, else its bytes as they are (so two
            distinct keys are never read as one: ``bytes`` is a key an agent takes, and
            ``b"1"`` is another key than ``"1"``), or ``None`` (a record without a key).
        value: the value as text (strictly decoded UTF-8, byte order mark removed), or
            ``None`` (a tombstone). Values that cannot be decoded never reach ``parse``.

    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: str | bytes | None
    value: str | None

    def where(self) -> dict[str, Any]:
        """``{"topic", "partition", "offset"}``: where the record is."""
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset}


def json_value(message: KafkaMessage) -> Any:
    """The default parser: the record's value as JSON.

    Returns:
        The parsed value.

    Raises:
        ValueError: for a tombstone, a value that is not JSON, or JSON ``null`` (no record:
            a Flink stream of Python values cannot carry ``None``).

    """
    if message.value is None:
        raise ValueError("the record has no value")
    try:
        record = loads_record(message.value)
    except orjson.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e})") from e
    except SerializationError as e:  # an integer JSON readers would turn into a float
        raise ValueError(str(e)) from None
    if record is None:
        raise ValueError("the value is JSON null: no record")
    return record


def _error(message: KafkaMessage, error: str, raw: bytes | str | None = None) -> dict[str, Any]:
    return {"kind": "error", **message.where(), "key": message.key, "error": error,
            "value": excerpt(message.value if raw is None else raw, 1000)}


def _key(raw: Any) -> str | bytes | None:
    r"""A record key as ``KafkaMessage.key`` holds it: text when UTF-8, else its bytes.

    A lenient decode (each invalid byte as U+FFFD) would read ``b"\xff"`` and ``b"\xfe"``
    as one key, and one key's run would see and change the other's memory; the bytes keep
    them apart. (Rows of helper jars built before keys came as bytes carry text.)

    Returns:
        The key: ``str``, ``bytes`` or ``None`` (no key).
    """
    if raw is None or isinstance(raw, str):
        return raw
    data = bytes(raw)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


class _Parse:
    """Row from the helper deserializer -> parsed record; failures to the error side output.

    The row's value is bytes (text is accepted too); it is decoded with
    ``flink_agents_py.io.decode_record`` before ``parse`` sees it.
    """

    def __init__(self, parse: Callable[[KafkaMessage], Any], error_tag: Any,
                 max_record_bytes: int | None = MAX_RECORD_BYTES,
                 positioned: bool = False) -> None:
        self.parse = parse
        self.error_tag = error_tag
        self.max_record_bytes = max_record_bytes
        self.positioned = positioned

    def __call__(self, row: Any) -> Iterator[Any]:
        raw, key = row[5], _key(row[4])
        message = KafkaMessage(row[0], row[1], row[2], row[3], key, None)
        if raw is not None:
            data = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)
            try:
                value = decode_record(data, strip_bom=True,
                                      max_record_bytes=self.max_record_bytes)
            except ValueError as e:
                yield self.error_tag, _error(message, str(e), data)
                return
            message = KafkaMessage(row[0], row[1], row[2], row[3], key, value)
        try:
            record = self.parse(message)
        except Exception as e:  # noqa: BLE001 - a bad record is reported, never fatal
            text = error_text(e) if isinstance(e, ValueError) else described(e)
            yield self.error_tag, _error(message, text)
            return
        if record is None:  # thread mode hands None to Java as null: the job would fail
            yield self.error_tag, _error(message, "parse returned None, which a Flink stream "
                                         "cannot carry: return a record, or raise ValueError "
                                         "to reject it")
            return
        if self.positioned:  # for the agent operator's error rows (``from_kafka``)
            yield Positioned(f"topic {message.topic} partition {message.partition} offset "
                             f"{message.offset}", record)
            return
        yield record


class KafkaInput(NamedTuple):
    """What ``read_json_topic`` returns.

    Attributes:
        records: the parsed records (a ``DataStream`` of Python values).
        errors: records that failed to parse, as dicts ``{"kind": "error", "topic",
            "partition", "offset", "key", "error", "value"}`` (value: an excerpt of at most
            1,000 characters, bad bytes written as backslash escapes).

    """

    records: Any
    errors: Any


def _offsets(spec: Any, *, for_stop: bool = False) -> Any:
    from pyflink.datastream.connectors.kafka import (
        KafkaOffsetResetStrategy,
        KafkaOffsetsInitializer,
    )

    if isinstance(spec, KafkaOffsetsInitializer):
        return spec
    if spec == "earliest":
        return KafkaOffsetsInitializer.earliest()
    if spec == "latest":
        return KafkaOffsetsInitializer.latest()
    if spec == "committed" and not for_stop:
        return KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.EARLIEST)
    if isinstance(spec, int) and not isinstance(spec, bool):
        return KafkaOffsetsInitializer.timestamp(spec)
    raise ValueError(f"unknown offsets {spec!r}: 'earliest', 'latest', 'committed', an epoch-ms "
                     "timestamp or a KafkaOffsetsInitializer")


def read_json_topic(
    env: Any,
    bootstrap_servers: str,
    topic: str | list[str],
    *,
    parse: Callable[[KafkaMessage], Any] | None = None,
    starting_offsets: Any = "earliest",
    bounded: bool | Any = False,
    watermark_strategy: Any = None,
    group_id: str | None = None,
    properties: dict[str, str] | None = None,
    name: str | None = None,
    max_record_bytes: int | None = MAX_RECORD_BYTES,
) -> KafkaInput:
    """Read a topic into a ``DataStream`` of parsed records, with a ``KafkaSource``.

    The source's offsets are part of Flink's checkpoints, so after a restore the job reads on
    from the checkpointed offsets (offsets are also committed to the consumer group at each
    completed checkpoint, for monitoring and ``starting_offsets="committed"``).

    Args:
        env: the ``StreamExecutionEnvironment``; the Kafka jars are added to it.
        bootstrap_servers: ``host:port[,host:port...]``.
        topic: a topic or a list of topics.
        parse: turns a ``KafkaMessage`` into a record; raise (``ValueError`` by convention) to
            send the record to ``errors`` instead (default ``json_value``: the value as JSON).
            A ``None`` it returns goes to ``errors`` too (no Flink stream carries it).
        starting_offsets: where a job without a checkpoint starts: ``"earliest"`` (default),
            ``"latest"``, ``"committed"`` (the group's committed offsets, else earliest), an
            epoch-ms timestamp, or a ``KafkaOffsetsInitializer``.
        bounded: ``False`` (default): read forever; ``True``: stop at the offsets that are the
            latest when the job starts (the job then finishes); or a ``KafkaOffsetsInitializer``
            (or ``"latest"``/timestamp) giving the stopping offsets.
        watermark_strategy: a ``WatermarkStrategy`` (default ``no_watermarks()``). Records carry
            their Kafka timestamps, so e.g.
            ``WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5))`` needs no
            timestamp assigner.
        group_id: the consumer group (default ``flink-agents-py-<topic>``).
        properties: more Kafka consumer properties.
        name: the source's name and the prefix of its operators' uids (default
            ``kafka-<topic>``).
        max_record_bytes: larger values go to ``errors`` undecoded (``None``: no limit; the
            broker's own limit, 1 MB by default, still applies).

    Returns:
        ``KafkaInput(records, errors)``. A value that is not UTF-8, holds a NUL byte or is over
        ``max_record_bytes`` goes to ``errors``, as does one that ``parse`` refuses (with any
        exception).

    Raises:
        ConnectionError: on a local MiniCluster, when none of ``bootstrap_servers`` answers
            (see ``check_servers``).

    """
    return _read(env, bootstrap_servers, topic, parse=parse, starting_offsets=starting_offsets,
                 bounded=bounded, watermark_strategy=watermark_strategy, group_id=group_id,
                 properties=properties, name=name, max_record_bytes=max_record_bytes)


def _read(env: Any, bootstrap_servers: str, topic: str | list[str], *,
          parse: Callable[[KafkaMessage], Any] | None = None, starting_offsets: Any = "earliest",
          bounded: bool | Any = False, watermark_strategy: Any = None,
          group_id: str | None = None, properties: dict[str, str] | None = None,
          name: str | None = None, max_record_bytes: int | None = MAX_RECORD_BYTES,
          positioned: bool = False) -> KafkaInput:
    """``read_json_topic``; ``positioned``: its records as ``Positioned`` (``from_kafka``).

    Without ``positioned`` the records are handed out without their places, on a stream
    ``from_datastream`` keys with them (``_keyed_input.without_positions``).

    Returns:
        ``KafkaInput(records, errors)``.
    """
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream import OutputTag
    from pyflink.datastream.connectors.kafka import KafkaSource

    check_servers(env, bootstrap_servers)
    add_kafka_jars(env)
    topics = [topic] if isinstance(topic, str) else list(topic)
    label = name or f"kafka-{'-'.join(topics)}"
    builder = (KafkaSource.builder()
               .set_bootstrap_servers(bootstrap_servers)
               .set_topics(*topics)
               .set_group_id(group_id or f"flink-agents-py-{'-'.join(topics)}")
               .set_starting_offsets(_offsets(starting_offsets)))
    if bounded is True:
        builder.set_bounded(_offsets("latest", for_stop=True))
    elif bounded is not False and bounded is not None:
        builder.set_bounded(_offsets(bounded, for_stop=True))
    for k, v in (properties or {}).items():
        builder.set_property(k, str(v))
    # PyFlink's builder only offers value-only deserializers; ours also gives partition/offset.
    builder._j_builder.setDeserializer(new_java(DESERIALIZER))
    raw = env.from_source(builder.build(), watermark_strategy or WatermarkStrategy.no_watermarks(),
                          label).uid(f"{label}-source")
    error_tag = OutputTag(f"{label}-errors", Types.PICKLED_BYTE_ARRAY())
    parsed = (raw.flat_map(shipped(_Parse(parse or json_value, error_tag, max_record_bytes,
                                          positioned=True)),
                           output_type=Types.PICKLED_BYTE_ARRAY())
              .name(f"{label}-parse").uid(f"{label}-parse"))
    errors = parsed.get_side_output(error_tag)
    note_input_errors(env, errors)  # read back and logged when the program never takes it
    # each record with where it was read; ``read_json_topic``'s records without it, which
    # ``from_datastream(records)`` keys with it (``positioned_input``), as ``from_kafka`` does
    return KafkaInput(parsed if positioned else without_positions(parsed, f"{label}-records"),
                      errors)


def from_kafka(
    agents_env: Any,
    bootstrap_servers: str,
    topic: str | list[str],
    *,
    key_selector: Callable[[Any], Any] | None = None,
    **options: Any,
) -> tuple[Any, Any]:
    """Read a topic as an agent's input: ``read_json_topic``, then key the records.

    Example::

        agents = AgentsExecutionEnvironment.flink(env)
        job, bad = from_kafka(agents, "127.0.0.1:9092", "reviews", key_selector=lambda r: r["id"])
        job.apply(MyAgent())
        write_json_topic(job.to_datastream(), "127.0.0.1:9092", "results",
                         key_selector=lambda o: o["id"])

    Args:
        agents_env: a ``FlinkExecutionEnvironment`` (``AgentsExecutionEnvironment.flink(env)``).
        bootstrap_servers: ``host:port[,host:port...]``.
        topic: a topic or a list of topics.
        key_selector: the agent key of a record (default: its ``"key"`` field).
        **options: ``read_json_topic``'s keyword arguments (``parse``, ``starting_offsets``,
            ``bounded``, ``watermark_strategy``, ``group_id``, ``properties``, ``name``).

    Returns:
        ``(builder, errors)``: a ``FlinkAgentBuilder`` to ``apply`` an agent to, and the
        ``DataStream`` of records that failed to parse. A record the agent does not run (its
        key selector fails, it has no JSON form) reaches the agent's ``errors_datastream()``
        with ``execution_id`` naming where it was read (``"topic T partition P offset O"``).

    """
    from ..local import default_key_selector
    from ._builder import _key_function

    # each record carries where it was read, so that the error row of one the agent does not
    # run (its key selector fails, it has no JSON form) names its topic, partition and offset
    records, errors = _read(agents_env.env, bootstrap_servers, topic, positioned=True,
                            **options)
    selector = functools.partial(positioned_key,
                                 _key_function(key_selector) or default_key_selector)
    return agents_env.from_datastream(records, key_selector=selector), errors
