"""Kafka in and out of agent jobs, with Flink's own Kafka connector.

Reading: ``read_json_topic`` builds a ``pyflink.datastream.connectors.kafka.KafkaSource`` and
turns each record into a Python value (JSON by default). Values arrive as bytes and are
decoded with the rules of ``flink_agents_py.io`` (a leading byte order mark removed; over
``max_record_bytes``, a NUL byte or invalid UTF-8 refused): a record that cannot be decoded or
does not parse leaves through ``KafkaInput.errors`` with its topic, partition and offset, and
the job goes on.
``from_kafka`` also keys the records for an agent (``FlinkAgentBuilder``).

Writing: ``write_json_topic`` (and ``kafka_sink`` for several topics at once) builds a
``pyflink.datastream.connectors.kafka.KafkaSink`` writing JSON values keyed by the agent key.

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

Jars: the connector is the shaded ``org.apache.flink:flink-sql-connector-kafka`` jar
(``KAFKA_CONNECTOR_VERSION``, fetched from Maven Central by ``scripts/fetch_jars.sh``, which
``make setup`` runs). PyFlink's builders only take value-only deserializers and cannot take a
record's key from a field, so two small schemas (``java/flinkagentspy/kafka/KafkaRows.java``)
are compiled once with ``javac`` into a helper jar: records travel between Java and Python as
``Row(topic, partition, offset, timestamp, key, value)`` and ``Row(topic, key, value)``.
``add_kafka_jars(env)`` adds both jars to a job.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple
from urllib.parse import urlparse

import orjson

from ..io import MAX_RECORD_BYTES, decode_record, excerpt

__all__ = [
    "KAFKA_CONNECTOR_VERSION",
    "KafkaInput",
    "KafkaMessage",
    "add_kafka_jars",
    "from_kafka",
    "kafka_jars",
    "kafka_sink",
    "parse_kafka_url",
    "read_json_topic",
    "to_kafka_rows",
    "write_json_topic",
]

KAFKA_CONNECTOR_VERSION = "5.0.0-2.2"
"""``flink-sql-connector-kafka`` release used: the newest (for Flink 2.2; none exists for 2.3
yet), tested with apache-flink 2.3.0. Keep in step with ``scripts/fetch_jars.sh``."""

_CONNECTOR_JAR = f"flink-sql-connector-kafka-{KAFKA_CONNECTOR_VERSION}.jar"
_JAVA_SOURCE = pathlib.Path(__file__).parent / "java" / "flinkagentspy" / "kafka" / "KafkaRows.java"
_DESERIALIZER = "flinkagentspy.kafka.KafkaRows$RecordRowDeserializer"
_SERIALIZER = "flinkagentspy.kafka.KafkaRows$TopicKeyValueSerializer"
_SINK_FIELDS = ["topic", "key", "value"]

DeliveryGuarantee = Literal["exactly-once", "at-least-once", "none"]


# -- jars --------------------------------------------------------------------------------------
def _cache_root() -> pathlib.Path:
    return pathlib.Path(os.environ.get("FLINK_AGENTS_PY_CACHE")
                        or pathlib.Path.home() / ".cache" / "flink-agents-py")


def _jar_dirs() -> list[pathlib.Path]:
    """Where jars are looked for, first match wins."""
    dirs = []
    if os.environ.get("FLINK_AGENTS_PY_JARS"):
        dirs.append(pathlib.Path(os.environ["FLINK_AGENTS_PY_JARS"]))
    dirs.append(pathlib.Path.cwd() / ".cache" / "jars")
    dirs.append(pathlib.Path(__file__).resolve().parents[2] / ".cache" / "jars")  # a checkout
    dirs.append(_cache_root() / "jars")
    return dirs


def _connector_jar() -> pathlib.Path:
    for d in _jar_dirs():
        if (d / _CONNECTOR_JAR).is_file():
            return d / _CONNECTOR_JAR
    raise FileNotFoundError(
        f"{_CONNECTOR_JAR} not found in {', '.join(map(str, _jar_dirs()))}: run `make setup` "
        "or `bash scripts/fetch_jars.sh connector` (it fetches it from Maven Central), or set "
        "FLINK_AGENTS_PY_JARS to a folder holding it")


def _flink_dist_jar() -> pathlib.Path:
    import pyflink

    lib = pathlib.Path(pyflink.__file__).parent / "lib"
    found = sorted(lib.glob("flink-dist*.jar"))
    if not found:
        raise FileNotFoundError(f"no flink-dist jar in {lib}")
    return found[0]


def _helper_jar(connector: pathlib.Path) -> pathlib.Path:
    """The compiled schemas, built with javac on first use and cached by content hash."""
    source = _JAVA_SOURCE.read_bytes()
    digest = hashlib.sha256(source + KAFKA_CONNECTOR_VERSION.encode()).hexdigest()[:12]
    name = f"flink-agents-py-kafka-{digest}.jar"
    for d in _jar_dirs():
        if (d / name).is_file():
            return d / name
    java_home = os.environ.get("JAVA_HOME")
    javac = shutil.which("javac") or (
        os.path.join(java_home, "bin", "javac") if java_home else None)
    if not javac or not os.path.exists(javac):
        raise FileNotFoundError(
            f"{name} is not built and no javac was found: install a JDK (11+) and run "
            "`make setup`, or build it where a JDK is and put it in FLINK_AGENTS_PY_JARS")
    out_dir = _cache_root() / "jars"
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        classes = pathlib.Path(tmp) / "classes"
        classpath = os.pathsep.join([str(_flink_dist_jar()), str(connector)])
        proc = subprocess.run(
            [javac, "--release", "11", "-nowarn", "-encoding", "UTF-8", "-d", str(classes),
             "-cp", classpath, str(_JAVA_SOURCE)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"compiling {_JAVA_SOURCE.name} failed:\n{proc.stderr}")
        tmp_jar = pathlib.Path(tmp) / name
        with zipfile.ZipFile(tmp_jar, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
            for f in sorted(classes.rglob("*.class")):
                jar.write(f, f.relative_to(classes).as_posix())
        os.replace(tmp_jar, out_dir / name)  # atomic: concurrent builders write the same bytes
    return out_dir / name


def kafka_jars() -> list[str]:
    """Paths of the jars a Kafka job needs: the connector and the compiled helper schemas.

    The helper jar is compiled with ``javac`` the first time (about 2 s) and cached in the shared
    cache (``$FLINK_AGENTS_PY_CACHE/jars``, default ``~/.cache/flink-agents-py/jars``).
    Looked up in order: ``$FLINK_AGENTS_PY_JARS``, ``./.cache/jars``, the checkout's
    ``.cache/jars``, the shared cache.

    Returns:
        Absolute paths ``[connector_jar, helper_jar]``.

    Raises:
        FileNotFoundError: when the connector jar was not fetched (run ``make setup``), or the
            helper jar is not built and no JDK is there to build it.
        RuntimeError: when compiling the helper fails.

    """
    connector = _connector_jar()
    return [str(connector.resolve()), str(_helper_jar(connector).resolve())]


def add_kafka_jars(env: Any) -> list[str]:
    """Add the Kafka connector and helper jars to ``env`` (``env.add_jars``).

    Args:
        env: a PyFlink ``StreamExecutionEnvironment``.

    Returns:
        The ``file://`` URLs added.

    """
    from pyflink.java_gateway import get_gateway

    urls = [pathlib.Path(p).as_uri() for p in kafka_jars()]
    jvm = get_gateway().jvm
    config = jvm.org.apache.flink.python.util.PythonConfigUtil.getEnvironmentConfig(
        env._j_stream_execution_environment)
    present = config.getString(jvm.org.apache.flink.configuration.PipelineOptions.JARS.key(), "")
    missing = [u for u in urls if u not in (present or "")]
    if missing:
        env.add_jars(*missing)
    return urls


def _new_java(class_name: str) -> Any:
    from pyflink.util.java_utils import load_java_class

    return load_java_class(class_name).getDeclaredConstructor(None).newInstance(None)


def parse_kafka_url(url: str) -> tuple[str, str]:
    """Split ``kafka://HOST:PORT[,HOST:PORT...]/topic`` into ``(bootstrap_servers, topic)``.

    Raises:
        ValueError: when ``url`` is not such a URL.

    """
    parsed = urlparse(url)
    topic = parsed.path.lstrip("/")
    if parsed.scheme != "kafka" or not parsed.netloc or not topic or "/" in topic:
        raise ValueError(f"expected kafka://HOST:PORT/topic, got {url!r}")
    return parsed.netloc, topic


# -- reading -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class KafkaMessage:
    """One Kafka record as read, before parsing.

    Attributes:
        topic: the topic.
        partition: the partition.
        offset: the offset within the partition.
        timestamp: the record's timestamp (epoch ms).
        key: the key as UTF-8 text (invalid bytes as U+FFFD), or ``None``.
        value: the value as text (strictly decoded UTF-8, byte order mark removed), or
            ``None`` (a tombstone). Values that cannot be decoded never reach ``parse``.

    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: str | None
    value: str | None

    def where(self) -> dict[str, Any]:
        """``{"topic", "partition", "offset"}``: where the record is."""
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset}


