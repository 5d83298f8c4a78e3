"""A real Apache Kafka broker for tests: KRaft, one node, 127.0.0.1, free ports, local Java.

The broker runs from the ``org.apache.kafka:kafka_2.13`` jars and their dependencies, fetched
from Maven Central by ``scripts/fetch_jars.sh broker`` (``make setup`` runs it; ``KafkaBroker``
runs it too when the jars are missing) into ``.cache/kafka_2.13-<version>/libs``. No Kafka
distribution archive and no Docker: ``java -cp libs/* kafka.Kafka server.properties``.

Usage::

    broker = KafkaBroker(tmp_dir).start()      # formats storage, starts, waits until ready
    broker.create_topics(["in", "out"], partitions=2)
    ...  broker.bootstrap  ->  "127.0.0.1:PORT"
    broker.stop()                              # SIGTERM to its PID, SIGKILL after a grace time
"""

from __future__ import annotations

import base64
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterable
from typing import Any

from support.waiting import QUICK_S, SLOW_S, TRANSIENT, retry, wait_until

try:  # what a busy broker's late answer raises (a timeout): "not yet", asked again
    from confluent_kafka import KafkaException

    KAFKA_TRANSIENT: tuple[type[BaseException], ...] = (KafkaException,)
except ImportError:  # the Kafka tests skip without the client
    KAFKA_TRANSIENT = ()

KAFKA_VERSION = "4.1.1"  # keep in step with scripts/fetch_jars.sh (FLINK_AGENTS_PY_KAFKA_BROKER)
ROOT = pathlib.Path(__file__).resolve().parents[1]
FETCH_SCRIPT = ROOT / "scripts" / "fetch_jars.sh"


def _cache_root() -> pathlib.Path:
    return pathlib.Path(os.environ.get("FLINK_AGENTS_PY_CACHE")
                        or pathlib.Path.home() / ".cache" / "flink-agents-py")


def broker_libs(fetch: bool = True) -> pathlib.Path:
    """The folder of the broker's jars; fetched (``scripts/fetch_jars.sh broker``) if missing.

    Raises:
        FileNotFoundError: when the jars are missing and ``fetch`` is false or fetching failed.
    """
    name = f"kafka_2.13-{KAFKA_VERSION}"
    for d in (ROOT / ".cache" / name, _cache_root() / name):
        if (d / ".complete").exists():
            return d / "libs"
    if fetch and FETCH_SCRIPT.exists():
        subprocess.run(["bash", str(FETCH_SCRIPT), "broker"], check=True)
        return broker_libs(fetch=False)
    raise FileNotFoundError(f"no {name} jars: run `bash scripts/fetch_jars.sh broker`")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def java_bin() -> str:
    """The ``java`` to run (``$JAVA_HOME/bin/java`` if set, else from ``PATH``)."""
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return os.path.join(home, "bin", "java")
    found = shutil.which("java")
    if not found:
        raise FileNotFoundError("no java on PATH (Java 17+ is needed for Kafka 4)")
    return found


LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = {level}
logger.state.name = state.change.logger
logger.state.level = warn
"""


class KafkaBroker:
    """One KRaft Kafka node (broker and controller) as a child Java process.

    Args:
        workdir: a folder for its configuration, data and log (``server.log``).
        port: the client port (default: a free one); the controller gets another free port.
        heap_mb: the JVM's max heap.
        log_level: the log4j2 level of ``server.log``.
    """

    def __init__(self, workdir: str | os.PathLike[str], port: int | None = None,
                 heap_mb: int = 512, log_level: str = "INFO") -> None:
        self.workdir = pathlib.Path(workdir)
        self.port = port or free_port()
        self.controller_port = free_port()
        self.heap_mb = heap_mb
        self.log_level = log_level
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_in_s: float | None = None

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The broker's process id while it runs."""
        return self.proc.pid if self.proc is not None else None

    def _properties(self) -> str:
        data = self.workdir / "data"
        return "\n".join([
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"log.dirs={data}",
            "num.partitions=1",
            "auto.create.topics.enable=false",
            # one node: every internal topic with one replica and few partitions (fast start)
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=4",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "transaction.state.log.num.partitions=4",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "transaction.max.timeout.ms=900000",
            "log.flush.interval.messages=9223372036854775807",
            "num.network.threads=2",
            "num.io.threads=2",
            "background.threads=2",
            "log.cleaner.threads=1",
            "log.cleaner.backoff.ms=1000",
            "",
        ])

    def _java(self, main: str, *args: str, stdout: Any = None) -> list[str]:
        libs = broker_libs()
        return [
            java_bin(), f"-Xmx{self.heap_mb}m", "-Xms128m", "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
            "-cp", f"{libs}/*", main, *args,
        ]

    def start(self, timeout_s: float = SLOW_S) -> KafkaBroker:
        """Format the storage, start the broker and wait until it answers metadata requests.

        Raises:
            RuntimeError: when formatting fails, the process exits, or it is not ready in time
                (the last lines of ``server.log`` are in the message).
        """
        t0 = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "server.properties").write_text(self._properties())
        (self.workdir / "log4j2.properties").write_text(
            LOG4J2.format(log=self.workdir / "server.log", level=self.log_level))
        cluster_id = "-"
        while cluster_id.startswith("-"):  # one in 64 would read as an option of -t (as
            # Kafka's own Uuid.randomUuid avoids): "argument --cluster-id/-t: expected one"
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        fmt = subprocess.run(
            self._java("kafka.tools.StorageTool", "format", "-t", cluster_id,
                       "-c", str(self.workdir / "server.properties")),
            capture_output=True, text=True, timeout=120)
        if fmt.returncode != 0:
            raise RuntimeError(f"formatting Kafka storage failed:\n{fmt.stdout}\n{fmt.stderr}")
        out = open(self.workdir / "stdout.log", "wb")  # noqa: SIM115 (closed with the process)
        self.proc = subprocess.Popen(
            self._java("kafka.Kafka", str(self.workdir / "server.properties")),
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        out.close()
        try:
            self._wait_ready(t0 + timeout_s)
        except BaseException:
            self.stop()
            raise
        self.started_in_s = time.monotonic() - t0
        return self

    def _tail(self, n: int = 30) -> str:
        lines: list[str] = []
        for name in ("stdout.log", "server.log"):
            p = self.workdir / name
            if p.exists():
                lines += p.read_text(errors="replace").splitlines()[-n:]
        return "\n".join(lines)

    def _wait_ready(self, deadline: float) -> None:
        from confluent_kafka.admin import AdminClient

        # log_level 2: quiet librdkafka's "connection refused" lines while the broker starts
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 1000,
                             "log_level": 2})
        def exited() -> str | None:
            assert self.proc is not None
            code = self.proc.poll()
            return None if code is None else f"the Kafka broker exited with {code}"

        try:
            wait_until("the Kafka broker answering metadata requests",
                       lambda: admin.list_topics(timeout=2).brokers,
                       max(1.0, deadline - time.monotonic()), interval_s=0.2,
                       transient=(*TRANSIENT, *KAFKA_TRANSIENT), abort=exited,
                       details=self._tail)
        except AssertionError as e:
            raise RuntimeError(str(e)) from None

    def admin(self) -> Any:
        """A ``confluent_kafka.admin.AdminClient`` for this broker."""
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap})

    def create_topics(self, names: Iterable[str], partitions: int = 1,
                      config: dict[str, str] | None = None, timeout_s: float = QUICK_S) -> None:
        """Create topics (one replica) and wait until their leaders are known.

        Raises:
            RuntimeError: when a topic cannot be created.
        """
        from confluent_kafka.admin import NewTopic

        names = list(names)
        admin = self.admin()
        futures = admin.create_topics(
            [NewTopic(n, num_partitions=partitions, replication_factor=1, config=config or {})
             for n in names], operation_timeout=timeout_s)
        for name, fut in futures.items():
            try:
                fut.result(timeout=timeout_s)
            except Exception as e:  # noqa: BLE001
                raise RuntimeError(f"creating topic {name} failed: {e}") from e
        def led() -> bool:
            md = admin.list_topics(timeout=10)
            return all(n in md.topics and md.topics[n].error is None
                       and len(md.topics[n].partitions) == partitions
                       and all(p.leader >= 0 for p in md.topics[n].partitions.values())
                       for n in names)

        try:
            wait_until(f"leaders of topics {names}", led, timeout_s, interval_s=0.1,
                       transient=(*TRANSIENT, *KAFKA_TRANSIENT))
        except AssertionError as e:
            raise RuntimeError(str(e)) from None

    def stop(self, grace_s: float = 15.0) -> None:
        """Stop the broker by its PID: SIGTERM (controlled shutdown), SIGKILL after ``grace_s``."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
            except ProcessLookupError:
                pass
        self.proc = None

    def __enter__(self) -> KafkaBroker:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- client helpers (confluent-kafka) ----------------------------------------------------------
def produce(bootstrap: str, topic: str, records: Iterable[tuple[str | None, bytes | str]],
            timeout_s: float = SLOW_S) -> list[tuple[int, int]]:
    """Produce ``(key, value)`` records in order; returns each one's ``(partition, offset)``.

    Raises:
        RuntimeError: when a record was not delivered.
    """
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5, "batch.num.messages": 10000})
    where: list[Any] = []
    errors: list[str] = []

    def on_delivery(i: int) -> Any:
        def cb(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(f"record {i}: {err}")
            else:
                where[i] = (msg.partition(), msg.offset())
        return cb

    for i, (key, value) in enumerate(records):
        where.append(None)
        while True:
            try:
                producer.produce(topic, key=key, value=value, on_delivery=on_delivery(i))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(timeout_s)
    if left or errors or any(w is None for w in where):
        raise RuntimeError(f"{left} records not delivered; errors: {errors[:5]}")
    return where


def consume_all(bootstrap: str, topic: str, *, read_committed: bool = True,
                timeout_s: float = SLOW_S) -> list[Any]:
    """All records of ``topic``, from the beginning to the end it has now.

    With ``read_committed`` (default) the end is the last stable offset: records of open or
    aborted transactions are not returned.

    Raises:
        RuntimeError: on a consumer error, or when the end is not reached in ``timeout_s``.

    Returns:
        ``confluent_kafka.Message`` objects, in ``(partition, offset)`` order.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"test-reader-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "enable.partition.eof": False,
        "isolation.level": "read_committed" if read_committed else "read_uncommitted",
    })
    try:
        # metadata and offsets: asked again while the broker is too busy to answer in time
        partitions = sorted(retry(f"the partitions of {topic}", lambda: consumer.list_topics(
            topic, timeout=10).topics[topic].partitions, transient=KAFKA_TRANSIENT))
        ends = {p: retry(f"the end of {topic}/{p}", lambda p=p: consumer.get_watermark_offsets(
            TopicPartition(topic, p), timeout=10)[1], transient=KAFKA_TRANSIENT)
            for p in partitions}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        out: list[Any] = []
        deadline = time.monotonic() + timeout_s
        while True:
            current = consumer.position([TopicPartition(topic, p) for p in partitions])
            positions = {tp.partition: tp.offset for tp in current}
            if all(ends[p] <= 0 or positions.get(p, -1) >= ends[p] for p in partitions):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"reading {topic}: at {positions}, end {ends} not reached")
            for msg in consumer.consume(num_messages=10000, timeout=0.2):
                if msg.error() is not None:
                    raise RuntimeError(f"consuming {topic}: {msg.error()}")
                out.append(msg)
    finally:
        consumer.close()
    return sorted(out, key=lambda m: (m.partition(), m.offset()))