def json_value(message: KafkaMessage) -> Any:
    """The default parser: the record's value as JSON.

    Raises:
        ValueError: for a tombstone or a value that is not JSON.

    """
    if message.value is None:
        raise ValueError("the record has no value")
    try:
        return orjson.loads(message.value)
    except orjson.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e})") from e


def _error(message: KafkaMessage, error: str, raw: bytes | str | None = None) -> dict[str, Any]:
    return {"kind": "error", **message.where(), "key": message.key, "error": error,
            "value": excerpt(message.value if raw is None else raw, 1000)}


class _Parse:
    """Row from the helper deserializer -> parsed record; failures to the error side output.

    The row's value is bytes (text is accepted too); it is decoded with
    ``flink_agents_py.io.decode_record`` before ``parse`` sees it.
    """

    def __init__(self, parse: Callable[[KafkaMessage], Any], error_tag: Any,
                 max_record_bytes: int | None = MAX_RECORD_BYTES) -> None:
        self.parse = parse
        self.error_tag = error_tag
        self.max_record_bytes = max_record_bytes

    def __call__(self, row: Any) -> Iterator[Any]:
        raw = row[5]
        message = KafkaMessage(row[0], row[1], row[2], row[3], row[4], None)
        if raw is not None:
            data = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)
            try:
                value = decode_record(data, strip_bom=True,
                                      max_record_bytes=self.max_record_bytes)
            except ValueError as e:
                yield self.error_tag, _error(message, str(e), data)
                return
            message = KafkaMessage(row[0], row[1], row[2], row[3], row[4], value)
        try:
            yield self.parse(message)
        except Exception as e:  # noqa: BLE001 - a bad record is reported, never fatal
            text = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
            yield self.error_tag, _error(message, text)


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

    """
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream import OutputTag
    from pyflink.datastream.connectors.kafka import KafkaSource

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
    builder._j_builder.setDeserializer(_new_java(_DESERIALIZER))
    raw = env.from_source(builder.build(), watermark_strategy or WatermarkStrategy.no_watermarks(),
                          label).uid(f"{label}-source")
    error_tag = OutputTag(f"{label}-errors", Types.PICKLED_BYTE_ARRAY())
    parsed = (raw.flat_map(_Parse(parse or json_value, error_tag, max_record_bytes),
                           output_type=Types.PICKLED_BYTE_ARRAY())
              .name(f"{label}-parse").uid(f"{label}-parse"))
    return KafkaInput(parsed, parsed.get_side_output(error_tag))


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
        ``DataStream`` of records that failed to parse.

    """
    records, errors = read_json_topic(agents_env.env, bootstrap_servers, topic, **options)
    return agents_env.from_datastream(records, key_selector=key_selector), errors


# -- writing -----------------------------------------------------------------------------------
def _key_text(key: Any) -> str | None:
    if key is None or isinstance(key, str):
        return key
    return orjson.dumps(key).decode()


def _default_key(record: Any) -> Any:
    return record.get("key") if isinstance(record, dict) else None


class _ToRow:
    """A record -> ``Row(topic, key, value)`` (JSON value) for the helper serializer."""

    def __init__(self, topic: str | Callable[[Any], str],
                 key_selector: Callable[[Any], Any]) -> None:
        self.topic = topic
        self.key_selector = key_selector

    def __call__(self, record: Any) -> Any:
        from pyflink.common import Row

        topic = self.topic(record) if callable(self.topic) else self.topic
        return Row(topic, _key_text(self.key_selector(record)),
                   orjson.dumps(record, option=orjson.OPT_NON_STR_KEYS).decode())


def to_kafka_rows(ds: Any, topic: str | Callable[[Any], str],
                  key_selector: Callable[[Any], Any] | None = None, name: str | None = None) -> Any:
    """Map records to the ``Row(topic, key, value)`` elements ``kafka_sink`` writes.

    Use it to send several streams (results, errors) to different topics through one sink
    (one transaction per checkpoint): ``to_kafka_rows(a, "x").union(to_kafka_rows(b, "y"))``.

    Args:
        ds: a ``DataStream`` of JSON-serialisable records.
        topic: the topic, or a function of the record giving it.
        key_selector: the record's Kafka key (default: its ``"key"`` field); strings are
            written as they are, other values as JSON, ``None`` as no key.
        name: the map's name and uid (default ``to-kafka-<topic>``).

    Returns:
        A ``DataStream`` of ``Row(topic, key, value)``.

    """
    from pyflink.common import Types

    label = name or f"to-kafka-{topic if isinstance(topic, str) else 'rows'}"
    row_type = Types.ROW_NAMED(_SINK_FIELDS, [Types.STRING(), Types.STRING(), Types.STRING()])
    return (ds.map(_ToRow(topic, key_selector or _default_key), output_type=row_type)
            .name(label).uid(label))


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
    builder._j_builder.setRecordSerializer(_new_java(_SERIALIZER))
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
        ds: a ``DataStream`` of JSON-serialisable records (e.g. ``builder.to_datastream()``).
        bootstrap_servers: ``host:port[,host:port...]``.
        topic: the topic.
        key_selector: the Kafka key of a record, normally the agent key (default: the
            record's ``"key"`` field). Records of one key go to one partition, in order.
        delivery_guarantee: ``"exactly-once"`` (default), ``"at-least-once"`` or ``"none"``;
            see the module docstring (exactly-once needs checkpointing).
        transactional_id_prefix: default ``flink-agents-py-<topic>``; see ``kafka_sink``.
        transaction_timeout_ms: see ``kafka_sink``.
        properties: more Kafka producer properties.
        name: the sink's name and uid (default ``kafka-sink-<topic>``).

    Returns:
        The ``DataStreamSink``.

    """
    label = name or f"kafka-sink-{topic}"
    add_kafka_jars(ds.get_execution_environment())
    sink = kafka_sink(bootstrap_servers, delivery_guarantee=delivery_guarantee,
                      transactional_id_prefix=transactional_id_prefix or f"flink-agents-py-{topic}",
                      transaction_timeout_ms=transaction_timeout_ms, properties=properties)
    rows = to_kafka_rows(ds, topic, key_selector, name=f"{label}-rows")
    return rows.sink_to(sink).name(label).uid(label)
